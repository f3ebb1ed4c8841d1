import { existsSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { alive, startDaemon, stopAllDaemons, waitFor, type TestDaemon } from '../helpers/daemon.js';
import { killLeftovers } from '../helpers/procs.js';
import { daemonStatus, restartAndWait } from '../helpers/restart.js';
import { Scoped } from '../helpers/session.js';
import { makeStateDir, removeStateDirs } from '../helpers/state.js';

/**
 * A planned restart (SPEC §19) does not remove the cgroup subtrees the new image makes none of
 * (src/daemon/daemon.ts `start`): the sessions it hands over may have their cgroups there, when
 * cgroups.mode changed across it, and a session whose processes ended while reaping was frozen
 * for the exec has an empty cgroup there (its leader a zombie) that the new image still adopts.
 * A cold start removes them (what a crash or an older build left). On this machine, as root:
 * auto mode puts session cgroups in a v2 subtree; mode "v1" makes none there.
 */

const ROOT = process.getuid?.() === 0;
const V2 = existsSync('/sys/fs/cgroup/unified/cgroup.procs') || existsSync('/sys/fs/cgroup/cgroup.procs');
const V1 = existsSync('/sys/fs/cgroup/pids/cgroup.procs') && existsSync('/sys/fs/cgroup/memory/cgroup.procs');
const why = (title: string) => (ROOT && V2 && V1 ? title : `${title} (skipped: needs root, a cgroup2 mount, and v1 memory and pids hierarchies)`);

const pids = new Set<number>();

afterEach(async () => {
  await stopAllDaemons();
  killLeftovers(pids);
});

afterAll(() => removeStateDirs());

/** The daemon's log lines (JSON) whose message is `msg`. */
const logged = (d: TestDaemon, msg: string): any[] =>
  (d.stdout() + d.stderr())
    .split('\n')
    .filter((l) => l.includes(`"msg":${JSON.stringify(msg)}`))
    .map((l) => JSON.parse(l));

const REMOVED = 'removed the cgroup subtrees a run before left where this one makes none';

describe.skipIf(!ROOT || !V2 || !V1)('the cgroup subtrees a planned restart makes none of (cgroups.mode changed across it)', () => {
  it(why("are kept through it: a session that ended during the exec is adopted from its empty cgroup there, and ends as it did; the next cold start removes the subtree"), async () => {
    const state = makeStateDir();
    const env = { PROCCTL_STATE_DIR: state, PROCCTL_LOG_LEVEL: 'info' };
    const d = await startDaemon({ config: {}, env });
    const s = new Scoped(await d.client(), 'cg');
    const before = (await daemonStatus(d)).cgroups as { mode: string; root: string };
    expect(before.mode).toBe('v2');
    // The job ends once the old image has written its hand-over, just before the exec: reaping is
    // frozen then, so its leader stays a zombie, its cgroup empty, until the new image adopts it.
    const handover = join(`${d.socket}.d`, `handover-${d.proc.pid}.json`);
    const job = await s.exec({ command: `while [ ! -e ${handover} ]; do sleep 0.005; done; echo saw the hand-over`, background: true });
    pids.add(job.pid);
    const cgroup = join(before.root, `s-${job.sessionId}`);
    expect(existsSync(cgroup)).toBe(true);

    // The new image runs sessions in v1 hierarchies only: the v2 subtree is none of its making.
    writeFileSync(join(d.dir, 'config.json'), JSON.stringify({ cgroups: { mode: 'v1' } }));
    await restartAndWait(d);
    const after = (await daemonStatus(d)).cgroups as { mode: string; root?: string };
    expect(after.mode).toBe('v1');
    expect(after.root).toBeUndefined();
    expect(logged(d, REMOVED)).toEqual([]);

    // Taken over and ended as it did, read from its cgroup: not lost.
    const s2 = new Scoped(await d.client(), 'cg');
    const { last, output } = await s2.pollUntilEnded(job.sessionId, 30_000);
    expect(output).toBe('saw the hand-over\n');
    expect(last, JSON.stringify(last)).toMatchObject({ status: 'completed', exitCode: 0 });
    // Its final usage is read from its cgroup (cpu.stat): the job's loop of `sleep`s took CPU time,
    // which a cgroup removed before the adoption would have read as none.
    expect(last.resources.cpuMs, JSON.stringify(last.resources)).toBeGreaterThan(0);
    expect((await daemonStatus(d)).restarts).toMatchObject({ planned: 1, adopted: 1, lost: 0 });
    expect(alive(job.pid)).toBe(false);
    // The session's cgroup goes with the session; the subtree it was in stays, the new image's not to remove.
    await waitFor(() => !existsSync(cgroup), { what: "the ended session's cgroup to be removed" });
    expect(existsSync(before.root)).toBe(true);
    // A stop removes only what this image made (d.stop() would also clear every subtree, as a test's cleanup).
    const exited = new Promise((resolve) => d.proc.once('exit', resolve));
    d.proc.kill('SIGTERM');
    await exited;
    expect(existsSync(before.root)).toBe(true);

    // A cold start on the same state directory, with the same config: what it makes none of goes.
    const again = await startDaemon({ config: { cgroups: { mode: 'v1' } }, env });
    await waitFor(() => logged(again, REMOVED).length === 1, { what: 'the cold start to say it removed the subtree' });
    expect(logged(again, REMOVED)[0].removed).toEqual([before.root]);
    expect(existsSync(before.root)).toBe(false);
  });
});
