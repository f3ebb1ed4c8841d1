import { cgroupPathsOf, type CgroupLayout } from '../cgroup/host.js';
import { readStat } from './procfs.js';
import { sessionMarker } from './sweep.js';

/** How far up the parent chain a caller is followed: far deeper than any shell nesting. */
const MAX_HOPS = 64;

/**
 * Is this process part of a session (SPEC §8: an answer from inside one is refused)? Yes when it
 * is in a session's cgroup (SPEC §15, where sessions have one), or when it
 * or an ancestor carries a session's marker in its environment (PROCCTL_SESSION_ID, inherited by
 * everything a job starts, `env -i` aside), or sits in the process group of a running session
 * (`groups`: the leaders' pids). Returns the session id or group found, for the log.
 */
export function insideSession(pid: number, groups: ReadonlySet<number>, cgroups?: Pick<CgroupLayout, 'members'>): string | undefined {
  // Where sessions have cgroups, the kernel says it exactly: a process below a session's cgroup is in it.
  const members = cgroups?.members;
  if (members) {
    const path = cgroupPathsOf(pid)?.get(members.hierarchy);
    const prefix = `${members.path === '/' ? '' : members.path}/s-`;
    if (path?.startsWith(prefix)) return `session ${path.slice(prefix.length).split('/')[0]} (its cgroup holds process ${pid})`;
  }
  let p = pid;
  for (let hop = 0; hop < MAX_HOPS && p > 1; hop++) {
    const marker = sessionMarker(p);
    if (marker !== undefined) return `session ${marker} (process ${p})`;
    const stat = readStat(p);
    if (!stat) return undefined;
    if (groups.has(stat.pgrp) || groups.has(p)) return `the process group ${stat.pgrp} of a running session (process ${p})`;
    p = stat.ppid;
  }
  return undefined;
}
