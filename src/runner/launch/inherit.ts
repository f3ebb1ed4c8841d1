import { loadAddon } from '../../base/addon.js';

interface InheritAddon {
  setInheritable(fd: number, inheritable: boolean): void;
}

/**
 * Start a job through a spawner that passes no descriptors of its own choosing (node-pty, Node's
 * child_process): the plan's descriptors (its channel, bwrap's filter) lose close-on-exec for
 * the synchronous call that forks, and get it back at once. Nothing else can fork meanwhile: the
 * loop is busy with this call, so no other job inherits them.
 */
export function withInherited<T>(fds: readonly number[], start: () => T): T {
  if (fds.length === 0) return start();
  const addon = loadAddon<InheritAddon>(['setInheritable']);
  // The plan has descriptors only when the addon made them.
  if (addon instanceof Error) throw addon;
  for (const fd of fds) addon.setInheritable(fd, true);
  try {
    return start();
  } finally {
    for (const fd of fds) addon.setInheritable(fd, false);
  }
}
