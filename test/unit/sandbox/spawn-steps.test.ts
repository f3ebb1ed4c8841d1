import { closeSync, openSync, readFileSync } from 'node:fs';
import { Socket } from 'node:net';
import { constants } from 'node:os';
import { describe, expect, it } from 'vitest';
import { nativeSpawner, posixSpawn, type Addon, type SpawnSteps } from '../../../src/runner/native.js';
import { planLaunch } from '../../../src/sandbox/plan.js';

const addon = nativeSpawner();
const OFF = { sandbox: { mode: 'off' as const, network: false, writable: [] }, limits: {} };
const job = { shell: '/bin/sh', args: ['-c', 'true'], cwd: '/', scratch: undefined, socket: undefined };

/** Run through the addon with these steps; what the job printed. */
function run(command: string, steps: SpawnSteps): Promise<{ out: string; code: number | null; signal: string | null }> {
  return new Promise((resolve) => {
    let out = '';
    let exit: { code: number | null; signal: string | null } | undefined;
    let closed = false;
    const child = posixSpawn(addon as Addon, '/bin/sh', ['/bin/sh', '-c', command], { PATH: process.env.PATH }, '/', true, (code, signal) => {
      exit = { code, signal };
      if (closed) resolve({ out, ...exit });
    }, steps);
    new Socket({ fd: child.stderr, readable: true, writable: false }).resume();
    const stdout = new Socket({ fd: child.stdout, readable: true, writable: false });
    stdout.setEncoding('utf8').on('data', (d: string) => (out += d));
    stdout.on('close', () => {
      closed = true;
      if (exit) resolve({ out, ...exit });
    });
  });
}

describe('the launch plan', () => {
  it('with nothing configured, or elevated, is the shell itself with no steps', () => {
    for (const plan of [
      planLaunch({ config: OFF, elevated: false }, job),
      planLaunch({ config: { sandbox: { mode: 'workspace-write', network: false, writable: [] }, limits: { cpuSeconds: 1 } }, elevated: true }, job),
    ]) {
      expect(plan).toMatchObject({ file: '/bin/sh', args: ['-c', 'true'], steps: undefined, sandboxed: false, limits: [] });
      expect(plan.wrapped()).toEqual({ file: '/bin/sh', args: ['-c', 'true'] });
    }
  });

  it('limits without a sandbox: set by the spawner, or by prlimit in front of the shell', () => {
    const plan = planLaunch({ config: { ...OFF, limits: { cpuSeconds: 7, openFiles: 32 } }, elevated: false }, job);
    expect(plan.steps).toEqual({ limits: [['cpu', 7, 8], ['nofile', 32, 32]] });
    const wrapped = plan.wrapped();
    expect(wrapped.file).toMatch(/\/prlimit$/);
    expect(wrapped.args).toEqual(['--cpu=7:8', '--nofile=32:32', '--', '/bin/sh', '-c', 'true']);
  });
});

describe.skipIf(addon instanceof Error)('the native spawner\'s steps (between fork and exec)', () => {
  it('sets the limits and the ignored signals the steps name', async () => {
    const r = await run('ulimit -t; ulimit -n; ulimit -Ht; grep SigIgn /proc/self/status', {
      limits: [['cpu', 5, 6], ['nofile', 40, 40]],
      ignore: [constants.signals.SIGUSR1, constants.signals.SIGTERM],
    });
    const mask = (1n << BigInt(constants.signals.SIGUSR1 - 1)) | (1n << BigInt(constants.signals.SIGTERM - 1));
    expect(r.out).toBe(`5\n40\n6\nSigIgn:\t${mask.toString(16).padStart(16, '0')}\n`);
  });

  it('a limit the kernel refuses is an error naming the step; nothing is left running', () => {
    // More open files than fs.nr_open allows: refused even to root.
    const over = Number(readFileSync('/proc/sys/fs/nr_open', 'utf8')) * 2;
    let err: NodeJS.ErrnoException | undefined;
    try {
      posixSpawn(addon as Addon, '/bin/true', ['/bin/true'], {}, '/', true, () => undefined, { limits: [['nofile', over, over]] });
    } catch (e) {
      err = e as NodeJS.ErrnoException;
    }
    expect(err).toMatchObject({ code: 'ESPAWN', syscall: 'setrlimit' });
    // A soft limit above the hard one never reaches the kernel.
    expect(() => posixSpawn(addon as Addon, '/bin/true', ['/bin/true'], {}, '/', true, () => undefined, { limits: [['nofile', 2, 1]] })).toThrow(/steps must be/);
  });

  it('an unknown resource or a malformed user is refused before anything starts', () => {
    const bad = { limits: [['stack', 1, 1]] } as unknown as SpawnSteps;
    expect(() => posixSpawn(addon as Addon, '/bin/true', ['/bin/true'], {}, '/', true, () => undefined, bad)).toThrow(/steps must be/);
    const user = { user: { uid: -1, gid: 0, groups: [] } } as SpawnSteps;
    expect(() => posixSpawn(addon as Addon, '/bin/true', ['/bin/true'], {}, '/', true, () => undefined, user)).toThrow(/steps must be/);
  });

  it('keeps exactly the descriptors the plan names, at their numbers; every other one of the daemon stays closed', async () => {
    const kept = openSync('/dev/null', 'r');
    const other = openSync('/dev/null', 'r');
    try {
      const r = await run(`test -e /proc/self/fd/${kept} && echo kept; test -e /proc/self/fd/${other} && echo leaked; true`, { keep: [kept] });
      expect(r.out).toBe('kept\n');
      // The daemon's own copy keeps close-on-exec: the next job without the step does not get it.
      expect((await run(`test -e /proc/self/fd/${kept} && echo leaked; true`, {})).out).toBe('');
      expect(() => posixSpawn(addon as Addon, '/bin/true', ['/bin/true'], {}, '/', true, () => undefined, { keep: [1] })).toThrow(/steps must be/);
    } finally {
      closeSync(kept);
      closeSync(other);
    }
  });
});
