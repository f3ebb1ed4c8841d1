import { createHash } from 'node:crypto';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { basename, join } from 'node:path';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { alive, startDaemon, stopAllDaemons, waitFor, type StartOptions, type TestDaemon } from '../helpers/daemon.js';
import { Scoped } from '../helpers/session.js';
import { guardianOf, makeStateDir, printedPids, removeStateDirs } from '../helpers/state.js';
import { keepingState, keptByGuardian } from '../helpers/crash.js';
import { SKIP_SANDBOX } from './sandbox-support.js';

/**
 * Sessions as cgroups (SPEC §15), on this machine as it is: cgroup2 at /sys/fs/cgroup/unified
 * with cgroup.kill and cgroup.freeze but no controllers, and v1 memory, pids, cpu and freezer
 * hierarchies. Runs as root; each mode the daemon can pick is started here and driven.
 */

const ROOT = process.getuid?.() === 0;
const V2 = existsSync('/sys/fs/cgroup/unified/cgroup.procs') || existsSync('/sys/fs/cgroup/cgroup.procs');
const V1 = existsSync('/sys/fs/cgroup/pids/cgroup.procs') && existsSync('/sys/fs/cgroup/memory/cgroup.procs');
const why = (ok: boolean, what: string) => (ok ? what : `${what} (skipped: needs root and ${V2 ? 'v1 memory and pids hierarchies' : 'a cgroup2 mount'})`);

/** Processes a test learned of, SIGKILLed by pid afterwards if anything went wrong. */
const seen = new Set<number>();

afterEach(async () => {
  await stopAllDaemons();
  for (const pid of seen) {
    try {
      process.kill(pid, 'SIGKILL');
    } catch {
      // gone, as it should be
    }
  }
  seen.clear();
});

afterAll(() => removeStateDirs());

async function daemon(config: unknown, opts: StartOptions = {}): Promise<{ d: TestDaemon; s: Scoped }> {
  const d = await startDaemon({ config, ...opts });
  return { d, s: new Scoped(await d.client(), 'cg') };
}

/** The cgroup of a process in each hierarchy: '' for v2, else a v1 controller's name. */
function cgroupsOf(pid: number): Map<string, string> {
  const out = new Map<string, string>();
  for (const line of readFileSync(`/proc/${pid}/cgroup`, 'latin1').split('\n')) {
    const [id, names, ...path] = line.split(':');
    if (path.length === 0) continue;
    for (const n of id === '0' ? [''] : names.split(',')) out.set(n, path.join(':'));
  }
  return out;
}

/** Where a daemon makes session cgroups under its own cgroup (src/cgroup/host.ts): named after its state directory. */
const subtree = (d: TestDaemon) => `procctld-${createHash('sha256').update(stateDirOf(d)).digest('hex').slice(0, 12)}`;
const stateDirOf = (d: TestDaemon) => d.env.PROCCTL_STATE_DIR!;

/** The session cgroup directories of a daemon, in the v2 hierarchy. */
function sessionDirs(d: TestDaemon): string[] {
  const top = join('/sys/fs/cgroup/unified', cgroupsOf(process.pid).get('') ?? '/', subtree(d));
  return existsSync(top) ? readdirSync(top).filter((n) => n.startsWith('s-')) : [];
}

/** Whether the session's own cgroup is there (the daemon keeps a few made ahead for the next execs beside it: cgroup/ahead.ts). */
const hasSessionDir = (d: TestDaemon, sessionId: string) => sessionDirs(d).includes(`s-${sessionId}`);

/** The v1 directory of a process's cgroup in a hierarchy. */
const v1Dir = (pid: number, hierarchy: string) => join('/sys/fs/cgroup', hierarchy, cgroupsOf(pid).get(hierarchy)!);

const hasMarker = (pid: number) => readFileSync(`/proc/${pid}/environ`, 'latin1').includes('PROCCTL_SESSION_ID=');

/**
 * A job whose grandchild leaves everything the old tracking could see: a double fork, a new
 * session (setsid), and an empty environment (env -i: no PROCCTL_SESSION_ID marker to sweep for).
 */
const ESCAPEE = `(env -i /usr/bin/setsid /bin/sh -c 'echo "p=$$"; exec sleep 600' &)`;

