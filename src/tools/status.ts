import { daemonInheritance } from '../policy/env.js';
import { spawnFallbackReason, spawnMethod } from '../runner/native.js';
import { sandboxStatus } from '../sandbox/host.js';
import { cgroupStatus } from '../cgroup/host.js';
import type { Daemon } from './context.js';

/** `daemon.status` (SPEC §4): what the daemon is, what it holds, and how it runs jobs here. */
export async function daemonStatus(d: Daemon, startedAt: number, version: string) {
  return {
    version,
    pid: process.pid,
    uptimeMs: Date.now() - startedAt,
    socket: d.socketPath,
    sessions: d.registry.counts(),
    closing: d.closing,
    node: process.version,
    spawner: spawnMethod(),
    state: { dir: d.state.dir, ...d.state.status() },
    env: { withheld: daemonInheritance(d.config().env).withheld },
    spawnerReason: spawnFallbackReason(),
    config: d.configStatus(),
    sandbox: await sandboxStatus(d.config()),
    cgroups: cgroupStatus(d.cgroups),
  };
}
