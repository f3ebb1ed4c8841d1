import { closeSync, fstatSync, readdirSync, readFileSync, readSync, writeSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterEach, describe, expect, it } from 'vitest';
import { nativeSpawner, type Addon, type SplicedHandle } from '../../../src/runner/native.js';
import { ptyPrivates } from '../../../src/runner/launch/node-pty-privates.js';
import { waitFor } from '../../helpers/daemon.js';

/**
 * The one life both kinds of spliced handle share (native/handle.c): a job's pipe spliced into its
 * spool (splice.c) and a terminal's master spliced into its tap (tap.c). Held by pause() and let go
 * by resume() with nothing lost; the end said once, after which the handle stops by itself; close()
 * ends every call into JavaScript; pause, resume and close after either are harmless; the
 * descriptors are JavaScript's and stay open. Real pipes and a real terminal.
 */

const found = nativeSpawner();
const addon = found instanceof Error ? undefined : (found as Required<Addon>);
const native = addon?.splicePipe && addon.tapTerminal ? addon : undefined;
const pty = createRequire(import.meta.url)('@lydell/node-pty') as typeof import('@lydell/node-pty');
const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..', '..', '..');
const opened: number[] = [];
const started: number[] = [];

afterEach(() => {
  for (const fd of opened.splice(0)) closeSync(fd);
  for (const pid of started.splice(0)) {
    try {
      process.kill(pid, 'SIGKILL');
    } catch {
      // gone
    }
  }
});

/** A few turns of the event loop, each with its poll phase: what a readable descriptor would have called by then. */
async function turns(n = 4): Promise<void> {
  for (let i = 0; i < n; i++) await new Promise((r) => setImmediate(r));
}

/** A non-blocking pipe, closed after the test. */
function pipe(): [number, number] {
  const ends = native!.tapPipe();
  opened.push(...ends);
  return ends;
}

const isOpen = (fd: number) => {
  try {
    fstatSync(fd);
    return true;
  } catch {
    return false;
  }
};

/** Whatever a non-blocking pipe holds now, as text. */
function drain(fd: number): string {
  const buf = Buffer.alloc(64 * 1024);
  let out = '';
  for (;;) {
    let n: number;
    try {
      n = readSync(fd, buf);
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'EAGAIN') return out;
      throw err;
    }
    if (n === 0) return out;
    out += buf.toString('latin1', 0, n);
  }
}

/** A job's pipe read into a buffer (a target set to read): the text and statuses it hands on. */
function splicedPipe(read: number) {
  const target = native!.spliceTarget();
  target.set(-1);
  const buffer = Buffer.alloc(64 * 1024);
  const seen = { text: '', statuses: [] as number[] };
  const handle = native!.splicePipe(read, target, buffer, (n, status) => {
    seen.text += buffer.toString('latin1', 0, n);
    seen.statuses.push(status);
  });
  return { handle, seen };
}

/** A terminal whose job prints `first`, then what it reads, and exits: its master (a copy of its own) tapped into a pipe. */
function tappedTerminal(opts: { faultErrno?: number } = {}) {
  const term = pty.spawn('/bin/sh', ['-c', 'echo first; read x; echo got-$x'], { encoding: null });
  started.push(term.pid);
  const privates = ptyPrivates(term);
  if (typeof privates === 'string') throw new Error(privates);
  const master = native!.dupDescriptor(privates.master);
  opened.push(master);
  privates.socket.destroy();
  const [read, write] = pipe();
  const ends: number[] = [];
  const handle: SplicedHandle =
    opts.faultErrno === undefined ? native!.tapTerminal(master, write, (s) => ends.push(s)) : native!.tapTerminal(master, write, (s) => ends.push(s), opts.faultErrno, 0);
  return { handle, ends, master, read, write };
}

/** pause, resume and close, each twice, then again: none throws, none calls. */
function shake(handle: SplicedHandle): void {
  for (let i = 0; i < 2; i++) {
    handle.pause();
    handle.pause();
    handle.resume();
    handle.resume();
    handle.close();
    handle.close();
  }
}