async function escapeeOf(s: Scoped, sessionId: string): Promise<number> {
  await s.waitOutput(sessionId, 'p=');
  const [pid] = printedPids((await s.log(sessionId, { offset: 0 })).output);
  seen.add(pid);
  return pid;
}

describe.skipIf(!ROOT || !V2)('sessions as cgroups, v2 membership with v1 controllers (this host\'s auto mode)', () => {
  it(why(ROOT && V2, 'daemon.status.cgroups says which mode is in use and why'), async () => {
    const { s } = await daemon({});
    const status = await s.c.call('daemon.status');
    expect(status.cgroups.mode).toBe('v2');
    expect(status.cgroups.kill).toBe('cgroup.kill');
    expect(status.cgroups.freeze).toBe('v2');
    expect(status.cgroups.reason).toMatch(/v2 at .*procctld-/);
    if (V1) expect(status.cgroups.controllers).toEqual({ memory: 'v1', pids: 'v1', cpu: 'v1' });
  });

  it(why(ROOT && V2, "a double-forked, setsid, env -i grandchild is still the session's: in its cgroup, and killed with it"), async () => {
    const { d, s } = await daemon({});
    const r = await s.exec({ command: `${ESCAPEE}; sleep 600`, background: true });
    seen.add(r.pid);
    const escapee = await escapeeOf(s, r.sessionId);
    expect(escapee).not.toBe(r.pid);
    expect(hasMarker(escapee)).toBe(false);
    const cg = `/${subtree(d)}/s-${r.sessionId}`;
    expect(cgroupsOf(escapee).get('')).toMatch(new RegExp(`${cg}$`));
    expect(cgroupsOf(r.pid).get('')).toMatch(new RegExp(`${cg}$`));

    const end = await s.process({ action: 'kill', sessionId: r.sessionId });
    expect(end).toMatchObject({ status: 'failed', reason: 'user' });
    // kill answers once the session has ended: with cgroups, that means nothing of it is left.
    expect(alive(escapee)).toBe(false);
    expect(alive(r.pid)).toBe(false);
    await waitFor(() => !hasSessionDir(d, r.sessionId), { what: 'the session cgroup to be removed' });
  });

  const paths: [string, StartOptions, Record<string, unknown>][] = [
    ['the native spawner', {}, {}],
    ['the fork fallback (PROCCTL_SPAWN=node)', { env: { PROCCTL_SPAWN: 'node' } }, {}],
    ['a pty', {}, { pty: true }],
  ];
  for (const [how, opts, extra] of paths) {
    it(why(ROOT && V2, `${how}: the job's first process is in the session's cgroup from its first instruction`), async () => {
      const { d, s } = await daemon({}, opts);
      // The shell reads its own membership before it runs anything else.
      const r = await s.exec({ command: 'cat /proc/$$/cgroup', yieldMs: 20_000, ...extra });
      expect(r.status).toBe('completed');
      expect(r.output).toMatch(new RegExp(`^0::.*/${subtree(d)}/s-${r.sessionId}\\r?$`, 'm'));
    });
  }

  it(why(ROOT && V2 && V1, 'with v2 membership, a session joins the v1 memory hierarchy only when a memory limit asks for it'), async () => {
    const { d, s } = await daemon({});
    const memoryLine = (output: string) => output.split('\n').find((l) => /^\d+:memory:/.test(l)) ?? '';
    const plain = await s.exec({ command: 'cat /proc/$$/cgroup', yieldMs: 20_000 });
    expect(plain.output).toMatch(new RegExp(`^0::.*/${subtree(d)}/s-${plain.sessionId}$`, 'm'));
    expect(memoryLine(plain.output)).not.toContain(`s-${plain.sessionId}`);
    const capped = await s.exec({ command: 'cat /proc/$$/cgroup', yieldMs: 20_000, limits: { memoryBytes: 256 * 1024 * 1024 } });
    expect(memoryLine(capped.output)).toMatch(new RegExp(`/s-${capped.sessionId}$`));
  });

  it(why(ROOT && V2 && !SKIP_SANDBOX, 'a sandboxed job: bwrap and everything under it are in the session\'s cgroup'), async () => {
    if (SKIP_SANDBOX) return;
    const { d, s } = await daemon({ sandbox: { mode: 'workspace-write', workspaces: [process.cwd()] } });
    const r = await s.exec({ command: 'cat /proc/$$/cgroup; echo "p=$$"; sleep 600', background: true });
    seen.add(r.pid);
    await s.waitOutput(r.sessionId, 'p=');
    // Inside, the sandbox's own /proc shows the path relative to its cgroup namespace or the host's; outside, the leader (bwrap) is in it.
    expect(cgroupsOf(r.pid).get('')).toMatch(new RegExp(`/${subtree(d)}/s-${r.sessionId}$`));
    await s.process({ action: 'kill', sessionId: r.sessionId });
  });

  it(why(ROOT && V1 && !SKIP_SANDBOX, "a sandboxed job cannot raise its own limit or move itself out of its cgroup; the limit still holds"), async () => {
    if (SKIP_SANDBOX || !V1) return;
    const MiB = 1024 * 1024;
    const { d, s } = await daemon({ sandbox: { mode: 'workspace-write', workspaces: [process.cwd()] }, limits: { session: { memoryBytes: 96 * MiB } } });
    // The attack: given the host paths of its own cgroup (as an agent could guess them), the job
    // writes a higher memory limit, writes itself into the daemon's and the root's cgroup.procs,
    // and into a cgroup the daemon made ahead for a session to come (cgroup/ahead.ts), to be
    // counted, and kept alive, as that session's.
    const attack = [
      'read limit; read up; read root; read ahead',
      'echo 2147483648 > "$limit" && echo RAISED',
      'echo $$ > "$up" && echo MOVED',
      'echo $$ > "$root" && echo ESCAPED',
      'echo $$ > "$ahead" && echo PLANTED',
      'echo end',
    ].join('; ');
    const r = await s.exec({ command: attack, background: true });
    seen.add(r.pid);
    const memory = v1Dir(r.pid, 'memory');
    const v2 = join('/sys/fs/cgroup/unified', cgroupsOf(r.pid).get('')!);
    const spare = await waitFor(() => sessionDirs(d).find((n) => n !== `s-${r.sessionId}`), { what: 'a cgroup made ahead' });
    const paths = [join(memory, 'memory.limit_in_bytes'), join(v2, '..', 'cgroup.procs'), '/sys/fs/cgroup/unified/cgroup.procs', join(v2, '..', spare, 'cgroup.procs')];
    await s.process({ action: 'write', sessionId: r.sessionId, data: `${paths.join('\n')}\n` });
    const end = await s.waitEnded(r.sessionId);
    const out = (await s.log(r.sessionId, { offset: 0 })).output;
    expect(out).toContain('end');
    expect(out).not.toMatch(/RAISED|MOVED|ESCAPED|PLANTED/);
    expect(out).toMatch(/Read-only file system/);
    expect(end.status).toBe('completed');

    // The legitimate use next to it: the limit it could not raise still holds for the sandboxed job.
    const hog = await s.exec({ command: `${process.execPath} -e "const a = []; for (;;) a.push(Buffer.alloc(16 * 1024 * 1024, 1))"`, yieldMs: 60_000 });
    expect(hog).toMatchObject({ status: 'failed', reason: 'memory_limit' });
  });

  it(why(ROOT && V2, 'a session that ends by itself ends only once its cgroup is empty: the escapee is gone when exec answers'), async () => {
    const { d, s } = await daemon({});
    const r = await s.exec({ command: `${ESCAPEE}; echo done`, yieldMs: 20_000 });
    expect(r).toMatchObject({ status: 'completed', exitCode: 0 });
    const [escapee] = printedPids(r.output);
    seen.add(escapee);
    expect(alive(escapee)).toBe(false);
    await waitFor(() => !hasSessionDir(d, r.sessionId), { what: 'the session cgroup to be removed' });
  });

  it(why(ROOT && V2, 'pause freezes the whole session (list shows paused), continue lets it run on, kill of a paused session works'), async () => {
    const { d, s } = await daemon({});
    const r = await s.exec({ command: `${ESCAPEE}; i=0; while true; do i=$((i+1)); echo "n=$i"; sleep 0.05; done`, background: true });
    seen.add(r.pid);
    const escapee = await escapeeOf(s, r.sessionId);
    await s.waitOutput(r.sessionId, 'n=2');
    const events = join('/sys/fs/cgroup/unified', cgroupsOf(r.pid).get('')!, 'cgroup.events');

    const paused = await s.process({ action: 'pause', sessionId: r.sessionId });
    expect(paused).toMatchObject({ status: 'running', paused: true });
    expect(readFileSync(events, 'latin1')).toMatch(/^frozen 1$/m);
    expect((await s.list()).find((x) => x.sessionId === r.sessionId)).toMatchObject({ status: 'running', paused: true });
    const before = (await s.log(r.sessionId, { offset: 0 })).totalChars;
    expect(await s.process({ action: 'poll', sessionId: r.sessionId })).toMatchObject({ paused: true });

    const cont = await s.process({ action: 'continue', sessionId: r.sessionId });
    expect(cont.paused).toBeUndefined();
    expect(readFileSync(events, 'latin1')).toMatch(/^frozen 0$/m);
    await waitFor(async () => (await s.log(r.sessionId, { offset: 0 })).totalChars > before, { what: 'output after continue' });

    await s.process({ action: 'pause', sessionId: r.sessionId });
    const end = await s.process({ action: 'kill', sessionId: r.sessionId, graceMs: 10_000 });
    // Thawed before the stop signal: the job got SIGTERM and ended within the grace.
    expect(end).toMatchObject({ status: 'failed', reason: 'user', signal: 'SIGTERM' });
    expect(end.stop.graceful).toBe(true);
    expect(alive(escapee)).toBe(false);
    await waitFor(() => !hasSessionDir(d, r.sessionId), { what: 'the session cgroup to be removed' });
  });

  it(why(ROOT && V2, "a paused session's timeout waits, and so does waiting-for-input detection"), async () => {
    const { s } = await daemon({});
    const t = await s.exec({ command: 'sleep 600', timeout: 2, background: true });
    const q = await s.exec({ command: 'read x; echo "got $x"', background: true });
    seen.add(t.pid).add(q.pid);
    await s.process({ action: 'pause', sessionId: t.sessionId });
    await s.process({ action: 'pause', sessionId: q.sessionId });
    // poll waits for a change: a timeout or an interrupt would end the wait early.
    const [pt, pq] = await Promise.all([
      s.process({ action: 'poll', sessionId: t.sessionId, timeout: 4000 }),
      s.process({ action: 'poll', sessionId: q.sessionId, timeout: 4000 }),
    ]);
    expect(pt).toMatchObject({ status: 'running', paused: true });
    expect(pq).toMatchObject({ status: 'running', paused: true });
    expect(pq.interrupt).toBeUndefined();

    await s.process({ action: 'continue', sessionId: q.sessionId });
    await waitFor(async () => (await s.process({ action: 'poll', sessionId: q.sessionId, timeout: 2000 })).status === 'waiting_input', { what: 'waiting_input after continue' });
    await s.process({ action: 'continue', sessionId: t.sessionId });
    const ended = await s.waitEnded(t.sessionId);
    expect(ended).toMatchObject({ status: 'failed', reason: 'timeout' });
    await s.process({ action: 'kill', sessionId: q.sessionId });
  });

  it(why(ROOT && V2, 'resources: accounting matches a known load, while running and in the final record'), async () => {
    const { d, s } = await daemon({});
    const load = `${process.execPath} -e "let x = 0; for (let i = 0; i < 3e8; i++) x += i; const b = Buffer.alloc(96 * 1024 * 1024, 1); console.log(x > 0, b.length)"`;
    const r = await s.exec({ command: load, yieldMs: 60_000 });
    expect(r.status).toBe('completed');
    // Asked for only once its cgroup is gone: the final figures were read before it went (the exec's answer did not wait for them).
    await waitFor(() => !hasSessionDir(d, r.sessionId), { what: 'the session cgroup to be removed' });
    const rec = (await s.list()).find((x) => x.sessionId === r.sessionId);
    expect(rec.resources.cpuMs).toBeGreaterThanOrEqual(100);
    expect(rec.resources.cpuMs).toBeLessThan(rec.runtimeMs * 2 + 100);
    // No memory limit: on this host memory is sampled (no v1 memory cgroup joined), and the peak
    // comes from the leader's wait (ru_maxrss); with a limit, from the memory cgroup.
    expect(rec.resources.memoryPeakBytes).toBeGreaterThanOrEqual(96 * 1024 * 1024);
    if (V1) {
      const limited = await s.exec({ command: load, yieldMs: 60_000, limits: { memoryBytes: 512 * 1024 * 1024 } });
      expect(limited.status).toBe('completed');
      const lrec = (await s.list()).find((x) => x.sessionId === limited.sessionId);
      expect(lrec.resources.memoryPeakBytes).toBeGreaterThanOrEqual(96 * 1024 * 1024);
    }

    const bg = await s.exec({ command: 'sleep 600 & sleep 600 & wait', background: true });
    seen.add(bg.pid);
    const live = await waitFor(async () => {
      const x = (await s.list()).find((y) => y.sessionId === bg.sessionId);
      return x.resources?.processes >= 3 ? x : undefined;
    }, { what: 'three processes counted' });
    expect(live.resources.memoryBytes).toBeGreaterThan(0);
    // Sampled while it runs: its peak is at least what was seen now.
    expect(live.resources.memoryPeakBytes).toBeGreaterThanOrEqual(live.resources.memoryBytes);
    const polled = await s.process({ action: 'poll', sessionId: bg.sessionId });
    expect(polled.resources.processes).toBeGreaterThanOrEqual(3);
    // daemon.status totals what the running sessions use, read when asked.
    const totals = (await s.c.call('daemon.status')).cgroups.running;
    expect(totals.sessions).toBe(1);
    expect(totals.processes).toBe(polled.resources.processes);
    expect(totals.memoryBytes).toBeGreaterThan(0);
    await s.process({ action: 'kill', sessionId: bg.sessionId });
  });

  it(why(ROOT && V2, 'daemon.status totals follow sessions as they start, end and are forgotten, and samples as they move'), async () => {
    const { s } = await daemon({});
    const running = async () => (await s.c.call('daemon.status')).cgroups.running;
    /** The totals once they say this many sessions and processes. */
    const totals = (sessions: number, processes: number, what: string) =>
      waitFor(async () => {
        const t = await running();
        return t.sessions === sessions && t.processes === processes ? t : undefined;
      }, { what });
    expect(await running()).toMatchObject({ sessions: 0, processes: 0 });
    const a = await s.exec({ command: 'sleep 600', background: true });
    const b = await s.exec({ command: 'sleep 600 & sleep 600 & wait', background: true });
    seen.add(a.pid).add(b.pid);
    // Asked again and again with nothing changed, the totals stay true (made once, then kept).
    const both = await totals(2, 4, 'two sessions and four processes in the totals');
    for (let i = 0; i < 5; i++) expect(await running()).toEqual(both);
    // A session more, then a sample that moves with the same sessions running (a process more in c).
    const c = await s.exec({ command: 'sleep 600 & read line; sleep 600 & wait', background: true });
    seen.add(c.pid);
    await totals(3, 6, 'a third session in the totals');
    await s.process({ action: 'write', sessionId: c.sessionId, data: 'go\n' });
    await totals(3, 7, "the third session's new process in the totals");
    await s.process({ action: 'kill', sessionId: a.sessionId });
    await totals(2, 6, 'the killed session out of the totals');
    await s.process({ action: 'kill', sessionId: b.sessionId });
    await s.process({ action: 'clear', sessionId: a.sessionId });
    await totals(1, 3, 'one session left in the totals');
    await s.process({ action: 'kill', sessionId: c.sessionId });
    await waitFor(async () => (await running()).sessions === 0, { what: 'no session in the totals' });
  });

  it(why(ROOT && V2, "list answers running sessions' resources from the sample the daemon holds: a call reads no session's cgroup"), async () => {
    const { d, s } = await daemon({});
    const count = 20;
    const ids: string[] = [];
    for (let i = 0; i < count; i++) {
      const r = await s.exec({ command: 'sleep 600', background: true });
      seen.add(r.pid);
      ids.push(r.sessionId);
    }
    const first = await s.list();
    expect(first.filter((x) => x.resources?.processes === 1)).toHaveLength(count);
    // read(2) calls the daemon made (every thread): reading a session's figures takes six (cpu.stat, cgroup.procs, the member's status).
    const reads = () => Number(/^syscr:\s+(\d+)$/m.exec(readFileSync(`/proc/${d.proc.pid}/io`, 'latin1'))![1]);
    const calls = 20;
    const before = reads();
    const lists = await Promise.all(Array.from({ length: calls }, () => s.list()));
    const perCall = (reads() - before) / calls;
    for (const l of lists) expect(l.filter((x) => x.resources?.processes === 1)).toHaveLength(count);
    // The request, its answer and a refresh of the held samples at most; not a read of every session per call.
    expect(perCall).toBeLessThan(count);
    const end = await s.process({ action: 'kill', sessionId: ids[0] });
    expect(end.resources.processes).toBe(1);
    await s.process({ action: 'kill', all: true });
  });

  it(why(ROOT && V2, 'SIGKILL of the daemon and its guardian: the next start empties and removes what the last run left'), async () => {
    const state = makeStateDir();
    const { d, s } = await daemon({}, { env: { PROCCTL_STATE_DIR: state } });
    const r = await s.exec({ command: `${ESCAPEE}; sleep 600`, background: true });
    seen.add(r.pid);
    const escapee = await escapeeOf(s, r.sessionId);
    // Take the guardian away first, so only the next start can clean up.
    const guardian = guardianOf(d.proc.pid!);
    expect(guardian).toBeDefined();
    process.kill(guardian!, 'SIGKILL');
    d.proc.kill('SIGKILL');
    await new Promise((resolve) => d.proc.once('exit', resolve));
    expect(alive(escapee)).toBe(true);
    // The session's, and those made ahead for the next execs (cgroup/ahead.ts): the next start removes them all.
    const left = sessionDirs(d);
    expect(left).toContain(`s-${r.sessionId}`);

    const again = await startDaemon({ env: { PROCCTL_STATE_DIR: state } });
    await waitFor(() => !alive(escapee) && !alive(r.pid), { what: 'the last run\'s processes to be gone' });
    await waitFor(() => left.every((n) => !sessionDirs(d).includes(n)), { what: 'the last run\'s cgroups to be removed' });
    await waitFor(() => /emptied and removed the cgroups of sessions a previous run left/.test(again.stdout()), { what: 'the log line' });
    // It names the session, not the cgroups made ahead for sessions that never were.
    const line = again.stdout().split('\n').find((l) => l.includes('emptied and removed the cgroups'))!;
    expect(JSON.parse(line).sessions).toEqual([r.sessionId]);
    const lost = (await new Scoped(await again.client(), 'cg').list()).find((x) => x.sessionId === r.sessionId);
    expect(lost).toMatchObject({ status: 'failed', reason: 'lost' });
  });

  it(why(ROOT && V2, 'a daemon crash with the guardian alive: the guardian kills the whole cgroup, escapee included'), async () => {
    const { d, s } = await daemon({});
    const r = await s.exec({ command: `${ESCAPEE}; sleep 600`, background: true });
    seen.add(r.pid);
    const escapee = await escapeeOf(s, r.sessionId);
    d.proc.kill('SIGKILL');
    await waitFor(() => !alive(escapee) && !alive(r.pid), { what: 'the guardian to kill the cgroup' });
  });
});

