import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll } from 'vitest';
import { PROCCTL, ROOT, startDaemon, stopAllDaemons, waitFor, type StartOptions, type TestDaemon } from '../helpers/daemon.js';
import type { TestClient } from '../helpers/rpc.js';

export interface CliResult {
  code: number | null;
  stdout: string;
  stderr: string;
}

/** A running `procctl` child, for commands that stream (events -f, log -f). */
export interface CliChild {
  proc: ChildProcess;
  stdout: () => string;
  stderr: () => string;
  exited: Promise<CliResult>;
}

const children = new Set<ChildProcess>();

if (!existsSync(join(ROOT, 'dist', 'src', 'cli', 'main.js'))) {
  throw new Error('dist/ is missing: build with `npx tsc -p .` before running the CLI tests');
}

/** Start `node bin/procctl ARGS` without the caller's PROCCTL_SOCKET/SCOPE/TOKEN/SESSION_ID, plus `env`. */
export function spawnCli(args: string[], opts: { input?: string; env?: Record<string, string>; cwd?: string } = {}): CliChild {
  const env: NodeJS.ProcessEnv = { ...process.env };
  for (const name of ['PROCCTL_SOCKET', 'PROCCTL_SCOPE', 'PROCCTL_TOKEN', 'PROCCTL_SESSION_ID', 'PROCCTL_HOST', 'PROCCTL_SSH_COMMAND']) delete env[name];
  Object.assign(env, opts.env);
  const proc = spawn(process.execPath, [PROCCTL, ...args], { env, cwd: opts.cwd, stdio: ['pipe', 'pipe', 'pipe'] });
  children.add(proc);
  let out = '';
  let err = '';
  proc.stdout!.setEncoding('utf8').on('data', (d: string) => (out += d));
  proc.stderr!.setEncoding('utf8').on('data', (d: string) => (err += d));
  if (opts.input !== undefined) proc.stdin!.end(opts.input);
  else proc.stdin!.end();
  const exited = new Promise<CliResult>((resolve) =>
    proc.on('close', (code) => {
      children.delete(proc);
      resolve({ code, stdout: out, stderr: err });
    }),
  );
  return { proc, stdout: () => out, stderr: () => err, exited };
}

/** Run `procctl ARGS` to completion. */
export function cli(args: string[], opts: { input?: string; env?: Record<string, string>; cwd?: string } = {}): Promise<CliResult> {
  return spawnCli(args, opts).exited;
}

/** Run against a daemon's socket. */
/**
 * `procctl ARGS` against the daemon at `socket`, named by $PROCCTL_SOCKET as a person's shell
 * would have it: the hints printed then name no socket (test/cli/hints.test.ts runs them with
 * `--socket` and `--host`, where every hint must carry it).
 */
export function cliOn(socket: string): (args: string[], opts?: { input?: string }) => Promise<CliResult> {
  return (args, opts) => cli(args, { ...opts, env: { PROCCTL_SOCKET: socket } });
}

/** Wait until a streaming child has printed something matching. */
export function waitForOutput(child: CliChild, pattern: RegExp | string, what = String(pattern)): Promise<unknown> {
  const test = (s: string) => (typeof pattern === 'string' ? s.includes(pattern) : pattern.test(s));
  return waitFor(() => test(child.stdout()), { what: `procctl to print ${what}` });
}

/** Kill every CLI child still running, by pid. */
export function killChildren(): void {
  for (const c of children) {
    if (c.pid !== undefined && c.exitCode === null && c.signalCode === null) process.kill(c.pid, 'SIGKILL');
  }
  children.clear();
}

export interface CliDaemon {
  d: TestDaemon;
  /** Runs `procctl ARGS...` with $PROCCTL_SOCKET naming the daemon's socket. */
  run: ReturnType<typeof cliOn>;
  /** A direct client for setting up and waiting, so only the command under test pays a CLI start. */
  c: TestClient;
}

/** One daemon for a CLI test file; every CLI child is killed after each test. */
export function cliDaemon(use: (x: CliDaemon) => void, opts: StartOptions = {}): void {
  let shared: CliDaemon | undefined;
  beforeAll(async () => {
    const d = await startDaemon(opts);
    shared = { d, run: cliOn(d.socket), c: await d.client() };
    use(shared);
  });
  afterEach(killChildren);
  afterAll(async () => {
    shared?.c.close();
    await stopAllDaemons();
  });
}
