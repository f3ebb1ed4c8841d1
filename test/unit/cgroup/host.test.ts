import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { CgroupsUnavailable, openCgroups, subtreeName, type CgroupHostFiles } from '../../../src/cgroup/host.js';

/**
 * How the daemon picks its mode on hosts this machine is not: a systemd host with and without
 * Delegate=yes, and v1 controllers beside a v2 tree without them. The host is described on disk
 * (a directory standing for each mount, files standing for the cgroup files the daemon writes).
 */

const dirs: string[] = [];
afterEach(() => {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

/** A cgroup directory with the files the daemon reads and writes. */
function cgroupDir(dir: string, controllers = ''): string {
  mkdirSync(dir, { recursive: true });
  for (const f of ['cgroup.procs', 'cgroup.subtree_control', 'cgroup.kill', 'cgroup.freeze']) writeFileSync(join(dir, f), '');
  writeFileSync(join(dir, 'cgroup.controllers'), controllers);
  return dir;
}

function host(opts: { systemd: boolean; delegated?: boolean; v2Controllers?: string; v1?: boolean }): { files: CgroupHostFiles; base: string; own: string } {
  const base = mkdtempSync(join(tmpdir(), 'procctl-cghost-'));
  dirs.push(base);
  const path = '/system.slice/procctld.service';
  const own = cgroupDir(join(base, 'v2', path), opts.v2Controllers ?? '');
  const mounts = [`30 20 0:26 / ${base}/v2 rw,nosuid - cgroup2 cgroup2 rw`];
  const lines = [`0::${path}`];
  if (opts.v1) {
    cgroupDir(join(base, 'memory', path));
    mounts.push(`31 20 0:27 / ${base}/memory rw - cgroup cgroup rw,memory`);
    lines.push(`4:memory:${path}`);
  }
  return {
    base,
    own,
    files: { mountinfo: mounts.join('\n'), cgroup: lines.join('\n'), systemd: opts.systemd, delegated: (p) => opts.delegated === true && p === path, pid: 4242 },
  };
}

describe('cgroup mode detection', () => {
  it('under systemd without Delegate=yes: no cgroups, and the reason says what to add', () => {
    const { files } = host({ systemd: true, delegated: false, v2Controllers: 'cpu memory pids' });
    const layout = openCgroups({ mode: 'auto' }, '/var/lib/procctl', files);
    expect(layout.mode).toBe('none');
    expect(layout.reason).toMatch(/systemd manages \/system\.slice\/procctld\.service and did not delegate it: add Delegate=yes/);
  });

  it('under systemd with Delegate=yes: the service cgroup is the subtree, the daemon moves into its leaf, controllers are enabled for sessions', () => {
    const { files, own } = host({ systemd: true, delegated: true, v2Controllers: 'cpu memory pids' });
    cgroupDir(join(own, 'daemon'));
    const layout = openCgroups({ mode: 'auto' }, '/var/lib/procctl', files);
    expect(layout).toMatchObject({ mode: 'v2', v2: own, leaf: join(own, 'daemon'), v2Kill: true, freeze: 'v2' });
    expect(layout.controllers).toEqual({ memory: 'v2', pids: 'v2', cpu: 'v2' });
    expect(readFileSync(join(own, 'daemon', 'cgroup.procs'), 'latin1')).toBe('4242');
    expect(layout.members).toEqual({ hierarchy: '', path: '/system.slice/procctld.service' });
    expect(layout.reason).toMatch(/delegated by systemd/);
  });

  it('without systemd: a subtree named after the state directory under the daemon\'s own cgroup; v1 gives what v2 lacks', () => {
    const { files, own, base } = host({ systemd: false, v1: true });
    const layout = openCgroups({ mode: 'auto' }, '/srv/state', files);
    const name = subtreeName('/srv/state');
    expect(layout.mode).toBe('v2');
    expect(layout.v2).toBe(join(own, name));
    expect(layout.leaf).toBeUndefined();
    expect(layout.v1).toEqual({ memory: join(base, 'memory', '/system.slice/procctld.service', name) });
    expect(layout.controllers).toEqual({ memory: 'v1', pids: null, cpu: null });
    expect(layout.reason).toMatch(/no pids, cpu controller: limits\.session needing it are refused/);
    expect(layout.made).toEqual([join(own, name), layout.v1.memory]);
  });

  it('cgroups.mode "v1" skips v2; "off" uses nothing; a root that is not on cgroup2 or "v1" with no v1 refuses', () => {
    const { files } = host({ systemd: false, v1: true });
    const v1 = openCgroups({ mode: 'v1' }, '/s', files);
    expect(v1.mode).toBe('v1');
    expect(v1.v2).toBeUndefined();
    expect(v1.members?.hierarchy).toBe('memory');
    expect(openCgroups({ mode: 'off' }, '/s', files).mode).toBe('none');
    expect(() => openCgroups({ mode: 'auto', root: '/tmp' }, '/s', files)).toThrow(CgroupsUnavailable);
    expect(() => openCgroups({ mode: 'v1' }, '/s', host({ systemd: false }).files)).toThrow(/no v1 hierarchy can be written/);
  });

  it('the subtree name depends on the state directory alone, as an absolute path', () => {
    expect(subtreeName('/a/state')).toBe(subtreeName('/a/./state'));
    expect(subtreeName('/a/state')).not.toBe(subtreeName('/b/state'));
    expect(subtreeName('/a/state')).toMatch(/^procctld-[0-9a-f]{12}$/);
  });
});