describe.skipIf(!ROOT || !V2)('a crashed daemon leaves no empty cgroup behind: its guardian removes them once it has killed', () => {
  for (const how of ['kill', 'keep'] as const) {
    it(why(ROOT && V2, `durability.onCrash "${how}"${how === 'keep' ? ', the grace run out' : ''}: the session's cgroup and the daemon's subtrees are gone`), async () => {
      const crash = how === 'keep' ? keepingState(500) : { state: makeStateDir(), env: {} };
      const { d, s } = await daemon({}, { env: { PROCCTL_STATE_DIR: crash.state, ...crash.env } });
      const r = await s.exec({ command: 'sleep 600', background: true });
      seen.add(r.pid);
      if (how === 'keep') await keptByGuardian(crash.state, r.sessionId);
      const cg = (await s.c.call('daemon.status')).cgroups as { root: string; v1?: Record<string, string> };
      const subtrees = [...new Set([cg.root, ...Object.values(cg.v1 ?? {})])];
      expect(subtrees.every((dir) => basename(dir) === subtree(d) && existsSync(dir))).toBe(true);
      expect(hasSessionDir(d, r.sessionId)).toBe(true);
      const guardian = guardianOf(d.proc.pid!);
      expect(guardian).toBeDefined();

      d.proc.kill('SIGKILL');
      await waitFor(() => !alive(r.pid), { what: 'the guardian to kill the session' });
      await waitFor(() => subtrees.every((dir) => !existsSync(dir)), { what: `the guardian to remove ${subtrees.join(', ')}`, timeoutMs: 30_000 });
      await waitFor(() => !alive(guardian!), { what: 'the guardian to be gone' });
    });
  }

  it(why(ROOT && V2 && V1, 'with the guardian killed too, the next daemon on the state directory removes the subtrees it makes none of (cgroups.mode changed)'), async () => {
    const state = makeStateDir();
    const { d, s } = await daemon({}, { env: { PROCCTL_STATE_DIR: state } });
    const before = (await s.c.call('daemon.status')).cgroups as { root: string };
    const guardian = guardianOf(d.proc.pid!);
    expect(guardian).toBeDefined();
    process.kill(guardian!, 'SIGKILL');
    d.proc.kill('SIGKILL');
    await new Promise((resolve) => d.proc.once('exit', resolve));
    expect(existsSync(before.root)).toBe(true);

    // v1 only now: the v2 subtree the last run made is no longer this daemon's; its v1 ones are.
    const { s: again } = await daemon({ cgroups: { mode: 'v1' } }, { env: { PROCCTL_STATE_DIR: state } });
    const after = (await again.c.call('daemon.status')).cgroups as { mode: string; root?: string; v1: Record<string, string> };
    expect(after.mode).toBe('v1');
    expect(after.root).toBeUndefined();
    expect(existsSync(before.root)).toBe(false);
    expect(Object.values(after.v1).every((dir) => basename(dir) === basename(before.root) && existsSync(dir))).toBe(true);
  });
});

