import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { afterEach, describe, expect, it } from 'vitest';
import { loadAddon } from '../../../src/base/addon.js';
import { waitFor } from '../../helpers/daemon.js';

/**
 * A terminal session's exit across a restart's last moment (native/terminal.c): node-pty reaps
 * its child on a thread of its own, and an exit reaped there just before the exec would be lost
 * to the new image. While parked, that thread reaps nothing: the exit stays in the kernel (a
 * zombie) for the next reaper; let go, node-pty reports it as ever. Real node-pty, real children.
 */
interface TerminalAddon {
  parkWaiters(pids: number[]): number[];
  unparkWaiters(): void;
  setWindowSize(fd: number, cols: number, rows: number): void;
}

const addon = loadAddon<TerminalAddon>(['parkWaiters', 'unparkWaiters', 'setWindowSize']);
const pty = createRequire(import.meta.url)('@lydell/node-pty') as typeof import('@lydell/node-pty');
const started: number[] = [];

afterEach(() => {
  if (!(addon instanceof Error)) addon.unparkWaiters();
  for (const pid of started.splice(0)) {
    try {
      process.kill(pid, 'SIGKILL');
    } catch {
      // gone
    }
  }
});

/** The process's state letter in /proc (Z: exited, not reaped), or undefined once it is reaped. */
function state(pid: number): string | undefined {
  try {
    return readFileSync(`/proc/${pid}/stat`, 'utf8').replace(/^.*\) /s, '')[0];
  } catch {
    return undefined;
  }
}

describe.skipIf(addon instanceof Error)("node-pty's reaping thread parked for a restart", () => {
  const a = addon as TerminalAddon;

  it('an exit while parked stays unreaped; let go, node-pty reports its status', async () => {
    const term = pty.spawn('/bin/sh', ['-c', 'read x; exit 7'], {});
    started.push(term.pid);
    let exit: { exitCode: number; signal?: number } | undefined;
    term.onExit((e) => (exit = e));
    // node-pty's thread is in waitpid once the child runs.
    await waitFor(() => a.parkWaiters([term.pid]).includes(term.pid) || (a.unparkWaiters(), false), { what: "node-pty's thread to be waiting" });
    term.write('go\n');
    await waitFor(() => state(term.pid) === 'Z', { what: 'the child to exit' });
    // The event loop turns on meanwhile: nothing reaps it, nothing reports it.
    await new Promise((r) => setTimeout(r, 200));
    expect(state(term.pid)).toBe('Z');
    expect(exit).toBeUndefined();
    a.unparkWaiters();
    await waitFor(() => exit !== undefined, { what: 'node-pty to report the exit' });
    expect(exit!.exitCode).toBe(7);
    expect(state(term.pid)).toBeUndefined();
  });

  it('a child reaped already is not named: its exit belongs to this image', async () => {
    const term = pty.spawn('/bin/sh', ['-c', 'exit 0'], {});
    let exited = false;
    term.onExit(() => (exited = true));
    await waitFor(() => exited, { what: 'the child to exit' });
    expect(a.parkWaiters([term.pid])).toEqual([]);
  });

  it('setWindowSize resizes the terminal from its master alone', async () => {
    const term = pty.spawn('/bin/sh', ['-c', 'read x; stty size'], { cols: 80, rows: 24 });
    started.push(term.pid);
    let out = '';
    term.onData((d) => (out += d));
    a.setWindowSize((term as unknown as { _fd: number })._fd, 132, 50);
    term.write('\n');
    await waitFor(() => out.includes('50 132'), { what: 'stty to say the new size' });
    expect(() => a.setWindowSize(-1, 10, 10)).toThrow(/TIOCSWINSZ/);
    expect(() => a.setWindowSize(0, 0, 10)).toThrow(/cols and rows/);
  });
});
