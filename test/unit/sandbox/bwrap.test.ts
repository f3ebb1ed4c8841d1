import { describe, expect, it } from 'vitest';
import { bwrapOptions, type SandboxLayout } from '../../../src/sandbox/bwrap.js';

const base: SandboxLayout = {
  mode: 'workspace-write',
  network: false,
  workdir: '/srv/project',
  scratch: '/run/procctl/procctl.sock.d/sessions/abc',
  hidden: [],
  writable: ['/srv/project'],
  protect: [],
  tmpBytes: 1024,
  asRoot: false,
};

/** A filesystem of these paths (dirs end in /). */
const fsOf = (paths: string[]) => (p: string) => (paths.includes(`${p}/`) ? 'dir' : paths.includes(p) ? 'file' : undefined);
const none = fsOf([]);

/** The options as [option, ...args] groups, in order. */
function groups(args: string[]): string[][] {
  const out: string[][] = [];
  for (const a of args) {
    if (a.startsWith('--')) out.push([a]);
    else out[out.length - 1].push(a);
  }
  return out;
}

describe('bwrapOptions', () => {
  it('workspace-write: / read-only, private /dev /proc /tmp, then the workdir and the scratch dir writable, no network', () => {
    expect(groups(bwrapOptions(base, none))).toEqual([
      ['--ro-bind', '/', '/'],
      ['--dev', '/dev'],
      ['--perms', '1777'],
      ['--size', '1024'],
      ['--tmpfs', '/dev/shm'],
      ['--proc', '/proc'],
      ['--perms', '1777'],
      ['--size', '1024'],
      ['--tmpfs', '/tmp'],
      ['--bind', '/srv/project', '/srv/project'],
      ['--bind', base.scratch!, base.scratch!],
      ['--chdir', '/srv/project'],
      ['--unshare-pid'],
      ['--unshare-ipc'],
      ['--unshare-net'],
    ]);
  });

  it('never puts the job in a new session, never makes it PID 1, and keeps its namespace past the outer bwrap', () => {
    const args = bwrapOptions({ ...base, asRoot: true, network: true }, none);
    expect(args).not.toContain('--new-session');
    expect(args).not.toContain('--as-pid-1');
    expect(args).not.toContain('--die-with-parent');
  });

  it('read-only: nothing but the scratch dir is bound writable, whatever trees are given', () => {
    const args = bwrapOptions({ ...base, mode: 'read-only', writable: ['/data'] }, none);
    expect(groups(args).filter((g) => g[0] === '--bind')).toEqual([['--bind', base.scratch!, base.scratch!]]);
  });

  it('read-only with a workdir under /tmp: bound in again read-only, to be seen', () => {
    const args = bwrapOptions({ ...base, mode: 'read-only', workdir: '/tmp/job' }, none);
    expect(groups(args)).toContainEqual(['--ro-bind', '/tmp/job', '/tmp/job']);
  });

  it('the writable trees in order, then the scratch dir; network:true keeps the host network; as root every capability is dropped', () => {
    const args = bwrapOptions({ ...base, writable: ['/srv/project', '/data', '/cache'], network: true, asRoot: true }, none);
    const g = groups(args);
    expect(g.filter((x) => x[0] === '--bind').map((x) => x[1])).toEqual(['/srv/project', '/data', '/cache', base.scratch]);
    expect(args).not.toContain('--unshare-net');
    expect(g).toContainEqual(['--cap-drop', 'ALL']);
  });

  it('sandbox.protect: pinned paths bound onto themselves, the rest read-only or an empty read-only dir, after the writable trees', () => {
    const protect = [
      { path: '/srv/project/.git', how: 'pin' as const },
      { path: '/srv/project/.git/config', how: 'ro' as const },
      { path: '/srv/project/.git/hooks', how: 'empty' as const },
    ];
    const g = groups(bwrapOptions({ ...base, protect }, none));
    const at = g.findIndex((x) => x[1] === '/srv/project/.git');
    expect(g.slice(at, at + 4)).toEqual([
      ['--bind', '/srv/project/.git', '/srv/project/.git'],
      ['--ro-bind', '/srv/project/.git/config', '/srv/project/.git/config'],
      ['--tmpfs', '/srv/project/.git/hooks'],
      ['--remount-ro', '/srv/project/.git/hooks'],
    ]);
    expect(at).toBeGreaterThan(g.findIndex((x) => x[1] === '/srv/project'));
    // Read-only: nothing is writable, nothing needs protecting.
    expect(bwrapOptions({ ...base, mode: 'read-only', protect }, none)).not.toContain('/srv/project/.git/config');
  });

  it("hides the daemon's own paths after everything that could expose them: a directory as an empty tmpfs, a file (or socket) under /dev/null; the scratch dir inside is bound again, reachable", () => {
    const hidden = ['/run/procctl/procctl.sock', '/run/procctl/procctl.sock.d', '/var/lib/procctl', '/etc/procctl/config.json', '/nowhere'];
    const kind = fsOf(['/run/procctl/procctl.sock', '/run/procctl/procctl.sock.d/', '/var/lib/procctl/', '/etc/procctl/config.json']);
    const g = groups(bwrapOptions({ ...base, hidden, writable: ['/'] }, kind));
    const at = (x: string[]) => g.findIndex((y) => JSON.stringify(y) === JSON.stringify(x));
    const sock = at(['--ro-bind', '/dev/null', '/run/procctl/procctl.sock']);
    const runtime = at(['--tmpfs', '/run/procctl/procctl.sock.d']);
    const state = at(['--tmpfs', '/var/lib/procctl']);
    const config = at(['--ro-bind', '/dev/null', '/etc/procctl/config.json']);
    for (const i of [sock, runtime, state, config]) expect(i).toBeGreaterThan(at(['--bind', '/', '/']));
    expect(g.flat()).not.toContain('/nowhere');
    const scratch = at(['--bind', base.scratch!, base.scratch!]);
    expect(scratch).toBeGreaterThan(runtime);
    expect(g.slice(runtime, scratch)).toContainEqual(['--dir', '/run/procctl/procctl.sock.d/sessions']);
  });

  it('a workdir of / made writable gets the private /dev, /proc and /tmp again on top', () => {
    const g = groups(bwrapOptions({ ...base, workdir: '/', writable: ['/'] }, none));
    const bind = g.findIndex((x) => x[0] === '--bind' && x[1] === '/');
    expect(g.slice(bind + 1).filter((x) => x[0] !== '--perms' && x[0] !== '--size').slice(0, 4)).toEqual([['--dev', '/dev'], ['--tmpfs', '/dev/shm'], ['--proc', '/proc'], ['--tmpfs', '/tmp']]);
  });

  it('under the private /tmp, the directories above a bind are made passable (0755) first, once each', () => {
    const g = groups(bwrapOptions({ ...base, workdir: '/tmp/a/b/work', writable: ['/tmp/a/b/work'], scratch: '/tmp/a/scratch/s1' }, none));
    const dirs = g.filter((x) => x[0] === '--dir').map((x) => x[1]);
    expect(dirs).toEqual(['/tmp/a', '/tmp/a/b', '/tmp/a/scratch']);
    const at = g.findIndex((x) => x[0] === '--dir' && x[1] === '/tmp/a');
    expect(g[at - 1]).toEqual(['--perms', '0755']);
    expect(g.findIndex((x) => x[1] === '/tmp/a/b/work')).toBeGreaterThan(g.findIndex((x) => x[1] === '/tmp/a/b'));
  });

  it('as root for sandbox.user: capabilities dropped but the two setpriv needs to become the user', () => {
    const g = groups(bwrapOptions({ ...base, asRoot: true, asUser: true }, none));
    expect(g.slice(-3)).toEqual([['--cap-drop', 'ALL'], ['--cap-add', 'CAP_SETUID'], ['--cap-add', 'CAP_SETGID']]);
  });
});