describe.skipIf(!ROOT || !V1)('per-session limits (v1 controllers here)', () => {
  const MiB = 1024 * 1024;
  const config = { limits: { session: { memoryBytes: 160 * MiB, processes: 40 } }, scopes: { tight: { limits: { memoryBytes: 96 * MiB } } } };

  it(why(ROOT && V1, 'memory: a session over limits.session.memoryBytes is killed and fails with reason memory_limit'), async () => {
    const { s } = await daemon(config);
    const r = await s.exec({ command: `${process.execPath} -e "const a = []; for (;;) a.push(Buffer.alloc(16 * 1024 * 1024, 1))"`, yieldMs: 60_000 });
    expect(r).toMatchObject({ status: 'failed', reason: 'memory_limit' });
    expect(r.text).toMatch(/memory limit/);
  });

  it(why(ROOT && V1, 'processes: a fork past limits.session.processes fails, and the session fails with reason process_limit'), async () => {
    const { s } = await daemon(config);
    const r = await s.exec({ command: "/bin/sh -c 'for i in $(seq 100); do sleep 30 & done; wait'", yieldMs: 60_000 });
    expect(r).toMatchObject({ status: 'failed', reason: 'process_limit' });
  });

  it(why(ROOT && V1, "exec.limits: within the scope's bounds it is applied; past them it is forbidden"), async () => {
    const { s } = await daemon(config);
    const tight = new Scoped(s.c, 'tight');
    const err = await tight.error('exec', { command: 'true', limits: { memoryBytes: 128 * MiB } });
    expect(err.data.kind).toBe('forbidden');
    expect(err.message).toMatch(/scopes\.tight\.limits\.memoryBytes = 100663296/);
    // The default scope's bound is limits.session's.
    expect((await s.error('exec', { command: 'true', limits: { processes: 41 } })).data.kind).toBe('forbidden');

    const r = await tight.exec({ command: 'sleep 600', limits: { memoryBytes: 64 * MiB, processes: 10 }, background: true });
    seen.add(r.pid);
    expect(readFileSync(join(v1Dir(r.pid, 'memory'), 'memory.limit_in_bytes'), 'latin1').trim()).toBe(String(64 * MiB));
    expect(readFileSync(join(v1Dir(r.pid, 'pids'), 'pids.max'), 'latin1').trim()).toBe('10');
    const d = await s.exec({ command: 'sleep 600', background: true });
    seen.add(d.pid);
    expect(readFileSync(join(v1Dir(d.pid, 'memory'), 'memory.limit_in_bytes'), 'latin1').trim()).toBe(String(160 * MiB));
    await tight.process({ action: 'kill', sessionId: r.sessionId });
    await s.process({ action: 'kill', sessionId: d.sessionId });
  });

  it(why(ROOT && V1, 'cpuPercent: a busy loop under 10% of a CPU gets about that much CPU time'), async () => {
    const { s } = await daemon({});
    const r = await s.exec({ command: "timeout 2 /bin/sh -c 'while :; do :; done'", limits: { cpuPercent: 10 }, yieldMs: 60_000 });
    expect(r.status).toBe('completed');
    const rec = (await s.list()).find((x) => x.sessionId === r.sessionId);
    // 10% of 2 s is 200 ms; unlimited it would be up to 2000.
    expect(rec.resources.cpuMs).toBeLessThan(600);
  });
});

