import { spawn } from 'node:child_process';
import { describe, expect, it } from 'vitest';
import { PROCCTL } from '../helpers/daemon.js';
import type { TestClient } from '../helpers/rpc.js';
import { findSshd, startSshd } from '../remote/sshd.js';
import { cli, cliDaemon, type CliDaemon } from './run.js';

let c: TestClient;
let d: CliDaemon['d'];
cliDaemon((x) => ({ c, d } = x), {
  config: { approvals: { rules: [{ match: 'needs-ok', action: 'ask', reason: 'a person decides' }] } },
});

const SCOPE = 'newcomer';

/** Every `procctl …` command a text names, as printed (in backquotes). */
const hintsIn = (text: string) => [...text.matchAll(/`(procctl [^`]+)`/g)].map((m) => m[1]);

/** What a person types for the placeholders hints leave them. */
const FILL: Record<string, string> = { DATA: "$'hello\\n'", N: '0', TEXT: 'an-answer', NUMBER: '1', SECRET: 's3cret', SIGNAL: 'SIGCONT' };

/**
 * Run a hint exactly as printed, by a shell, with `procctl` this checkout's CLI and without the
 * test's own PROCCTL_* variables (as in a new shell): only what the hint says reaches the daemon.
 */
function runHint(hint: string, keep: Record<string, string>, timeoutMs = 20_000): Promise<{ code: number | null; out: string }> {
  const filled = hint.replace(/\b(DATA|N|TEXT|NUMBER|SECRET|SIGNAL)\b/g, (w) => FILL[w]);
  const env: NodeJS.ProcessEnv = { ...process.env };
  for (const k of Object.keys(env)) if (k.startsWith('PROCCTL_')) delete env[k];
  Object.assign(env, keep);
  const script = `procctl() { "${process.execPath}" "${PROCCTL}" "$@"; }\n${filled}`;
  return new Promise((resolve) => {
    const child = spawn('bash', ['-c', script], { env, stdio: ['ignore', 'pipe', 'pipe'], detached: true });
    let out = '';
    child.stdout.on('data', (b) => (out += b));
    child.stderr.on('data', (b) => (out += b));
    const timer = setTimeout(() => process.kill(-child.pid!, 'SIGKILL'), timeoutMs);
    child.on('close', (code) => {
      clearTimeout(timer);
      resolve({ code, out });
    });
  });
}

/** A hint that works reached the same daemon and the same session: no usage error, no other daemon, no unknown session. */
async function expectRuns(hint: string, keep: Record<string, string>): Promise<string> {
  const t0 = Date.now();
  const r = await runHint(hint, keep);
  if (process.env.HINTS_DEBUG) console.log(`${Date.now() - t0} ms, exit ${r.code}: ${hint}`);
  expect(r.code, `\`${hint}\` exited ${r.code}:\n${r.out}`).not.toBe(2);
  expect(r.code, `\`${hint}\`:\n${r.out}`).not.toBe(3);
  expect(r.out, `\`${hint}\``).not.toMatch(/no session "|not_found|cannot reach procctld|unknown option|error: /);
  return r.out;
}

/**
 * The table: every hint the CLI prints on the way (exec --bg, exec --yield, wait, an approval, a
 * question, not_found), each run as printed. `reach`: the options that reach the daemon; `env`:
 * what the person's shell has besides (their ssh config, for --host).
 */
async function hintTable(reach: string[], env: Record<string, string>, reachText: string): Promise<void> {
  const on = (args: string[]) => cli([...reach, '--scope', SCOPE, ...args], { env });
  const printed: string[] = [];
  const collect = (r: { stdout: string; stderr: string }) => {
    const found = hintsIn(r.stdout + r.stderr);
    printed.push(...found);
    return found;
  };

  const bg = await on(['exec', '--bg', '--', 'while read line; do echo "got $line"; done']);
  const id = /Session (\w+) is still running/.exec(bg.stdout)?.[1];
  expect(id, bg.stdout + bg.stderr).toBeDefined();
  expect(collect(bg).length, 'exec --bg').toBeGreaterThanOrEqual(3);
  const yielded = await on(['exec', '--yield', '200', '--', 'sleep 30']);
  expect(collect(yielded).length, 'exec --yield').toBeGreaterThanOrEqual(3);
  // A session that only sleeps: the wait runs out (one that reads would soon be done, waiting for input).
  const sleeper = /Session (\w+) is still running/.exec(yielded.stdout)?.[1];
  expect(collect(await on(['wait', sleeper!, '--timeout', '50'])), 'wait').toEqual([expect.stringContaining(`wait ${sleeper}`)]);
  expect(collect(await on(['exec', '--', 'echo needs-ok'])).length, 'an approval').toBe(2);
  expect(collect(await on(['poll', 'nosuchid'])), 'not_found').toEqual([expect.stringMatching(/ ps$/)]);
  // A question: poll shows it with how to answer, in CLI words.
  const q = /Session (\w+) is still running/.exec((await on(['exec', '--bg', '--', 'printf "Continue? [y/N] "; read a; echo "said $a"'])).stdout)?.[1];
  await c.process({ action: 'wait', sessionIds: [q], scope: SCOPE, timeout: 30_000 });
  const asked = await on(['poll', q!]);
  expect(collect(asked).filter((h) => h.includes(`resume ${q}`)).length, `a question:\n${asked.stdout}${asked.stderr}`).toBeGreaterThanOrEqual(2);

  // Every hint names how this CLI reached the daemon and the scope of the session.
  for (const h of printed) {
    expect(h, h).toContain(reachText);
    expect(h, h).toContain(`--scope ${SCOPE}`);
  }

  // Run them: those that stop a session after the rest, those that follow one to its end last.
  const unique = [...new Set(printed)];
  if (process.env.HINTS_DEBUG) console.log(unique.join('\n'));
  const follows = (h: string) => /\s-f\b/.test(h);
  const stops = (h: string) => /\s(kill|rm|clear)\s|--no\b|--eof\b/.test(h);
  const phases = [unique.filter((h) => !follows(h) && !stops(h)), unique.filter(stops), unique.filter(follows)];
  expect(phases[1].length, 'a kill hint').toBeGreaterThan(0);
  expect(phases[2].length, 'a log -f hint').toBeGreaterThan(0);
  for (const phase of phases) for (const h of phase) await expectRuns(h, env);
  // The write hint reached the session: it read the line.
  const log = await c.process({ action: 'log', sessionId: id, scope: SCOPE });
  expect(log.output, JSON.stringify(log)).toContain('got hello');
  await c.process({ action: 'kill', all: true, scope: SCOPE }).catch(() => undefined);
}

describe('every hint runs as printed, for a session in another scope', () => {
  it('on a daemon of its own socket (--socket): exec --bg, exec --yield, wait, an approval, a question, not_found', async () => {
    await hintTable(['--socket', d.socket], {}, `--socket ${d.socket}`);
  });

  const { sshd, missing } = findSshd();
  if (missing) console.warn(`skipping the hints over ssh: ${missing}`);
  it.skipIf(!sshd)('over ssh (--host ssh://user@127.0.0.1:PORT): the same hints name --host and run through ssh', async () => {
    const s = await startSshd(sshd!, d.socket);
    try {
      await hintTable(['--host', s.url], { PROCCTL_SSH_COMMAND: s.sshCommand('good') }, `--host ${s.url}`);
    } finally {
      await s.stop();
    }
  }, 120_000);
});
