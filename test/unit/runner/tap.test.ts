import { closeSync, constants, fstatSync, mkdtempSync, openSync, readdirSync, readlinkSync, rmSync, writeFileSync, writeSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { nativeSpawner, type Addon } from '../../../src/runner/native.js';
import { ptyPrivates } from '../../../src/runner/launch/node-pty-privates.js';
import { adoptPty } from '../../../src/runner/launch/pty.js';
import { setTapListener, TerminalTap, tapper, type Tapper } from '../../../src/runner/launch/tap.js';
import type { LaunchHooks, Launched, TapEnds } from '../../../src/runner/launch/types.js';
import { Spool } from '../../../src/session/spool.js';
import { waitFor } from '../../helpers/daemon.js';

/**
 * A terminal's tap (runner/launch/tap.ts) built in steps: when one throws, what the tap opened is
 * closed and what the caller handed is not (the caller reads it another way). A pipe carried over
 * to an addon without the tap is read before the master. node-pty's internals the tapped launch
 * takes are there in the installed node-pty. Real descriptors, counted in /proc/self/fd.
 */

const found = nativeSpawner();
const addon = found instanceof Error ? undefined : found;
const tap = addon ? tapper(addon) : undefined;
const pty = createRequire(import.meta.url)('@lydell/node-pty') as typeof import('@lydell/node-pty');
const root = mkdtempSync(join(tmpdir(), 'procctl-tap-'));
const started: number[] = [];
const cleanups: (() => void)[] = [];

afterEach(() => {
  for (const undo of cleanups.splice(0)) undo();
  for (const pid of started.splice(0)) {
    try {
      process.kill(pid, 'SIGKILL');
    } catch {
      // gone
    }
  }
  setTapListener(() => undefined);
});

afterAll(() => rmSync(root, { recursive: true, force: true }));

const fds = () => readdirSync('/proc/self/fd').map(Number).sort((a, b) => a - b);
/** What each of this process's descriptors is (`pipe:[inode]`, a path). */
const links = () => fds().map((fd) => {
  try {
    return readlinkSync(`/proc/self/fd/${fd}`);
  } catch {
    return '';
  }
});
const open = (fd: number) => {
  try {
    fstatSync(fd);
    return true;
  } catch {
    return false;
  }
};
const boom = (what: string) => () => {
  throw new Error(`injected: ${what}`);
};
const hooks = { sessionId: 'tap-unit', output: () => undefined, unfinished: () => false, closed: () => undefined };

/** A fresh pseudo-terminal master (its job's side never opened): the caller's, as a session's is. */
function master(): number {
  const fd = openSync('/dev/ptmx', constants.O_RDWR | constants.O_NOCTTY);
  cleanups.push(() => closeSync(fd));
  return fd;
}

/** A pipe whose ends the test owns (a carried tap's), closed after the test. */
function pipeEnds(): [number, number] {
  const ends = tap!.tapPipe();
  cleanups.push(() => ends.forEach((fd) => open(fd) && closeSync(fd)));
  return ends;
}

type Case = { step: string; addon?: (a: Tapper) => Tapper; spool?: boolean; ends?: () => TapEnds };

const file = () => {
  const f = join(root, `file-${Math.random()}`);
  writeFileSync(f, '');
  const fd = openSync(f, 'r');
  cleanups.push(() => closeSync(fd));
  return fd;
};
const dir = () => {
  const fd = openSync(root, 'r');
  cleanups.push(() => closeSync(fd));
  return fd;
};

const cases: Case[] = [
  { step: 'the pipe', addon: (a) => ({ ...a, tapPipe: boom('tapPipe') }) },
  { step: "the carried pipe's write end, opened again (a directory: EISDIR)", ends: () => ({ read: dir() }) },
  { step: 'the copy of the master (fresh pipe)', addon: (a) => ({ ...a, dupDescriptor: boom('dupDescriptor') }) },
  { step: 'the copy of the master (a carried pipe, both ends)', addon: (a) => ({ ...a, dupDescriptor: boom('dupDescriptor') }), ends: () => { const [read, write] = pipeEnds(); return { read, write }; } },
  { step: 'the copy of the master (a carried pipe, its read end: a crash)', addon: (a) => ({ ...a, dupDescriptor: boom('dupDescriptor') }), ends: () => ({ read: pipeEnds()[0] }) },
  { step: 'the tap (fresh pipe)', addon: (a) => ({ ...a, tapTerminal: boom('tapTerminal') }) },
  { step: 'the tap (a carried pipe)', addon: (a) => ({ ...a, tapTerminal: boom('tapTerminal') }), ends: () => { const [read, write] = pipeEnds(); return { read, write }; } },
  { step: 'the route (fresh pipe)', addon: (a) => ({ ...a, splicePipe: boom('splicePipe') }), spool: true },
  { step: 'the route (a carried pipe, its read end)', addon: (a) => ({ ...a, splicePipe: boom('splicePipe') }), spool: true, ends: () => ({ read: pipeEnds()[0] }) },
  // A socket refuses a regular file (ERR_INVALID_FD_TYPE) after the tap started on a real pipe's write end.
  { step: 'the socket (no spool)', ends: () => ({ read: file(), write: pipeEnds()[1] }) },
];

describe.skipIf(!tap)("a terminal's tap built in steps", () => {
  it.each(cases)('a failure at $step closes what the tap opened and nothing the caller handed', (c) => {
    const m = master();
    const ends = c.ends?.();
    const spool = c.spool ? new Spool(join(root, `spool-${Math.random()}.log`), 1024 * 1024) : undefined;
    const before = fds();
    const a = c.addon ? c.addon(tap!) : tap!;
    expect(() => new TerminalTap(a, spool, m, ends, hooks)).toThrow();
    expect(fds()).toEqual(before);
    for (const fd of [m, ends?.read, ends?.write]) if (fd !== undefined) expect(open(fd), `descriptor ${fd}, the caller's`).toBe(true);
  });

  it('built and destroyed: what it opened is closed again and its end is told once', async () => {
    const m = master();
    const before = fds();
    let closed = 0;
    const t = new TerminalTap(tap!, undefined, m, undefined, { ...hooks, closed: () => closed++ });
    expect(fds().length).toBe(before.length + 3);
    t.destroy();
    await waitFor(() => closed === 1, { what: "the tap's end" });
    expect(fds()).toEqual(before);
  });
});

describe.skipIf(!tap)('a terminal carried with its tap pipe to an addon without tapTerminal', () => {
  it('reads what the pipe holds first, then the master, and says why in the log with the session', async () => {
    const term = pty.spawn('/bin/sh', ['-c', 'echo from-the-master; exec sleep 30'], { encoding: null });
    started.push(term.pid);
    // As a launch takes a terminal from node-pty: a copy of the master, node-pty's stream closed before its first read.
    const privates = ptyPrivates(term);
    if (typeof privates === 'string') throw new Error(privates);
    const own = tap!.dupDescriptor(privates.master);
    privates.socket.destroy();
    const [read, write] = tap!.tapPipe();
    writeSync(write, 'from-the-pipe\n');
    const pipe = `pipe:[${fstatSync(read).ino}]`;
    expect(links().filter((l) => l === pipe)).toHaveLength(2);
    const said: [string, string, string][] = [];
    setTapListener((level, sessionId, message) => said.push([level, sessionId, message]));
    let output = '';
    const launchHooks: LaunchHooks = { sessionId: 'carried-1', output: (_stream, chunk) => void (output += chunk.toString()), unfinished: () => false, exit: () => undefined, closed: () => undefined, failed: () => undefined, inputClosed: () => undefined };
    const { tapTerminal: _, ...withoutTap } = addon!;
    const launched: Launched = adoptPty(withoutTap as Addon, { pid: term.pid, terminal: own, pts: privates.pts, tap: { read, write } }, launchHooks);
    cleanups.push(() => launched.release());
    // The pipe was read to its end and both its ends closed, at once (their numbers may be another file's by now).
    expect(links().filter((l) => l === pipe)).toEqual([]);
    await waitFor(() => output.includes('from-the-master'), { what: "the master's output" });
    expect(output.startsWith('from-the-pipe\n'), JSON.stringify(output)).toBe(true);
    expect(said).toHaveLength(1);
    expect(said[0]!.slice(0, 2)).toEqual(['warn', 'carried-1']);
    expect(said[0]![2]).toContain('no tapTerminal');
  });
});

/** A terminal as a launch takes it from node-pty (a copy of its master, node-pty's stream closed before its first read), its leader killed after the test. */
function takenTerminal(command: string): { pid: number; own: number; pts: string } {
  const term = pty.spawn('/bin/sh', ['-c', command], { encoding: null });
  started.push(term.pid);
  const privates = ptyPrivates(term);
  if (typeof privates === 'string') throw new Error(privates);
  const own = tap!.dupDescriptor(privates.master);
  privates.socket.destroy();
  return { pid: term.pid, own, pts: privates.pts };
}

const noLaunchHooks = (sessionId: string, out: { text: string }): LaunchHooks => ({ sessionId, output: (_stream, chunk) => void (out.text += chunk.toString()), unfinished: () => false, exit: () => undefined, closed: () => undefined, failed: () => undefined, inputClosed: () => undefined });

describe.skipIf(!tap)('a carried terminal whose tapped wiring fails at a step', () => {
  it('leaves no tap running and closes each of the pipe\'s ends once: the pipe is read, then the master, by one reader', async () => {
    const { pid, own, pts } = takenTerminal('echo from-the-master; exec sleep 30');
    const [read, write] = tap!.tapPipe();
    writeSync(write, 'from-the-pipe\n');
    const said: [string, string, string][] = [];
    setTapListener((level, sessionId, message) => said.push([level, sessionId, message]));
    // A step of the wiring throws, once (reading the addon's resize).
    let thrown = false;
    const failing = Object.defineProperty({ ...tap! }, 'setWindowSize', {
      get: () => {
        if (thrown) return tap!.setWindowSize;
        thrown = true;
        throw new Error('injected: setWindowSize');
      },
    }) as Tapper;
    const pipe = `pipe:[${fstatSync(read).ino}]`;
    const before = fds();
    const linksBefore = links();
    const out = { text: '' };
    const launched = adoptPty(failing, { pid, terminal: own, pts, tap: { read, write } }, noLaunchHooks('carried-2', out));
    cleanups.push(() => launched.release());
    expect(thrown).toBe(true);
    // Both pipe ends closed; the only descriptor opened is the job's side held open (no tap's copy of the master, no new tap pipe).
    const linksAfter = links();
    expect(linksAfter.filter((l) => l === pipe)).toEqual([]);
    const count = (all: string[], what: string) => all.filter((l) => l === what).length;
    expect(count(linksAfter, '/dev/ptmx')).toBe(count(linksBefore, '/dev/ptmx'));
    expect(count(linksAfter, pts)).toBe(count(linksBefore, pts) + 1);
    expect(linksAfter.filter((l) => l.startsWith('pipe:')).length).toBe(linksBefore.filter((l) => l.startsWith('pipe:')).length - 2);
    expect(linksAfter.length).toBe(linksBefore.length - 1);
    await waitFor(() => out.text.includes('from-the-master'), { what: "the master's output" });
    expect(out.text.startsWith('from-the-pipe\n'), JSON.stringify(out.text)).toBe(true);
    expect(said).toHaveLength(1);
    expect(said[0]!.slice(0, 2)).toEqual(['warn', 'carried-2']);
    expect(said[0]![2]).toContain('injected: setWindowSize');
    // Released: the master and the job's side closed, nothing else (a descriptor closed twice would take another's number).
    launched.release();
    cleanups.pop();
    await waitFor(() => count(links(), '/dev/ptmx') === count(linksBefore, '/dev/ptmx') - 1, { what: 'the master closed' });
    expect(links().length).toBe(linksBefore.length - 3);
    expect(before.length).toBe(linksBefore.length);
  });

  it('a carried pipe that cannot be read: said in the log with the session and the bytes read, not taken for its end', () => {
    const { pid, own, pts } = takenTerminal('exec sleep 30');
    // A directory for the pipe's read end: read(2) fails with EISDIR (not EAGAIN, not 0).
    const notAPipe = openSync(root, 'r');
    const said: [string, string, string, Record<string, unknown>][] = [];
    setTapListener((level, sessionId, message, fields) => said.push([level, sessionId, message, fields]));
    const { tapTerminal: _, ...withoutTap } = addon!;
    const launched = adoptPty(withoutTap as Addon, { pid, terminal: own, pts, tap: { read: notAPipe } }, noLaunchHooks('carried-3', { text: '' }));
    cleanups.push(() => launched.release());
    // Closed (its number may be the job's side by now).
    expect(open(notAPipe) ? readlinkSync(`/proc/self/fd/${notAPipe}`) : '').not.toBe(root);
    const read = said.filter(([, , message]) => message.includes('could not be read to its end'));
    expect(read).toHaveLength(1);
    expect(read[0]!.slice(0, 2)).toEqual(['error', 'carried-3']);
    expect(read[0]![2]).toContain('EISDIR');
    expect(read[0]![3]).toMatchObject({ errno: 'EISDIR', bytes: 0 });
  });
});

describe.skipIf(!tap?.splicePipe)('a tap whose route gives its pipe up', () => {
  it('reads out what the pipe still holds before the master, and says so', async () => {
    const m = master();
    const spool = new Spool(join(root, `spool-${Math.random()}.log`), 1024 * 1024);
    let batch: ((n: number, status: number) => void) | undefined;
    const routed: Tapper = { ...tap!, splicePipe: (fd, target, buffer, onBatch) => ((batch = onBatch), tap!.splicePipe!(fd, target, buffer, onBatch)) };
    const said: string[] = [];
    setTapListener((_level, _session, message) => said.push(message));
    let output = '';
    let closed = 0;
    const before = fds();
    const t = new TerminalTap(routed, spool, m, undefined, { ...hooks, output: (chunk) => void (output += chunk.toString()), closed: () => closed++ });
    t.hold();
    const carried = t.ends()!.tap!;
    writeSync(carried.write!, 'left-in-the-pipe');
    // The route's read ends (as native/splice.c says at a pipe's end): it gives the pipe up.
    batch!(0, 2);
    expect(output).toBe('left-in-the-pipe');
    expect(said.some((m) => m.includes('given up'))).toBe(true);
    t.destroy();
    await waitFor(() => closed === 1, { what: "the tap's end" });
    expect(fds()).toEqual(before);
  });
});

describe('what a tapped launch takes of the installed node-pty', () => {
  it("a terminal's job side, master and its stream on it are there, and the stream has not read yet", () => {
    const term = pty.spawn('/bin/sh', ['-c', 'exec sleep 30'], { encoding: null });
    started.push(term.pid);
    const privates = ptyPrivates(term);
    expect(typeof privates, String(privates)).toBe('object');
    const p = privates as Exclude<typeof privates, string>;
    expect(p.pts).toBe(term.ptsName);
    expect(p.master).toBe((term as unknown as { _fd: number })._fd);
    expect(p.socket.destroyed).toBe(false);
    term.kill('SIGKILL');
  });

  it('a terminal object without them: a reason that names what is missing, not a crash', () => {
    expect(ptyPrivates({ ptsName: '/dev/pts/9', _fd: 12 })).toMatch(/lacks _socket/);
    expect(ptyPrivates({})).toMatch(/lacks ptsName .*_fd .*_socket/);
  });

  it.skipIf(!tap?.tapProbe)("this kernel splices from a terminal's master (the probe a daemon asks once)", () => {
    expect(tap!.tapProbe!()).toBe(0);
  });
});