describe.skipIf(!native)('a spliced pipe (splice.c on handle.c)', () => {
  it('held by pause, let go by resume with nothing lost; close ends the calls and leaves the descriptors open', async () => {
    const [read, write] = pipe();
    const { handle, seen } = splicedPipe(read);
    writeSync(write, 'one\n');
    await waitFor(() => seen.text === 'one\n', { what: 'the first batch' });
    handle.pause();
    writeSync(write, 'two\n');
    await turns();
    expect(seen.text).toBe('one\n');
    handle.resume();
    await waitFor(() => seen.text === 'one\ntwo\n', { what: 'what came while held' });
    handle.close();
    writeSync(write, 'three\n');
    await turns();
    shake(handle);
    expect(seen.text).toBe('one\ntwo\n');
    expect(seen.statuses.every((s) => s === 0)).toBe(true);
    expect([isOpen(read), isOpen(write)]).toEqual([true, true]);
    expect(drain(read)).toBe('three\n');
  });

  it('says its end once (status 2) when no writer is left, and stops by itself', async () => {
    const [read, write] = pipe();
    const { handle, seen } = splicedPipe(read);
    writeSync(write, 'last\n');
    closeSync(write);
    opened.splice(opened.indexOf(write), 1);
    await waitFor(() => seen.statuses.includes(2), { what: 'the end' });
    await turns();
    shake(handle);
    await turns();
    expect(seen.text).toBe('last\n');
    expect(seen.statuses.filter((s) => s === 2)).toHaveLength(1);
    expect(isOpen(read)).toBe(true);
  });
});

describe.skipIf(!native || native.tapProbe() !== 0)("a terminal's tap (tap.c on handle.c)", () => {
  it('held by pause, let go by resume with nothing lost; its end said once (0) when the job is gone; then harmless', async () => {
    const t = tappedTerminal();
    let moved = '';
    await waitFor(() => (moved += drain(t.read)).includes('first'), { what: "the job's first line" });
    t.handle.pause();
    writeSync(t.master, 'go\n');
    await turns();
    expect(moved + drain(t.read)).not.toContain('got-go');
    t.handle.resume();
    await waitFor(() => (moved += drain(t.read)).includes('got-go'), { what: 'what came while held' });
    await waitFor(() => t.ends.length > 0, { what: "the tap's end" });
    await turns();
    shake(t.handle);
    await turns();
    expect(t.ends).toEqual([0]);
    expect([isOpen(t.master), isOpen(t.write)]).toEqual([true, true]);
  });

  it('a splice that fails (a test fault: EINVAL) is said once as -errno, and the tap stops', async () => {
    const t = tappedTerminal({ faultErrno: 22 });
    await waitFor(() => t.ends.length > 0, { what: "the tap's failure" });
    await turns();
    shake(t.handle);
    expect(t.ends).toEqual([-22]);
    expect(drain(t.read)).toBe('');
  });

  it('closed before its end: onEnd is never called', async () => {
    const t = tappedTerminal();
    t.handle.close();
    writeSync(t.master, 'go\n');
    await turns();
    shake(t.handle);
    await turns();
    expect(t.ends).toEqual([]);
    expect(drain(t.read)).toBe('');
  });
});

describe('the addon build', () => {
  it('compiles every native/*.c (binding.gyp), so a source that one of them calls into is in the module', () => {
    const gyp = JSON.parse(readFileSync(join(ROOT, 'binding.gyp'), 'utf8')) as { targets: { target_name: string; sources: string[] }[] };
    const sources = gyp.targets.find((t) => t.target_name === 'procctl')!.sources;
    const files = readdirSync(join(ROOT, 'native')).filter((f) => f.endsWith('.c')).map((f) => `native/${f}`);
    expect([...sources].sort()).toEqual(files.sort());
  });
});
