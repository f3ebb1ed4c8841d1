import { readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { alive, startDaemon, stopAllDaemons, waitFor } from '../helpers/daemon.js';
import { packageCopy, removePackageCopies } from '../helpers/package-copy.js';
import { killLeftovers } from '../helpers/procs.js';
import { daemonStatus, operator } from '../helpers/restart.js';
import { Scoped } from '../helpers/session.js';

/**
 * The pre-flight's bound (SPEC §19, docs/durability.md "The pre-flight's bound"): a new image that
 * never answers `--handover-format` is killed at the bound, and the restart is refused saying the
 * bound and the load it was stretched for, while the old image serves on with its sessions. The
 * bound where a core is free is 20 s; PROCCTL_PREFLIGHT_MS (tests only) makes it 1 s here, which
 * the load still stretches (at most 15 s).
 */

const pids = new Set<number>();
/** What starts the pre-flights a test made hang: any left (a restart that waited past the test) is killed by pid. */
const images: string[] = [];

afterEach(async () => {
  await stopAllDaemons();
  killLeftovers(pids);
  for (const pid of images.splice(0).flatMap((bin) => running(`${bin} --handover-format`))) {
    try {
      process.kill(pid, 'SIGKILL');
    } catch {
      // gone meanwhile
    }
  }
});

afterAll(() => removePackageCopies());

/** The processes whose command line holds `text`. */
function running(text: string): number[] {
  const out: number[] = [];
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      if (readFileSync(`/proc/${entry}/cmdline`, 'latin1').split('\0').join(' ').includes(text) && alive(Number(entry))) out.push(Number(entry));
    } catch {
      // gone meanwhile
    }
  }
  return out;
}

describe('a pre-flight that never answers', () => {
  it('is killed at its bound; the restart is refused naming the bound and the load, and the old image serves on with its sessions', async () => {
    // Another installed build whose pre-flight says a word, then never answers (a Node asleep).
    const pkg = packageCopy();
    const bin = join(pkg, 'bin', 'procctld');
    images.push(bin);
    const hang = "if (process.argv[2] === '--handover-format') {\n  process.stderr.write('procctld: loading the config\\n');\n  setInterval(() => {}, 1 << 30);\n  return;\n}\n";
    writeFileSync(bin, readFileSync(bin, 'utf8').replace("'use strict';\n", `'use strict';\n${hang}`));
    const d = await startDaemon({ procctld: bin, env: { PROCCTL_PREFLIGHT_MS: '1000' } });
    const s = new Scoped(await d.client(), 'preflight');
    const job = await s.exec({ command: 'sleep 300', background: true });
    pids.add(job.pid);

    const c = await d.client();
    const r = await c.request('daemon.restart', operator(d));
    c.close();
    expect(r.error?.data?.kind, JSON.stringify(r)).toBe('unavailable');
    const m = /did not answer its pre-flight within (\d+) s \(load average (\d+\.\d) on (\d+) cores\); it said: procctld: loading the config; nothing was restarted/.exec(r.error!.message);
    expect(m, r.error!.message).not.toBeNull();
    expect(r.error!.message).toContain(bin);
    // The bound is 1 s stretched by the load per core it names (at most 15 times): the two agree.
    const [bound, load, cores] = [Number(m![1]), Number(m![2]), Number(m![3])];
    const stretched = Math.min(15, Math.max(1, load / Math.max(1, cores)));
    expect(Math.abs(bound - stretched)).toBeLessThanOrEqual(1);
    // The pre-flight was killed, not left behind.
    await waitFor(() => running(`${bin} --handover-format`).length === 0, { what: 'the pre-flight to be gone' });

    // The old image serves on: the same process, no restart counted, the session running, new work taken.
    expect(alive(d.proc.pid!)).toBe(true);
    expect((await daemonStatus(d)).restarts.planned).toBe(0);
    const s2 = new Scoped(await d.client(), 'preflight');
    expect((await s2.list()).find((x) => x.sessionId === job.sessionId)).toMatchObject({ status: 'running', pid: job.pid });
    expect(alive(job.pid)).toBe(true);
    expect((await s2.exec({ command: 'echo still serving' })).output).toBe('still serving\n');
    await s2.process({ action: 'kill', sessionId: job.sessionId });
    await waitFor(() => !alive(job.pid), { what: 'the session to be killed by the image that kept it' });
  });
});
