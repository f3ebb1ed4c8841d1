import { existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { homedir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { alive, startDaemon, stopAllDaemons, waitFor } from '../helpers/daemon.js';
import { childrenOf, killLeftovers } from '../helpers/procs.js';
import { Scoped } from '../helpers/session.js';
import { cmdline, makeStateDir, readRecords, removeStateDirs } from '../helpers/state.js';
import { killMarked, SKIP_SANDBOX } from './sandbox-support.js';

/**
 * The exit status of a job a daemon adopted after a crash (docs/durability.md "Exit status"): the
 * new daemon is not its parent and cannot wait for it; whoever the kernel gave it to reaps it at
 * once (systemd does). Here that is a subreaper above the first daemon that reaps every orphan at
 * once, as systemd would: a sandboxed job's own code still reaches its session, from what bwrap
 * wrote (`--json-status-fd`).
 */

const base = mkdtempSync(join(existsSync('/var/tmp') ? '/var/tmp' : homedir(), 'procctl-crash-status-'));
const workspace = join(base, 'workspace');
const reaper = join(base, 'reaper.py');
const pids = new Set<number>();
const sessions = new Set<string>();

/** Runs its arguments as its child, marked as a subreaper, reaping every process given to it; goes when none is left. */
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

afterEach(async () => {
  await stopAllDaemons();
  killMarked(sessions);
  killLeftovers(pids);
});

afterAll(() => {
  removeStateDirs();
  rmSync(base, { recursive: true, force: true });
});

describe.skipIf(SKIP_SANDBOX)('the exit status of a job adopted after a crash', () => {
  it('a sandboxed job reaped by its new parent before the new daemon could see it ends with its own code', async () => {
    mkdirSync(workspace, { recursive: true });
    writeFileSync(reaper, REAPER);
    const state = makeStateDir();
    const env = { PROCCTL_STATE_DIR: state, PROCCTL_ON_CRASH: 'keep', PROCCTL_CRASH_GRACE_MS: '60000' };
    const config = { sandbox: { mode: 'workspace-write', workspaces: [base] } };
    const d1 = await startDaemon({ env, config, launcher: ['python3', reaper] });
    const daemon = await waitFor(() => childrenOf(d1.proc.pid!).find((p) => cmdline(p).includes('procctld')), { what: 'the daemon under the reaper' });
    const s1 = new Scoped(await d1.client(), 'status');
    const job = await s1.exec({ command: 'echo started; read -r x; exit 7', background: true, workdir: workspace });
    sessions.add(job.sessionId);
    pids.add(job.pid);
    await s1.waitOutput(job.sessionId, 'started');
    await waitFor(() => readRecords(state).get(job.sessionId)?.pidStartTime !== undefined, { what: 'the first record, after which the guardian holds the session' });

    process.kill(daemon!, 'SIGKILL');
    await waitFor(() => !alive(daemon!), { what: 'the daemon to be gone' });
    await waitFor(() => existsSync(join(state, 'guardian.sock')), { what: 'the guardian to wait for the next daemon' });
    expect(alive(job.pid)).toBe(true);

    const d2 = await startDaemon({ env, config });
    const s2 = new Scoped(await d2.client(), 'status');
    await s2.process({ action: 'write', sessionId: job.sessionId, data: 'go\n' });
    const { last } = await s2.pollUntilEnded(job.sessionId, 30_000);
    // Reaped by the subreaper at once: no zombie was there to read the status from.
    expect(alive(job.pid)).toBe(false);
    expect(last.exitCode).toBe(7);
  }, 120_000);
});
