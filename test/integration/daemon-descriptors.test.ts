import { closeSync, existsSync, mkdirSync, mkdtempSync, openSync, readdirSync, readFileSync, readlinkSync, renameSync, rmSync, unlinkSync, writeFileSync } from 'node:fs';
import { homedir } from 'node:os';
import { join } from 'node:path';
import type { Readable } from 'node:stream';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { startDaemon, stopAllDaemons, waitFor, type TestDaemon } from '../helpers/daemon.js';
import { Scoped } from '../helpers/session.js';
import { killMarked, SKIP_SANDBOX } from './sandbox-support.js';

/**
 * What the daemon got from whoever started it (SPEC §12): the file its stdout goes to is hidden
 * from a sandboxed job like its other controls, and no descriptor it inherited reaches a job.
 * Everything lives outside /tmp, which the sandbox replaces with its own and so hides anyway.
 */
const base = mkdtempSync(join(existsSync('/var/tmp') ? '/var/tmp' : homedir(), 'procctl-descriptors-'));
const workspace = join(base, 'workspace');
mkdirSync(workspace);
const sessions = new Set<string>();

afterEach(stopAllDaemons);
afterAll(() => {
  killMarked(sessions);
  rmSync(base, { recursive: true, force: true });
});

const config = {
  sandbox: { mode: 'workspace-write', workspaces: [workspace], tmpBytes: 1024 * 1024 },
  scopes: { fds: { elevated: 'allow' } },
};

async function run(s: Scoped, command: string, extra: Record<string, unknown> = {}): Promise<any> {
  const r = await s.exec({ command, yieldMs: 60_000, stdin: 'null', workdir: workspace, ...extra });
  sessions.add(r.sessionId);
  expect(r.status, r.output).toBe('completed');
  return r;
}

/** Ask the daemon to write a line to its log (a reload says so at info) and wait until it is in `file`. */
async function logsTo(d: TestDaemon, file: string, count: number): Promise<void> {
  d.proc.kill('SIGHUP');
  const lines = () => (existsSync(file) ? readFileSync(file, 'utf8').split('\n').filter((l) => l.includes('config reloaded')).length : 0);
  await waitFor(() => lines() >= count || undefined, { what: `the daemon's reload line #${count} in ${file}` });
}

describe.skipIf(SKIP_SANDBOX)("the file behind the daemon's stdout", () => {
  it('is hidden from a sandboxed job, also once renamed, and hiding survives its deletion; the daemon writes on, and the files beside it and an elevated job are as before', async () => {
    const logs = join(base, 'logs');
    mkdirSync(logs);
    const log = join(logs, 'daemon.log');
    const beside = join(logs, 'notes.txt');
    writeFileSync(beside, 'a note beside the log\n');
    const d = await startDaemon({ base, logFile: log, config, env: { PROCCTL_LOG_LEVEL: 'info' } });
    const s = new Scoped(await d.client(), 'fds');
    await waitFor(() => d.stdout().includes('procctld listening') || undefined, { what: 'the start line in the log file' });

    // Hidden as the other controls are: nothing can be read from it (an empty file, or none at all).
    const inside = await run(s, `cat ${log} 2>/dev/null | wc -c; cat ${beside}`);
    expect(inside.output).toBe('0\na note beside the log\n');
    // The daemon still writes to it, and a job on the host (elevated: no sandbox) reads it.
    await logsTo(d, log, 1);
    expect((await run(s, `cat ${log}`, { elevated: true })).output).toContain('config reloaded');

    // Renamed (logrotate's copy-less rotation): hidden under its new name.
    const rotated = join(logs, 'daemon.log.1');
    renameSync(log, rotated);
    await logsTo(d, rotated, 2);
    expect((await run(s, `cat ${rotated} 2>/dev/null | wc -c`)).output).toBe('0\n');

    // Deleted: no path leads to it, and a sandboxed job still starts.
    unlinkSync(rotated);
    expect((await run(s, 'echo still starts')).output).toContain('still starts');
  });
});

describe("the daemon's inherited descriptors", () => {
  it('are closed at start: the daemon lets them go, and no job sees them, sandboxed or not', async () => {
    const marker = join(base, 'inherited-marker');
    const markerFd = openSync(marker, 'w');
    // fd 3 and 4 inside Node's own sweep (it marks them close-on-exec), 35 and 36 past it.
    const gap = Array.from({ length: 30 }, () => 'ignore' as const);
    let d: TestDaemon;
    try {
      d = await startDaemon({ base, config, extraFds: [markerFd, 'pipe', ...gap, markerFd, 'pipe'] });
    } finally {
      closeSync(markerFd);
    }
    const pid = d.proc.pid!;
    // The pipes left open by whoever started it reach their end of file: the daemon closed its ends.
    for (const fd of [4, 36]) {
      const end = d.proc.stdio[fd] as Readable;
      await waitFor(() => end.readableEnded || end.destroyed || (end.resume(), undefined), { what: `the daemon to close its inherited fd ${fd}` });
    }
    const held = readdirSync(`/proc/${pid}/fd`).map((n) => {
      try {
        return readlinkSync(`/proc/${pid}/fd/${n}`);
      } catch {
        return '';
      }
    });
    expect(held).not.toContain(marker);

    const s = new Scoped(await d.client(), 'fds');
    const list = 'echo "channel=${PROCCTL_SOCKET:-}"; ls -l /proc/self/fd/';
    for (const [how, extra] of [
      ['unsandboxed', { elevated: true }],
      ['sandboxed', {}],
    ] as const) {
      if (how === 'sandboxed' && SKIP_SANDBOX) continue;
      const { output } = await run(s, list, extra);
      expect(output, how).not.toContain(marker);
      const channel = /channel=fd:(\d+)/.exec(output)?.[1];
      // Beyond stdin, stdout and stderr: only ls's own listing of the directory, and the session's channel.
      const others = [...output.matchAll(/ (\d+) -> (.*)$/gm)].filter(([, fd, target]) => Number(fd) > 2 && fd !== channel && !/^\/proc\/\d+\/fd$/.test(target));
      expect(others.map(([line]) => line), `${how}:\n${output}`).toEqual([]);
    }
  });
});
