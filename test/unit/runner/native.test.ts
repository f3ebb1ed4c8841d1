import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { nativeSpawner, posixSpawn, type Addon, type NativeChild } from '../../../src/runner/native.js';

const addon = nativeSpawner() as Addon;

/** Run through the addon; resolve with the exit and what the job printed. */
function run(argv: string[], opts: { cwd?: string; env?: NodeJS.ProcessEnv; stdinNull?: boolean } = {}) {
  return new Promise<{ code: number | null; signal: string | null; out: string; child: NativeChild }>((resolve) => {
    let out = '';
    let exit: { code: number | null; signal: string | null } | undefined;
    let closed = false;
    const child = posixSpawn(addon, argv[0], argv, opts.env ?? { PATH: process.env.PATH }, opts.cwd ?? '/', opts.stdinNull ?? false, (code, signal) => {
      exit = { code, signal };
      if (closed) resolve({ ...exit, out, child });
    });
    const stdout = new Socket({ fd: child.stdout, readable: true, writable: false });
    new Socket({ fd: child.stderr, readable: true, writable: false }).resume();
    if (child.stdin >= 0) new Socket({ fd: child.stdin, readable: false, writable: true }).end();
    stdout.setEncoding('utf8').on('data', (d: string) => (out += d));
    stdout.on('close', () => {
      closed = true;
      if (exit) resolve({ ...exit, out, child });
    });
  });
}

/** This process's children (zombies included), from every thread's list. */
function children(): string[] {
  return readdirSync('/proc/self/task').flatMap((t) => readFileSync(`/proc/self/task/${t}/children`, 'utf8').split(' ').filter(Boolean)).sort();
}

describe('the native spawner', () => {
  it('is built: jobs on pipes start without a fork of the daemon', () => {
    expect(addon).not.toBeInstanceOf(Error);
  });

  it('passes argv, env and workdir exactly, and reports the exit code', async () => {
    const r = await run(['/bin/sh', '-c', 'printf "%s|%s|%s" "$0" "$WHO" "$(pwd)"; exit 3', 'zero'], { cwd: '/tmp', env: { WHO: 'a b\tc' } });
    expect(r.out).toBe('zero|a b\tc|/tmp');
    expect(r.code).toBe(3);
    expect(r.signal).toBeNull();
  });

  it('finds a bare name on PATH, and gives stdin /dev/null when asked', async () => {
    const r = await run(['sh', '-c', 'cat; readlink /proc/self/fd/0'], { stdinNull: true });
    expect(r.child.stdin).toBe(-1);
    expect(r.out.trim()).toBe('/dev/null');
  });

  it("names the socket that is the job's fd 0, as /proc shows it (none with stdin on /dev/null)", async () => {
    const r = await run(['/bin/sh', '-c', 'readlink /proc/self/fd/0']);
    expect(r.child.stdinInode).toBeGreaterThan(0);
    expect(r.out.trim()).toBe(`socket:[${r.child.stdinInode}]`);
    expect((await run(['/bin/true'], { stdinNull: true })).child.stdinInode).toBeUndefined();
  });

  it('names the signal that ended the child', async () => {
    const r = await run(['/bin/sh', '-c', 'kill -TERM $$']);
    expect(r).toMatchObject({ code: null, signal: 'SIGTERM' });
  });

  it('throws with the errno name when the program or the workdir is missing, leaving no child', () => {
    const noop = () => undefined;
    const before = children();
    expect(() => posixSpawn(addon, '/no/such/program', ['x'], {}, '/', false, noop)).toThrow(expect.objectContaining({ code: 'ENOENT' }));
    expect(() => posixSpawn(addon, '/bin/sh', ['sh'], {}, '/no/such/dir', false, noop)).toThrow(expect.objectContaining({ code: 'ENOENT' }));
    const text = join(mkdtempSync(join(tmpdir(), 'procctl-native-')), 'not-a-program');
    writeFileSync(text, 'hello\n', { mode: 0o644 });
    expect(() => posixSpawn(addon, text, ['x'], {}, '/', false, noop)).toThrow(expect.objectContaining({ code: 'EACCES' }));
    rmSync(dirname(text), { recursive: true });
    expect(children(), 'a child that could not exec is reaped at once').toEqual(before);
  });

  it('refuses a NUL byte in an argument instead of cutting it short', () => {
    expect(() => posixSpawn(addon, '/bin/sh', ['sh', '-c', 'echo a\0b'], {}, '/', false, () => undefined)).toThrow(/NUL/);
  });
});
