import { readdirSync, readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { JobEnv } from '../../../src/runner/env.js';
import { abandon, launchPipes, startOnPipes, type StartedOnPipes } from '../../../src/runner/launch/pipes.js';
import type { LaunchHooks, LaunchSpec } from '../../../src/runner/launch/types.js';
import { waitFor } from '../../helpers/daemon.js';

/**
 * A job on pipes started before its session is made (runner/start.ts), through the real addon:
 * its exit reaches the session's hooks once they are wired, even when it came before; a job
 * whose session could not be made is killed with its group, never left running.
 */

function spec(script: string): LaunchSpec {
  return { plan: { file: '/bin/sh', args: ['-c', script], steps: undefined, wrapped: () => ({ file: '/bin/sh', args: ['-c', script] }), inherit: [] }, cwd: '/', env: JobEnv.of({ PATH: process.env.PATH }, undefined, {}), stdin: 'pipe' };
}

/** Hooks that record what a session would be told. */
function hooks() {
  const told = { out: '', exit: undefined as { code: number | null; signal: string | null } | undefined, closed: false, failed: undefined as string | undefined };
  const h: LaunchHooks = {
    sessionId: 'early',
    output: (_stream, chunk) => (told.out += chunk.toString()),
    unfinished: () => false,
    exit: (code, signal) => (told.exit = { code, signal }),
    closed: () => (told.closed = true),
    failed: (message) => (told.failed = message),
    inputClosed: () => undefined,
  };
  return { h, told };
}

const alive = (pid: number) => {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
};

describe('a job started before its session is made', () => {
  it('is told to its session once wired: output, exit and end, like a job launched with its session', async () => {
    const started = startOnPipes(spec('echo early; exit 4'))!;
    expect('child' in started).toBe(true);
    const { h, told } = hooks();
    const launched = launchPipes(spec('unused'), h, started);
    expect(launched.pid).toBe((started as Extract<StartedOnPipes, { child: unknown }>).child.pid);
    await waitFor(() => told.closed, { what: 'the end of the early job' });
    expect(told).toMatchObject({ out: 'early\n', exit: { code: 4, signal: null }, failed: undefined });
    launched.release();
  });

  it('keeps an exit that came before it was wired, and tells it then', async () => {
    const started = startOnPipes(spec('exit 7'))!;
    const pid = (started as Extract<StartedOnPipes, { child: unknown }>).child.pid;
    // Reaped by the daemon's reaper with no session yet to tell.
    await waitFor(() => !alive(pid), { what: 'the early job reaped' });
    const { h, told } = hooks();
    const launched = launchPipes(spec('unused'), h, started);
    await waitFor(() => told.closed, { what: 'the end of the early job' });
    expect(told.exit).toEqual({ code: 7, signal: null });
    launched.release();
  });

  it('says why it could not start, as a launch does', () => {
    const started = startOnPipes({ ...spec('true'), cwd: '/no/such/dir' })!;
    expect('error' in started).toBe(true);
    const { h, told } = hooks();
    const launched = launchPipes(spec('unused'), h, started);
    expect(launched.pid).toBeUndefined();
    expect(told.failed).toMatch(/^could not start \/bin\/sh: No such file or directory/);
  });

  it('is killed with its whole group when its session cannot be made', async () => {
    const started = startOnPipes(spec('sleep 600 & wait'))!;
    const { child } = started as Extract<StartedOnPipes, { child: unknown }>;
    // The background sleep is in the job's group (its session leader's): the kill reaches it too.
    // Live members of its process group (field 5 of /proc/PID/stat; a zombie counts as gone).
    const group = () =>
      readdirSync('/proc')
        .filter((d) => /^\d+$/.test(d))
        .filter((d) => {
          try {
            const after = readFileSync(`/proc/${d}/stat`, 'utf8').split(') ')[1].split(' ');
            return after[0] !== 'Z' && Number(after[2]) === child.pid;
          } catch {
            return false;
          }
        })
        .map(Number);
    await waitFor(() => group().length >= 2, { what: 'the job and its background sleep' });
    const pids = group();
    abandon(started);
    expect(pids.length).toBeGreaterThanOrEqual(2);
    await waitFor(() => group().length === 0, { what: 'the abandoned job and its child gone' });
  });
});
