import { readFileSync } from 'node:fs';
import { afterAll, describe, expect, it } from 'vitest';
import { findStdinReader, findStdinReaders } from '../../../src/interrupt/kernel.js';
import { waitFor } from '../../helpers/daemon.js';
import { killGroups, runInGroup } from '../../helpers/stdin-reader.js';

afterAll(killGroups);
const run = runInGroup;

/** The syscall a process is in, as /proc/PID/syscall says it ("running", or a number and arguments). */
const syscall = (pid: number) => {
  try {
    return readFileSync(`/proc/${pid}/syscall`, 'latin1');
  } catch {
    return '';
  }
};
const children = (pid: number) => readFileSync(`/proc/${pid}/task/${pid}/children`, 'latin1').split(' ').filter(Boolean).map(Number);

// With the addon built (the install step builds it), findStdinReaders reads /proc on its idle thread;
// without it, it runs the JS walk. Either way it must answer as findStdinReader does.
describe('who reads a session input: the addon and the JS walk agree', () => {
  it('answers each entry in order: a reader of the input itself, a child reading it, a sleeper', async () => {
    const reader = run('read x');
    const parent = run('cat; true');
    const sleeper = run('sleep 600 < /dev/null');
    const READ = process.arch === 'arm64' ? '63 ' : '0 ';
    await waitFor(() => syscall(reader.pid).startsWith(READ), { what: 'bash blocked in read' });
    const cat = await waitFor(() => children(parent.pid).find((c) => syscall(c).startsWith(READ)), { what: 'cat blocked in read' });
    await waitFor(() => children(sleeper.pid).length > 0 || /^(35|230|101|115) /.test(syscall(sleeper.pid)), { what: 'sleep started' });
    const queries = [reader, parent, sleeper].map((r) => ({ leader: r.pid, stdinId: r.stdinId, pty: false }));
    const expected = [{ pid: reader.pid, how: 'read' }, { pid: cat, how: 'read' }, undefined];
    expect(queries.map((q) => findStdinReader(q.leader, q.stdinId, q.pty))).toEqual(expected);
    expect(await findStdinReaders(queries)).toEqual(expected);
  });

  it('a session whose leader is gone, or whose input is another file, has no reader', async () => {
    const reader = run('read x');
    await waitFor(() => syscall(reader.pid).startsWith(process.arch === 'arm64' ? '63 ' : '0 '), { what: 'bash blocked in read' });
    const queries = [
      { leader: reader.pid, stdinId: 'pipe:[1]', pty: false },
      { leader: 2 ** 22 + 17, stdinId: reader.stdinId, pty: false },
    ];
    expect(await findStdinReaders(queries)).toEqual([undefined, undefined]);
    expect(await findStdinReaders([])).toEqual([]);
  });
});
