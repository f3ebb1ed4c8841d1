import { existsSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { startDaemon, stopAllDaemons, waitFor, type TestDaemon } from '../helpers/daemon.js';
import { killLeftovers } from '../helpers/procs.js';
import { Scoped } from '../helpers/session.js';
import { logLines } from '../helpers/state.js';
import { cli } from '../cli/run.js';

const started = new Set<number>();

afterEach(async () => {
  await stopAllDaemons();
  killLeftovers(started);
});

afterAll(async () => {
  await stopAllDaemons();
});

/** `seq 1 5000` prints this many characters. */
const SEQ_5000_CHARS = 9 * 2 + 90 * 3 + 900 * 4 + 4001 * 5;
/** A prompt no built-in pattern recognises, from a process waiting in select() with the session's stdin as fd 0. */
const CUSTOM_PROMPT = `echo "say the magic word please"; exec perl -e 'select(undef, undef, undef, 600)'`;

const logged = (d: TestDaemon, level: number, msg: RegExp) => logLines(d.stdout()).filter((l) => l.level === level && msg.test(l.msg));

async function reload(d: TestDaemon, config: unknown, want: { level: number; msg: RegExp }): Promise<any> {
  const before = logged(d, want.level, want.msg).length;
  writeFileSync(join(d.dir, 'config.json'), typeof config === 'string' ? config : JSON.stringify(config));
  d.proc.kill('SIGHUP');
  await waitFor(() => logged(d, want.level, want.msg).length > before, { what: `a log line ${want.msg}` });
  return logged(d, want.level, want.msg).at(-1);
}

describe('SIGHUP reload', () => {
  it('new sessions use the new config, running ones keep theirs; an invalid file is rejected and the old config kept', async () => {
    const d = await startDaemon({ config: { tools: { exec: { maxOutputChars: 50_000 } } }, env: { PROCCTL_LOG_LEVEL: 'info' } });
    const s = new Scoped(await d.client(), 'reload');
    const flag = join(d.dir, 'go');

    // Started before the reload; prints only after it.
    const pre = await s.exec({ command: `while [ ! -f ${flag} ]; do sleep 0.05; done; seq 1 5000`, background: true, stdin: 'null' });
    started.add(pre.pid);
    // Without a pattern for it, this prompt is not taken for one: the session just runs.
    const unrecognised = await s.exec({ command: CUSTOM_PROMPT, yieldMs: 3000 });
    started.add(unrecognised.pid);
    expect(unrecognised.status).toBe('running');
    await s.process({ action: 'kill', sessionId: unrecognised.sessionId });

    const baseline = await s.exec({ command: 'seq 1 5000' });
    expect(baseline.output.length).toBe(SEQ_5000_CHARS);
    expect(baseline.droppedChars).toBe(0);

    await reload(d, { tools: { exec: { maxOutputChars: 1000 } }, interrupt: { promptPatterns: ['magic word'] } }, { level: 30, msg: /config reloaded/ });

    const small = await s.exec({ command: 'seq 1 5000' });
    expect(small.status).toBe('completed');
    expect(small.droppedChars).toBe(SEQ_5000_CHARS - 1000);
    expect(small.text).toContain('1000-character cap');

    writeFileSync(flag, '');
    const preEnded = await s.waitEnded(pre.sessionId);
    expect(preEnded.status).toBe('completed');
    expect(preEnded.droppedChars, 'a session started before the reload keeps its cap').toBe(0);
    expect((await s.log(pre.sessionId, { offset: 0 })).totalChars).toBe(SEQ_5000_CHARS);

    const prompt = await s.exec({ command: CUSTOM_PROMPT, yieldMs: 20_000 });
    started.add(prompt.pid);
    expect(prompt.status, 'the reloaded promptPatterns recognise the prompt').toBe('waiting_input');
    expect(prompt.interrupt.reason).toContain('magic word');
    await s.process({ action: 'kill', sessionId: prompt.sessionId });

    // An unknown key: rejected, named, the previous config kept.
    const unknown = await reload(d, { tools: { exec: { maxOutputChars: 10 } }, bogusKey: 1 }, { level: 50, msg: /reload rejected/ });
    expect(unknown.err).toContain('bogusKey');
    // A bad value.
    const bad = await reload(d, { tools: { exec: { maxOutputChars: 'lots' } } }, { level: 50, msg: /reload rejected/ });
    expect(bad.err).toContain('tools.exec.maxOutputChars');
    // Not JSON at all.
    const torn = await reload(d, '{"tools": {', { level: 50, msg: /reload rejected/ });
    expect(torn.err).toMatch(/not valid JSON/);

    const still = await s.exec({ command: 'seq 1 5000' });
    expect(still.status).toBe('completed');
    expect(still.droppedChars, 'the last good config (maxOutputChars 1000) still applies').toBe(SEQ_5000_CHARS - 1000);
    expect(d.proc.exitCode).toBeNull();
    expect(existsSync(d.socket)).toBe(true);
    expect(await d.stop()).toBe(0);
  });
});

describe('procctl status and the config', () => {
  it('names the config file in use, and says when the last reload was refused and why, until one is accepted', async () => {
    const d = await startDaemon({ config: { tools: { exec: { maxOutputChars: 50_000 } } }, env: { PROCCTL_LOG_LEVEL: 'info' } });
    const file = join(d.dir, 'config.json');
    const status = async () => (await cli(['--socket', d.socket, 'status'])).stdout;
    expect(await status()).toContain(`config:   ${file}\n`);
    await reload(d, '{"tools": {"exec": {"maxOutputChars": "lots"}}}', { level: 50, msg: /config reload rejected/ });
    const refused = await status();
    expect(refused).toMatch(new RegExp(`config: {3}${file}; the reload at \\S+ was REFUSED, the previous config is in use: .*maxOutputChars`));
    const json = JSON.parse((await cli(['--socket', d.socket, '--json', 'status'])).stdout);
    expect(json.config).toMatchObject({ file, lastReload: { ok: false } });
    await reload(d, { tools: { exec: { maxOutputChars: 60_000 } } }, { level: 30, msg: /config reloaded/ });
    expect(await status()).toMatch(new RegExp(`config: {3}${file}; reloaded at \\S+\\n`));
  });

  it('says when no config file is in use', async () => {
    const d = await startDaemon();
    expect((await cli(['--socket', d.socket, 'status'])).stdout).toContain('config:   none (defaults and the environment)\n');
  });
});
