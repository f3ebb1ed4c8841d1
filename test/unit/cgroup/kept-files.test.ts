import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, statfsSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { KeptFiles, rssBytes } from '../../../src/cgroup/files.js';

const openFds = () => readdirSync('/proc/self/fd').length;

describe('files kept open for the samplers\' reads', () => {
  const dirs: string[] = [];
  afterEach(() => {
    for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
  });

  it('reads a file anew from its start through the kept descriptor, and a sweep closes what was not read since the last', () => {
    const dir = mkdtempSync(join(tmpdir(), 'kept-'));
    dirs.push(dir);
    const [a, b] = [join(dir, 'a'), join(dir, 'b')];
    writeFileSync(a, 'usage_usec 10\n');
    writeFileSync(b, '1\n');
    const kept = new KeptFiles();
    const before = openFds();
    expect(kept.read(a)).toBe('usage_usec 10\n');
    expect(kept.read(b)).toBe('1\n');
    expect(kept.size).toBe(2);
    expect(openFds()).toBe(before + 2);
    // Changed in place: the same descriptor reads what it holds now.
    writeFileSync(a, 'usage_usec 2000\n');
    expect(kept.read(a)).toBe('usage_usec 2000\n');
    expect(kept.size).toBe(2);
    kept.sweep();
    // Only a is read in the next round: the sweep after it closes b's descriptor.
    expect(kept.read(a)).toBe('usage_usec 2000\n');
    kept.sweep();
    expect(kept.size).toBe(1);
    expect(openFds()).toBe(before + 1);
    kept.sweep();
    expect(kept.size).toBe(0);
    expect(openFds()).toBe(before);
    expect(kept.read(join(dir, 'missing'))).toBeUndefined();
    expect(kept.size).toBe(0);
  });

  it('lets go of a process that is gone, and reads the process now holding the path', async () => {
    const kept = new KeptFiles();
    const child = spawn('sleep', ['60'], { stdio: 'ignore' });
    await new Promise((resolve) => child.once('spawn', resolve));
    const path = `/proc/${child.pid}/status`;
    expect(kept.read(path)).toMatch(/^Name:\tsleep/m);
    expect(rssBytes(child.pid!, kept.read)).toBeGreaterThan(0);
    child.kill('SIGKILL');
    await new Promise((resolve) => child.once('exit', resolve));
    // Reaped: the kept descriptor reads nothing, is closed, and the path (no process now) is not there.
    expect(kept.read(path)).toBeUndefined();
    expect(kept.size).toBe(0);
    // The daemon's own status through the same reader: opened anew.
    expect(kept.read(`/proc/${process.pid}/status`)).toMatch(/^Pid:\t\d+/m);
    expect(kept.size).toBe(1);
    kept.sweep();
    kept.sweep();
    expect(kept.size).toBe(0);
  });

  it('keeps no more than an eighth of the open-file limit, and reads past it by path', () => {
    const dir = mkdtempSync(join(tmpdir(), 'kept-'));
    dirs.push(dir);
    const soft = Number(/^Max open files\s+(\d+)/m.exec(readFileSync('/proc/self/limits', 'latin1'))![1]);
    const max = Math.min(4096, Math.floor(soft / 8));
    const kept = new KeptFiles();
    const before = openFds();
    for (let i = 0; i < max + 50; i++) {
      writeFileSync(join(dir, String(i)), `${i}\n`);
      expect(kept.read(join(dir, String(i)))).toBe(`${i}\n`);
    }
    expect(kept.size).toBe(max);
    expect(openFds()).toBe(before + max);
    kept.sweep();
    kept.sweep();
    expect(openFds()).toBe(before);
  });

  it("keeps cgroup2's member list open, never a v1 cgroup's (v1 answers a kept one's first list again)", (ctx) => {
    const v1 = ['/sys/fs/cgroup/pids', '/sys/fs/cgroup/memory', '/sys/fs/cgroup/cpu'].find((d) => existsSync(join(d, 'cgroup.procs')) && statfsSync(d).type !== 0x63677270);
    const v2 = ['/sys/fs/cgroup/unified', '/sys/fs/cgroup'].find((d) => existsSync(join(d, 'cgroup.procs')) && statfsSync(d).type === 0x63677270);
    if (!v1 && !v2) return ctx.skip();
    const kept = new KeptFiles();
    if (v1) {
      expect(kept.read(join(v1, 'cgroup.procs'))).toMatch(/^\d+$/m);
      expect(kept.size).toBe(0);
    }
    if (v2) {
      expect(kept.read(join(v2, 'cgroup.procs'))).toMatch(/^\d+$/m);
      expect(kept.size).toBe(1);
    }
    kept.closeAll();
    expect(kept.size).toBe(0);
  });
});
