import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { startDaemon, stopAllDaemons, waitFor, type TestDaemon } from '../helpers/daemon.js';
import { packageCopy, removePackageCopies } from '../helpers/package-copy.js';
import { daemonStatus, operator, restartAndWait } from '../helpers/restart.js';
import { killLeftovers } from '../helpers/procs.js';
import { Scoped } from '../helpers/session.js';
import { SKIP_SANDBOX } from './sandbox-support.js';

/**
 * A planned restart answered again sooner (issue 35 point 6, docs/durability.md "The pre-flight,
 * remembered"): the pre-flight's answer is remembered per installed image, config and
 * environment, and any change of them asks the image again, so a refusal still comes while the
 * old image serves. Real daemons re-executing themselves, a real copy of the package.
 */

const pids = new Set<number>();

afterEach(async () => {
  await stopAllDaemons();
  killLeftovers(pids);
});

const dirs: string[] = [];

afterAll(() => {
  removePackageCopies();
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

const REMEMBERED = 'its answer is remembered';

/** How many restarts found the pre-flight's answer remembered, by the daemon's log. */
const rememberedCount = (d: TestDaemon) => (d.stdout() + d.stderr()).split(REMEMBERED).length - 1;

const counter = (n: number) => `i=0; while [ $i -lt ${n} ]; do echo $i; i=$((i+1)); sleep 0.01; done`;

describe('the sandbox probe, not run again by the new image (SPEC §19)', () => {
  it.skipIf(SKIP_SANDBOX)('the new image trusts the check the old one made just before the exec: bwrap probes at the start and in the first pre-flight only, and a confined session runs after', async () => {
    // bwrap on PATH is a wrapper that notes each probe (bwrap ... -- env --default-signal true) and runs the real one.
    const bin = mkdtempSync(join(tmpdir(), 'procctl-probe-bin-'));
    dirs.push(bin);
    const probes = join(bin, 'probes');
    const real = spawnSync('sh', ['-c', 'command -v bwrap'], { encoding: 'utf8' }).stdout.trim();
    writeFileSync(join(bin, 'bwrap'), `#!/bin/sh\ncase "$*" in *'--default-signal true') echo probe >> '${probes}';; esac\nexec '${real}' "$@"\n`, { mode: 0o755 });
    const ws = mkdtempSync(join(tmpdir(), 'procctl-probe-ws-'));
    dirs.push(ws);
    const d = await startDaemon({ env: { PATH: `${bin}:${process.env.PATH}` }, config: { sandbox: { mode: 'workspace-write', workspaces: [ws] } } });
    const count = () => (existsSync(probes) ? readFileSync(probes, 'utf8').split('\n').filter((l) => l !== '').length : 0);
    expect(count()).toBe(1);
    await restartAndWait(d, 0);
    // The pre-flight's probe; none by the new image.
    expect(count()).toBe(2);
    await restartAndWait(d, 1);
    // Remembered: the old image's own check (made at its start) stands, and the new image trusts it.
    expect(count()).toBe(2);
    const s = new Scoped(await d.client(), 'probe');
    const r = await s.exec({ command: 'echo confined', workdir: ws });
    expect(r.output).toContain('confined');
  });
});

describe('the pre-flight, remembered (SPEC §19)', () => {
  it('a second restart into the same image does not start its pre-flight again, and keeps every number of a counter', async () => {
    const d = await startDaemon({ env: { PROCCTL_LOG_LEVEL: 'info' } });
    const s = new Scoped(await d.client(), 'memo');
    const n = 300;
    const count = await s.exec({ command: counter(n), background: true });
    pids.add(count.pid);
    await s.waitOutput(count.sessionId, '\n10\n');
    await restartAndWait(d, 0);
    expect(rememberedCount(d)).toBe(0);
    await restartAndWait(d, 1);
    await waitFor(() => rememberedCount(d) === 1, { what: 'the second restart to say the answer was remembered' });
    const s2 = new Scoped(await d.client(), 'memo');
    await s2.pollUntilEnded(count.sessionId, 30_000);
    const lines = (await s2.log(count.sessionId, { offset: 0, limit: 1000 })).output.split('\n').filter((l: string) => l !== '');
    expect(lines).toEqual(Array.from({ length: n }, (_, i) => String(i)));
  });

  it('an image changed since (another format written into one file) is asked again, and refuses while the old image serves', async () => {
    const pkg = packageCopy();
    const d = await startDaemon({ procctld: join(pkg, 'bin', 'procctld'), env: { PROCCTL_LOG_LEVEL: 'info' } });
    const s = new Scoped(await d.client(), 'memo');
    const job = await s.exec({ command: 'sleep 300', background: true });
    pids.add(job.pid);
    await restartAndWait(d, 0);
    const format = join(pkg, 'dist', 'src', 'daemon', 'handover', 'format.js');
    writeFileSync(format, readFileSync(format, 'utf8').replace('export const HANDOVER_FORMAT = 1;', 'export const HANDOVER_FORMAT = 2;'));
    const r = await (await d.client()).request('daemon.restart', operator(d));
    expect(r.error?.data?.kind).toBe('conflict');
    expect(r.error?.message).toMatch(/reads hand-over format 2 and this one writes 1/);
    expect(rememberedCount(d)).toBe(0);
    expect((await daemonStatus(d)).restarts.planned).toBe(1);
    expect((await new Scoped(await d.client(), 'memo').list()).find((x: any) => x.sessionId === job.sessionId).status).toBe('running');
  });

  it('a config edited since (a typo) is checked again by the image, and refuses naming the problem', async () => {
    const d = await startDaemon({ config: { tools: { exec: { killGraceMs: 1000 } } }, env: { PROCCTL_LOG_LEVEL: 'info' } });
    const s = new Scoped(await d.client(), 'memo');
    const job = await s.exec({ command: 'sleep 300', background: true });
    pids.add(job.pid);
    await restartAndWait(d, 0);
    writeFileSync(join(d.dir, 'config.json'), '{"tools": {"exec": {"killGraceMs": "soon"}}}');
    const r = await (await d.client()).request('daemon.restart', operator(d));
    expect(r.error?.data?.kind).toBe('unavailable');
    expect(r.error?.message).toMatch(/did not start: .*killGraceMs/);
    expect(rememberedCount(d)).toBe(0);
    expect((await daemonStatus(d)).restarts.planned).toBe(1);
  });
});

describe('what the new image leaves until it serves (docs/durability.md "What the image leaves for later")', () => {
  it('the approval rules judge the first command after a restart, their parser loaded once the image serves, and review mode is still known', async () => {
    const d = await startDaemon({ config: { approvals: { rules: [{ command: ['rm', '-r|-R|--recursive'], action: 'deny', reason: 'recursive delete' }] } } });
    const s = new Scoped(await d.client(), 'judged');
    const job = await s.exec({ command: 'sleep 300', background: true });
    pids.add(job.pid);
    const before = (await daemonStatus(d)).changes;
    await restartAndWait(d, 0);
    // The first request to the new image is a command the rules judge: it waits for the parser, never runs unjudged.
    const c = await d.client();
    const denied = await c.request('exec', { scope: 'judged', command: "r''m -rf /tmp/procctl-never-there" });
    expect(denied.result?.status ?? denied.error?.data?.kind).toMatch(/denied|forbidden/);
    const ok = await new Scoped(c, 'judged').exec({ command: 'echo judged' });
    expect(ok.output).toContain('judged');
    // Review mode's probe, carried: the same answer as before the restart.
    expect((await daemonStatus(d)).changes.review).toBe(before.review);
  });
});

describe('usage samples carried by a planned restart (SPEC §19)', () => {
  it("the new image answers its first daemon.status from the samples the old one held, reading no session's cgroup a turn at a time first", async () => {
    const dir = mkdtempSync(join(tmpdir(), 'procctl-usage-carried-'));
    dirs.push(dir);
    const file = join(dir, 'trace.json');
    // The trace (src/base/trace.ts) is the new image's own, written at its exit: it names every
    // turn the usage sampler spent reading samples not held, which is what is not to happen.
    const d = await startDaemon({ env: { PROCCTL_TRACE_FILE: file } });
    const before = await daemonStatus(d);
    if (before.cgroups.mode === 'none') return console.warn('skipped: no cgroups here, so no usage samples to carry');
    const s = new Scoped(await d.client(), 'usage');
    // More than a first ask reads at once (16, runner/usage.ts): the rest would take a turn each.
    const count = 24;
    for (let i = 0; i < count; i++) pids.add((await s.exec({ command: 'sleep 600', background: true })).pid);
    await waitFor(async () => (await daemonStatus(d)).cgroups.running?.sessions === count, { timeoutMs: 30_000, what: 'every session sampled' });
    s.c.close();
    await restartAndWait(d, 0);
    const after = await daemonStatus(d);
    expect(after.cgroups.running.sessions).toBe(count);
    const again = new Scoped(await d.client(), 'usage');
    await again.process({ action: 'kill', all: true });
    again.c.close();
    await d.stop();
    const t = JSON.parse(readFileSync(file, 'utf8')) as { kinds: string[]; spans: number[][] };
    expect(t.spans.filter((sp) => t.kinds[sp[0]] === 'usage first reads')).toEqual([]);
  });
});
