import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { startDaemon, stopAllDaemons, waitFor } from '../helpers/daemon.js';
import { killLeftovers } from '../helpers/procs.js';
import { restartAndWait } from '../helpers/restart.js';
import { Scoped } from '../helpers/session.js';
import { sessionsDir } from '../helpers/state.js';

/**
 * A stream's unfinished character has one owner, the capture's decoder, whether the job's pipes
 * are spliced into the spool or read (docs/durability.md "Spliced output"): what `log` reads over
 * the spool is what `poll` says, each character once, through the end of a stream and a restart.
 */

const pids = new Set<number>();

afterEach(async () => {
  await stopAllDaemons();
  killLeftovers(pids);
});

/** The whole of a session's spool, oldest segment first, as bytes. */
function spoolOf(d: { env: NodeJS.ProcessEnv }, id: string): Buffer {
  const file = join(sessionsDir(d.env.PROCCTL_STATE_DIR!), `${id}.log`);
  return Buffer.concat([`${file}.1`, file].filter((f) => existsSync(f)).map((f) => readFileSync(f)));
}

describe('a character split at the end of a stream or by a restart, in the spool', () => {
  it.each([
    ['spliced', {}],
    ['read (PROCCTL_SPLICE=off)', { PROCCTL_SPLICE: 'off' }],
  ])('%s: a stream that ends inside a character has it once, as U+FFFD where poll has it, also when log reads the spool', async (_, env) => {
    // A small transcript, so `log` reads the spool.
    const d = await startDaemon({ env: { PROCCTL_MAX_OUTPUT_CHARS: '50', ...env } });
    const s = new Scoped(await d.client(), 'end-split');
    // stdout ends inside a character (closed early), stderr prints after it.
    const r = await s.exec({ command: "head -c 100 /dev/zero | tr '\\0' a; echo; printf 'x\\342\\202'; exec 1>&-; sleep 0.3; echo ERR >&2", yieldMs: 30_000 });
    expect(r.status).toBe('completed');
    const want = `${'a'.repeat(100)}\nxERR\n\uFFFD`;
    expect(r.output).toBe(want.slice(-50));
    const log = await s.log(r.sessionId, { offset: 0 });
    expect(log.source).toBe('spool');
    expect(log.output).toBe(want);
    expect(log.totalChars).toBe(want.length);
    expect(spoolOf(d, r.sessionId).toString('utf8')).toBe(want);
  });

  it('a character split when a planned restart comes is whole in the spool once, with or without the other stream printing between its bytes', async () => {
    const d = await startDaemon();
    const s = new Scoped(await d.client(), 'restart-split');
    // Nothing between the bytes: its first ones still lie in the file past the spool's count.
    const alone = await s.exec({ command: "printf 'x\\342\\202'; read -r _; printf '\\254\\n'", background: true });
    // stderr printed between them: written where they lay.
    const between = await s.exec({ command: "printf 'x\\342\\202'; sleep 0.2; echo ERR >&2; read -r _; printf '\\254\\n'", background: true });
    pids.add(alone.pid);
    pids.add(between.pid);
    await s.waitOutput(alone.sessionId, 'x');
    await s.waitOutput(between.sessionId, 'xERR');
    await restartAndWait(d);
    const s2 = new Scoped(await d.client(), 'restart-split');
    for (const id of [alone.sessionId, between.sessionId]) await s2.process({ action: 'write', sessionId: id, data: '\n' });
    for (const [r, want] of [
      [alone, 'x€\n'],
      [between, 'xERR\n€\n'],
    ] as const) {
      await waitFor(async () => (await s2.log(r.sessionId, { offset: 0 })).status !== 'running', { what: `${r.sessionId} to end` });
      expect((await s2.log(r.sessionId, { offset: 0 })).output).toBe(want.replace(/\n$/, ''));
      expect(spoolOf(d, r.sessionId).toString('utf8')).toBe(want);
    }
  });
});