describe.skipIf(!ROOT)('the modes a host may offer, each forced here', () => {
  it(why(ROOT && V1, 'v1 only (cgroups.mode "v1"): membership, kill, pause and limits from v1 hierarchies'), async () => {
    if (!V1) return;
    const { s } = await daemon({ cgroups: { mode: 'v1' } });
    const status = await s.c.call('daemon.status');
    expect(status.cgroups).toMatchObject({ mode: 'v1', kill: 'signal each process', controllers: { memory: 'v1', pids: 'v1', cpu: 'v1' } });
    const r = await s.exec({ command: `${ESCAPEE}; sleep 600`, background: true, limits: { memoryBytes: 64 * 1024 * 1024 } });
    seen.add(r.pid);
    const escapee = await escapeeOf(s, r.sessionId);
    expect(cgroupsOf(escapee).get('pids')).toMatch(new RegExp(`/s-${r.sessionId}$`));
    const paused = await s.process({ action: 'pause', sessionId: r.sessionId });
    expect(paused.paused).toBe(true);
    if (existsSync('/sys/fs/cgroup/freezer/cgroup.procs')) expect(readFileSync(join(v1Dir(escapee, 'freezer'), 'freezer.state'), 'latin1').trim()).toBe('FROZEN');
    const end = await s.process({ action: 'kill', sessionId: r.sessionId });
    expect(end).toMatchObject({ status: 'failed', reason: 'user' });
    expect(alive(escapee)).toBe(false);
  });

  it(why(ROOT && V2, 'v2 without controllers (cgroups.mode "v2" here): membership and pause work; a limit it cannot enforce is refused, never ignored'), async () => {
    if (!V2) return;
    const { s } = await daemon({ cgroups: { mode: 'v2' } });
    const status = await s.c.call('daemon.status');
    expect(status.cgroups.mode).toBe('v2');
    const r = await s.exec({ command: `${ESCAPEE}; sleep 600`, background: true });
    seen.add(r.pid);
    const escapee = await escapeeOf(s, r.sessionId);
    expect((await s.process({ action: 'pause', sessionId: r.sessionId })).paused).toBe(true);
    if (status.cgroups.controllers.memory === null) {
      const err = await s.error('exec', { command: 'true', limits: { memoryBytes: 64 * 1024 * 1024 } });
      expect(err.data.kind).toBe('unavailable');
      expect(err.message).toMatch(/needs the memory controller/);
      await expect(startDaemon({ config: { cgroups: { mode: 'v2' }, limits: { session: { processes: 10 } } } })).rejects.toThrow(/limits\.session\.processes needs the pids controller/);
    }
    await s.process({ action: 'kill', sessionId: r.sessionId });
    expect(alive(escapee)).toBe(false);
  });

  it('no cgroups (cgroups.mode "off"): sessions run as before, pause is unavailable, limits.session refuses the start', async () => {
    const { s } = await daemon({ cgroups: { mode: 'off' } });
    const status = await s.c.call('daemon.status');
    expect(status.cgroups).toMatchObject({ mode: 'none', kill: null, freeze: null });
    expect(status.cgroups.reason).toMatch(/cgroups\.mode is "off"/);
    const r = await s.exec({ command: 'echo "p=$$"; sleep 600', background: true });
    seen.add(r.pid);
    expect(cgroupsOf(r.pid).get('')).toBe(cgroupsOf(process.pid).get(''));
    const err = await s.error('process', { action: 'pause', sessionId: r.sessionId });
    expect(err.data.kind).toBe('unavailable');
    expect(r.resources).toBeUndefined();
    await s.process({ action: 'kill', sessionId: r.sessionId });
    await expect(startDaemon({ config: { cgroups: { mode: 'off' }, limits: { session: { memoryBytes: 64 * 1024 * 1024 } } } })).rejects.toThrow(
      /limits\.session\.memoryBytes needs the memory controller/,
    );
  });

  it('cgroups.root that is not a writable cgroup2 directory refuses the start, saying why', async () => {
    await expect(startDaemon({ config: { cgroups: { root: '/tmp' } } })).rejects.toThrow(/cgroups\.root \/tmp is not on a cgroup2 filesystem/);
  });
});
