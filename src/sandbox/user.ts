import { spawnSync } from 'node:child_process';
import { statSync } from 'node:fs';
import { dirname } from 'node:path';

/** The user non-elevated sessions run as (`sandbox.user`), resolved through the system's user database. */
export interface RunAs {
  name: string;
  uid: number;
  gid: number;
  /** Supplementary groups (the primary group among them, as initgroups gives them). */
  groups: number[];
  home: string;
}

const LOOKUP_TIMEOUT_MS = 10_000;

/** `sandbox.user` (a name or a uid) as a RunAs, or why it cannot be one. */
export function resolveUser(spec: string, getent: string | undefined, id: string | undefined): RunAs | string {
  if (!getent || !id) return 'getent and id are needed to look the user up and are not on the daemon\'s PATH';
  const entry = spawnSync(getent, ['passwd', spec], { encoding: 'utf8', timeout: LOOKUP_TIMEOUT_MS });
  const fields = entry.status === 0 ? entry.stdout.trim().split('\n')[0].split(':') : [];
  if (fields.length < 7) return `sandbox.user "${spec}": no such user (getent passwd ${spec} found nothing); create it or name another`;
  const [name, , uid, gid, , home] = fields;
  const groups = spawnSync(id, ['-G', name], { encoding: 'utf8', timeout: LOOKUP_TIMEOUT_MS });
  if (groups.status !== 0) return `sandbox.user "${spec}": its groups cannot be read (id -G ${name}: ${groups.stderr.trim()})`;
  const user = { name, uid: Number(uid), gid: Number(gid), groups: groups.stdout.trim().split(/\s+/).filter(Boolean).map(Number), home };
  if (user.uid === 0) return `sandbox.user "${spec}" is root itself; name an unprivileged user for sessions to run as`;
  return user;
}

/** util-linux setpriv's options that make the rest run as the user, with no capability left to inherit. */
export function setprivOptions(u: RunAs): string[] {
  const groups = u.groups.length > 0 ? `--groups=${u.groups.join(',')}` : '--clear-groups';
  return [`--reuid=${u.uid}`, `--regid=${u.gid}`, groups, '--inh-caps=-all', '--'];
}

const mode = (m: number) => (m & 0o777).toString(8).padStart(3, '0');

/**
 * Why the user cannot enter `dir` (search permission on it and every directory above it, from
 * the mode bits; ACLs are not read: what they refuse, the spawner's chdir still reports).
 */
export function accessProblem(dir: string, u: RunAs): string | undefined {
  const chain: string[] = [];
  for (let d = dir; ; d = dirname(d)) {
    chain.unshift(d);
    if (d === dirname(d)) break;
  }
  for (const d of chain) {
    let st;
    try {
      st = statSync(d);
    } catch (err) {
      return `${d}: ${(err as Error).message}`;
    }
    const bits = st.uid === u.uid ? st.mode >> 6 : st.gid === u.gid || u.groups.includes(st.gid) ? st.mode >> 3 : st.mode;
    if ((bits & 1) === 0) return `the workdir ${dir} is not accessible to sandbox.user "${u.name}" (uid ${u.uid}): ${d} is mode ${mode(st.mode)}, owner ${st.uid}:${st.gid}; let the user in or pass a workdir it can enter`;
  }
  return undefined;
}
