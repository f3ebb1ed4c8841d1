import { describe, expect, it } from 'vitest';
import { bwrapOptions, type SandboxLayout } from '../../../src/sandbox/bwrap.js';

const base: SandboxLayout = {
  mode: 'workspace-write',
  network: false,
  workdir: '/srv/project',
  scratch: '/run/procctl/procctl.sock.d/sessions/abc',
  socket: '/run/procctl/procctl.sock',
  writable: [],
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
      ['--tmpfs', '/dev/shm'],
      ['--proc', '/proc'],
      ['--perms', '1777'],
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

  it('read-only: nothing but the scratch dir is bound writable; sandbox.writable is ignored', () => {
    const args = bwrapOptions({ ...base, mode: 'read-only', writable: ['/data'] }, none);
    expect(groups(args).filter((g) => g[0] === '--bind')).toEqual([['--bind', base.scratch!, base.scratch!]]);
  });

  it('read-only with a workdir under /tmp: bound in again read-only, to be seen', () => {
    const args = bwrapOptions({ ...base, mode: 'read-only', workdir: '/tmp/job' }, none);
    expect(groups(args)).toContainEqual(['--ro-bind', '/tmp/job', '/tmp/job']);
  });

  it('sandbox.writable paths are writable after the workdir; network:true keeps the host network; as root every capability is dropped', () => {
    const args = bwrapOptions({ ...base, writable: ['/data', '/cache'], network: true, asRoot: true }, none);
    const g = groups(args);
    expect(g.filter((x) => x[0] === '--bind').map((x) => x[1])).toEqual(['/srv/project', '/data', '/cache', base.scratch]);
    expect(args).not.toContain('--unshare-net');
    expect(g).toContainEqual(['--cap-drop', 'ALL']);
  });

  it('protects .git under each writable root: .git pinned (bound onto itself), hooks and config read-only', () => {
    const kind = fsOf(['/srv/project/.git/', '/srv/project/.git/hooks/', '/srv/project/.git/config']);
    const g = groups(bwrapOptions(base, kind));
    const at = g.findIndex((x) => x[1] === '/srv/project/.git');
    expect(g.slice(at, at + 3)).toEqual([
      ['--bind', '/srv/project/.git', '/srv/project/.git'],
      ['--ro-bind', '/srv/project/.git/hooks', '/srv/project/.git/hooks'],
      ['--ro-bind', '/srv/project/.git/config', '/srv/project/.git/config'],
    ]);
    // After the writable workdir, so they win.
    expect(at).toBeGreaterThan(g.findIndex((x) => x[1] === '/srv/project'));
  });

  it('a .git without hooks gets an empty read-only hooks dir; a .git file (a worktree) is read-only itself', () => {
    const noHooks = groups(bwrapOptions(base, fsOf(['/srv/project/.git/'])));
    expect(noHooks).toContainEqual(['--tmpfs', '/srv/project/.git/hooks']);
    expect(noHooks).toContainEqual(['--remount-ro', '/srv/project/.git/hooks']);
    const worktree = groups(bwrapOptions(base, fsOf(['/srv/project/.git'])));
    expect(worktree).toContainEqual(['--ro-bind', '/srv/project/.git', '/srv/project/.git']);
  });

  it('binds the daemon socket in only where the sandbox would hide it (under /tmp)', () => {
    expect(bwrapOptions(base, none)).not.toContain(base.socket);
    const hidden = bwrapOptions({ ...base, socket: '/tmp/procctl-0/procctl.sock' }, none);
    expect(groups(hidden)).toContainEqual(['--ro-bind', '/tmp/procctl-0/procctl.sock', '/tmp/procctl-0/procctl.sock']);
  });

  it('a workdir of / made writable gets the private /dev, /proc and /tmp again on top', () => {
    const g = groups(bwrapOptions({ ...base, workdir: '/' }, none));
    const bind = g.findIndex((x) => x[0] === '--bind' && x[1] === '/');
    expect(g.slice(bind + 1).filter((x) => x[0] !== '--perms').slice(0, 4)).toEqual([['--dev', '/dev'], ['--tmpfs', '/dev/shm'], ['--proc', '/proc'], ['--tmpfs', '/tmp']]);
  });

  it('under the private /tmp, the directories above a bind are made passable (0755) first, once each', () => {
    const g = groups(bwrapOptions({ ...base, workdir: '/tmp/a/b/work', scratch: '/tmp/a/scratch/s1' }, none));
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
