import type { LaunchPlan } from '../sandbox/plan.js';

/**
 * The wrapper step for spawners that fork by themselves (node-pty, the fork fallback): a shell
 * writes itself into each cgroup.procs file named before `--`, then execs what follows, so the
 * job's first process is in the session's cgroup before anything of the job runs. Exit 125
 * (with the shell's own message on stderr) when a write is refused.
 */
const JOIN = 'while [ $# -gt 0 ] && [ "$1" != -- ]; do echo 0 > "$1" || exit 125; shift; done; shift; exec "$@"';

/**
 * A launch plan whose first process joins the session's cgroup before it runs anything: a step
 * of the project's spawner (native/spawn.c writes "0" to each file between vfork and exec), or
 * for the spawners that cannot take steps, the wrapper above at the head of the chain (before
 * prlimit, setpriv and bwrap, so all of them run inside).
 */
export function joinCgroup(plan: LaunchPlan, files: readonly string[]): LaunchPlan {
  if (files.length === 0) return plan;
  return {
    ...plan,
    steps: { ...plan.steps, cgroups: [...files] },
    wrapped: () => {
      const inner = plan.wrapped();
      return { file: '/bin/sh', args: ['-c', JOIN, 'procctl-cgroup', ...files, '--', inner.file, ...inner.args] };
    },
  };
}
