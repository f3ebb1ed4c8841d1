import { existsSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { alive, waitFor } from './daemon.js';
import { makeStateDir, readRecords } from './state.js';

/**
 * What the tests of a crash that keeps the sessions (SPEC §19, durability.onCrash "keep") each
 * do: a state directory for the daemons, the guardian holding a session, the crash itself.
 */

/** A state directory of its own, and the env of daemons on it that keep their sessions through a crash, the guardian waiting `graceMs` for the next. */
export function keepingState(graceMs = 60_000): { state: string; env: Record<string, string> } {
  const state = makeStateDir();
  return { state, env: { PROCCTL_STATE_DIR: state, PROCCTL_ON_CRASH: 'keep', PROCCTL_CRASH_GRACE_MS: String(graceMs) } };
}

/** The session's first record is written, with its leader's start time: the guardian holds its descriptors from then on. */
export async function keptByGuardian(state: string, id: string): Promise<void> {
  await waitFor(() => readRecords(state).get(id)?.pidStartTime !== undefined, { what: `the first record of ${id}, after which the guardian holds the session` });
}

/** The guardian of the daemon that died on `state` waits for the next daemon. */
export async function guardianWaits(state: string): Promise<void> {
  await waitFor(() => existsSync(join(state, 'guardian.sock')), { what: 'the guardian to wait for the next daemon' });
}

/** SIGKILL the daemon `pid` and wait until it is gone; given its state directory, also until its guardian waits for the next daemon. */
export async function crashDaemon(pid: number, state?: string): Promise<void> {
  process.kill(pid, 'SIGKILL');
  await waitFor(() => !alive(pid), { what: `daemon ${pid} to be gone` });
  if (state !== undefined) await guardianWaits(state);
}

/**
 * Writes to `path` a script that runs its arguments as its child, marked as a subreaper, reaping
 * every process given to it (as systemd does), and goes when none is left: a daemon started under
 * it (`launcher: ['python3', path]`) leaves its orphans to be reaped at once, as on a real host.
 */
export function writeReaper(path: string): string {
  writeFileSync(path, REAPER);
  return path;
}

const REAPER = `
import ctypes, os, signal, sys
ctypes.CDLL(None, use_errno=True).prctl(36, 1, 0, 0, 0)  # PR_SET_CHILD_SUBREAPER
child = os.fork()
if child == 0:
    os.execvp(sys.argv[1], sys.argv[1:])
def forward(sig, _):
    try:
        os.kill(child, sig)
    except ProcessLookupError:
        sys.exit(0)
signal.signal(signal.SIGTERM, forward)
signal.signal(signal.SIGINT, forward)
while True:
    try:
        os.wait()
    except ChildProcessError:
        break
    except InterruptedError:
        pass
`;
