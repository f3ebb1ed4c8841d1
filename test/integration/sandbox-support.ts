import { execFileSync, spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import type { AddressInfo, Server as NetServer } from 'node:net';
import { homedir, tmpdir } from 'node:os';
import { join } from 'node:path';
import { filterProblem } from '../../src/sandbox/seccomp.js';
import { markedProcesses } from '../helpers/state.js';
import { killLeftovers } from '../helpers/procs.js';
import type { TestDaemon } from '../helpers/daemon.js';
import type { Scoped } from '../helpers/session.js';

/**
 * Whether bubblewrap can make a sandbox here, and if not why: the sandbox tests need it (CI
 * installs it from .ci/run) and say so when they skip.
 */
export function bwrapHere(): { ok: true } | { ok: false; why: string } {
  const run = spawnSync('bwrap', ['--ro-bind', '/', '/', '--dev', '/dev', '--proc', '/proc', '--unshare-pid', '--unshare-net', 'true'], { encoding: 'utf8', timeout: 10_000 });
  if (run.error) return { ok: false, why: `bwrap is not installed (${run.error.message}); apt-get install -y bubblewrap` };
  if (run.status !== 0) return { ok: false, why: `bwrap cannot make a sandbox here: ${run.stderr.trim()}` };
  const filter = filterProblem();
  if (filter) return { ok: false, why: `the sandbox's seccomp filter cannot be made here: ${filter}` };
  return { ok: true };
}

const here = bwrapHere();
export const SKIP_SANDBOX = !here.ok;
if (!here.ok) process.stderr.write(`skipping sandbox tests: ${here.why}\n`);

/** Why curl cannot drive the network tests here (undefined when it can): they say so and skip (.ci/run installs it). */
export const NO_CURL = (() => {
  const run = spawnSync('curl', ['--version'], { stdio: 'ignore' });
  return run.error || run.status !== 0 ? 'curl is not installed (Debian: apt-get install -y curl)' : undefined;
})();

/**
 * A directory for one test file's workspaces outside the private /tmp a sandbox mounts over
 * (/var/tmp, else the home directory), so a job inside sees what the test put there.
 */
export function hostScratch(prefix: string): string {
  return mkdtempSync(join(existsSync('/var/tmp') ? '/var/tmp' : homedir(), prefix));
}

/** A fresh directory for one test file (outside any daemon's), removed by `cleanup`. */
export function scratchRoot(prefix: string): { root: string; dir: (name: string) => string; cleanup: () => void } {
  const root = mkdtempSync(join(tmpdir(), prefix));
  return {
    root,
    dir: (name) => {
      const d = join(root, name);
      mkdirSync(d, { recursive: true });
      return d;
    },
    cleanup: () => rmSync(root, { recursive: true, force: true }),
  };
}

/** Kill (by pid) anything still carrying these sessions' marker; return what was found. */
export function killMarked(ids: Iterable<string>): number[] {
  const pids = markedProcesses(ids).map((m) => m.pid);
  killLeftovers(pids);
  return pids;
}

/**
 * What a network test file holds for its whole run: a workspace outside the sandbox's private
 * /tmp, the local servers it listens on, and the sessions it ran. `close` takes all of it down:
 * the servers, anything still carrying a session's marker, and the workspace.
 */
export class NetFixture {
  readonly base: string;
  readonly sessions = new Set<string>();
  private readonly servers: NetServer[] = [];

  constructor(prefix: string) {
    this.base = hostScratch(prefix);
  }

  /** Listen on a free port of `host` (kept to be closed); resolves to the port. */
  async listen(server: NetServer, host: string): Promise<number> {
    this.servers.push(server);
    await new Promise<void>((r) => server.listen(0, host, r));
    return (server.address() as AddressInfo).port;
  }

  /** Run a command to its end (a minute at most) in the workspace, no stdin; its session is remembered. */
  async run(scoped: Scoped, command: string): Promise<any> {
    const r = await scoped.exec({ command, yieldMs: 60_000, stdin: 'null', workdir: this.base });
    this.sessions.add(r.sessionId);
    return r;
  }

  /** Stop the daemon if one is given, kill what any session left, close the servers, remove the workspace. */
  async close(daemon?: TestDaemon): Promise<void> {
    await daemon?.stop();
    killMarked(this.sessions);
    for (const server of this.servers) server.close();
    rmSync(this.base, { recursive: true, force: true });
  }
}

/**
 * A git repository of one commit with one file, cloned bare into `served` and readied for git's
 * dumb HTTP protocol (static files), so any file server can serve it to `git clone`.
 */
export function servedRepo(work: string, served: string, file: string, text: string): void {
  mkdirSync(work, { recursive: true });
  const env = { ...process.env, GIT_AUTHOR_NAME: 't', GIT_AUTHOR_EMAIL: 't@e', GIT_COMMITTER_NAME: 't', GIT_COMMITTER_EMAIL: 't@e' };
  const git = (...args: string[]) => execFileSync('git', args, { cwd: work, env });
  git('init', '-q', '-b', 'main');
  writeFileSync(join(work, file), text);
  git('add', file);
  git('commit', '-q', '-m', 'one');
  execFileSync('git', ['clone', '-q', '--bare', work, served]);
  execFileSync('git', ['update-server-info'], { cwd: served });
}
