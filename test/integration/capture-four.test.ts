import { createHash } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import type { TestDaemon } from '../helpers/daemon.js';
import type { TestClient } from '../helpers/rpc.js';
import { Scopes, sharedDaemon } from '../helpers/session.js';

// Every job's pipes are read into one buffer the daemon reuses (runner/launch/pipes.ts): what each
// session keeps must be copied out of it before the next read, whichever job that read is from.
let d: TestDaemon;
let c: TestClient;
let scopes: Scopes;
sharedDaemon({ env: { PROCCTL_KILL_GRACE_MS: '1000', PROCCTL_INTERRUPT: 'false' } }, (x) => ({ d, c, scopes } = x));

const dir = mkdtempSync(join(tmpdir(), 'procctl-capture-four-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const sha256 = (data: string | Buffer) => createHash('sha256').update(data).digest('hex');

/** Four fast producers of different shapes; each job keeps a copy of what it printed (tee) to compare with. */
const JOBS = [
  { name: 'lines', command: `seq -f 'a%.0f' 1 200000 | tee ${dir}/lines` },
  { name: 'no-newlines', command: `head -c 2000000 /dev/zero | tr '\\0' b | tee ${dir}/no-newlines` },
  { name: 'utf8', command: `seq -f 'é%.0f€ 😀' 1 100000 | tee ${dir}/utf8` },
  { name: 'zeros', command: `head -c 1500000 /dev/zero | tee ${dir}/zeros` },
];

/** The whole output through `log` (the spool): one page from the first line to the last. */
async function logged(s: ReturnType<Scopes['next']>, sessionId: string): Promise<{ output: string; stderr?: [number, number][] }> {
  const page = await s.log(sessionId, { offset: 0, limit: 10_000_000 });
  expect(page.truncated, `log of ${sessionId}: ${page.text}`).toBeFalsy();
  return page;
}

describe('capture of four fast jobs at once (issue 34 point 6)', () => {
  it('in the background: the log of each is byte for byte what the job printed', async () => {
    const s = scopes.next('four-bg');
    const started = await Promise.all(JOBS.map((j) => s.exec({ command: j.command, background: true })));
    for (const r of started) scopes.track(r.pid);
    await Promise.all(started.map((r) => s.waitEnded(r.sessionId, 60_000)));
    for (const [i, job] of JOBS.entries()) {
      const printed = readFileSync(join(dir, job.name));
      const page = await logged(s, started[i].sessionId);
      // A page leaves out the newline that ends its last line.
      const text = printed.at(-1) === 10 ? `${page.output}\n` : page.output;
      expect(sha256(text), `${job.name}: ${text.length} characters logged, ${printed.toString('utf8').length} printed`).toBe(sha256(printed.toString('utf8')));
    }
  });

  it('in the foreground: each answer is the newest of its own output, and output + dropped is all of it', async () => {
    const s = scopes.next('four-fg');
    const answers = await Promise.all(JOBS.map((j) => s.exec({ command: j.command.replace(`${dir}/`, `${dir}/fg-`), yieldMs: 60_000 })));
    for (const [i, job] of JOBS.entries()) {
      const r = answers[i];
      expect(r.status, job.name).toBe('completed');
      const printed = readFileSync(join(dir, `fg-${job.name}`)).toString('utf8');
      expect(r.output.length + r.droppedChars, job.name).toBe(printed.length);
      expect(sha256(r.output), job.name).toBe(sha256(printed.slice(printed.length - r.output.length)));
      const page = await logged(s, r.sessionId);
      expect(sha256(printed.at(-1) === '\n' ? `${page.output}\n` : page.output), job.name).toBe(sha256(printed));
    }
  });

  it('stdout and stderr of jobs that print both at once stay apart: each stream exact, its places marked', async () => {
    const s = scopes.next('four-streams');
    const n = 60_000;
    const started = await Promise.all(
      [0, 1, 2, 3].map((k) => s.exec({ command: `seq -f 'e${k}-%.0f' 1 ${n} >&2 & seq -f 'o${k}-%.0f' 1 ${n}; wait`, background: true })),
    );
    for (const r of started) scopes.track(r.pid);
    await Promise.all(started.map((r) => s.waitEnded(r.sessionId, 60_000)));
    const seq = (prefix: string) => Array.from({ length: n }, (_, i) => `${prefix}${i + 1}\n`).join('');
    for (const [k, r] of started.entries()) {
      const page = await logged(s, r.sessionId);
      const all = `${page.output}\n`;
      let err = '';
      let out = '';
      let at = 0;
      // The page leaves out the newline that ends its last line: it is of the stream that printed that line.
      const ranges = (page.stderr ?? []).map(([from, to]) => [from, to === page.output.length ? to + 1 : to]);
      for (const [from, to] of ranges) {
        out += all.slice(at, from);
        err += all.slice(from, to);
        at = to;
      }
      out += all.slice(at);
      expect(sha256(err), `stderr of job ${k}`).toBe(sha256(seq(`e${k}-`)));
      expect(sha256(out), `stdout of job ${k}`).toBe(sha256(seq(`o${k}-`)));
    }
  });
});
