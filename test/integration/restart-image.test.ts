import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { PROCCTLD, startDaemon, stopAllDaemons, waitFor, type TestDaemon } from '../helpers/daemon.js';
import { packageCopy, removePackageCopies } from '../helpers/package-copy.js';
import { restartAndWait } from '../helpers/restart.js';
import { killLeftovers } from '../helpers/procs.js';
import { Scoped } from '../helpers/session.js';
import { DAEMON_NODE_FLAGS } from '../../src/base/node-flags.js';

/**
 * The new image's start (issue 35 point 6, docs/durability.md "The daemon's image, bundled"): a
 * planned restart is only as quick as the image it starts, and that image is quick only from the
 * one-file bundle with its code cache, with Node's HTTP, HTTP/2 and TLS left until a request needs
 * them. Each of these fails if the start leaves that path without a word: the daemon logs which
 * image it runs when it listens and with a restart's timeline.
 */

const pids = new Set<number>();
const dirs: string[] = [];

afterEach(async () => {
  await stopAllDaemons();
  killLeftovers(pids);
});

afterAll(() => {
  removePackageCopies();
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

/** The daemon's log lines (JSON) whose message is `msg`. */
const logged = (d: TestDaemon, msg: string): any[] =>
  (d.stdout() + d.stderr())
    .split('\n')
    .filter((l) => l.includes(`"msg":${JSON.stringify(msg)}`))
    .map((l) => JSON.parse(l));

describe('the new image of a planned restart starts on the fast path (SPEC §19)', () => {
  it('the daemon and the image a restart starts each run the bundle with its code cache, and say so', async () => {
    const d = await startDaemon({ env: { PROCCTL_LOG_LEVEL: 'info' } });
    const s = new Scoped(await d.client(), 'image');
    const job = await s.exec({ command: 'sleep 300', background: true });
    pids.add(job.pid);
    await waitFor(() => logged(d, 'procctld listening').length === 1, { what: 'the listening line' });
    expect(logged(d, 'procctld listening')[0].image).toEqual({ image: 'bundle', codeCache: 'used' });
    await restartAndWait(d, 0);
    const served = await waitFor(() => logged(d, 'restart: serving again')[0], { what: "the restart's timeline" });
    expect(served.image).toEqual({ image: 'bundle', codeCache: 'used' });
    expect(served.rssMB).toBeGreaterThan(0);
    expect((await new Scoped(await d.client(), 'image').list()).find((x: any) => x.sessionId === job.sessionId).status).toBe('running');
  });

  it('an image whose compiled module changed since the bundle was made runs the compiled sources, and its log says why', async () => {
    const pkg = packageCopy();
    const d = await startDaemon({ procctld: join(pkg, 'bin', 'procctld'), env: { PROCCTL_LOG_LEVEL: 'info' } });
    const job = await new Scoped(await d.client(), 'image').exec({ command: 'sleep 300', background: true });
    pids.add(job.pid);
    const state = join(pkg, 'dist', 'src', 'daemon', 'state.js');
    writeFileSync(state, `${readFileSync(state, 'utf8')}\n// changed\n`);
    await restartAndWait(d, 0);
    const served = await waitFor(() => logged(d, 'restart: serving again')[0], { what: "the restart's timeline" });
    expect(served.image.image).toBe('sources');
    expect(served.image.why).toMatch(/state\.js changed since the bundle was made/);
  });
});

describe('what the bundle leaves until a request needs it', () => {
  it("loading every module of the daemon (`procctld --version`) loads none of Node's HTTP, HTTPS, HTTP/2, TLS or DNS promises", () => {
    const dir = mkdtempSync(join(tmpdir(), 'procctl-image-'));
    dirs.push(dir);
    const preload = join(dir, 'loaded.cjs');
    writeFileSync(preload, "process.on('exit', () => require('fs').writeSync(2, 'LOADED ' + JSON.stringify(process.moduleLoadList) + '\\n'));\n");
    const r = spawnSync(process.execPath, [...DAEMON_NODE_FLAGS, '--require', preload, PROCCTLD, '--version'], { encoding: 'utf8', env: { ...process.env, PROCCTL_DAEMON_REPORT: '1' } });
    expect(r.status).toBe(0);
    expect(r.stderr).toMatch(/running the bundle .*procctld\.cjs with its code cache/);
    const loaded: string[] = JSON.parse(/LOADED (.*)/.exec(r.stderr)![1]);
    // The list is not empty of what it should hold: the daemon's own needs are there.
    expect(loaded).toContain('NativeModule net');
    expect(loaded.filter((m) => /^NativeModule (http|https|http2|tls|_tls_wrap|_http_server|dns\/promises)$/.test(m))).toEqual([]);
  });
});

describe("procctld's options: read by node's parser when plain, by commander otherwise", () => {
  const run = (...args: string[]) => spawnSync(process.execPath, [...DAEMON_NODE_FLAGS, PROCCTLD, ...args], { encoding: 'utf8', timeout: 60_000 });

  it('what commander answered, it still answers: help, version, an unknown option, a missing value, an argument', () => {
    const version = JSON.parse(readFileSync(join(PROCCTLD, '..', '..', 'package.json'), 'utf8')).version;
    expect(run('--version').stdout.trim()).toBe(version);
    const help = run('--help');
    expect(help.status).toBe(0);
    expect(help.stdout).toContain('--log-level <level>');
    for (const [args, says] of [
      [['--bogus'], "unknown option '--bogus'"],
      [['--socket'], "option '--socket <path>' argument missing"],
      [['extra'], 'too many arguments'],
    ] as const) {
      const r = run(...args);
      expect(r.status, args.join(' ')).toBe(2);
      expect(r.stderr, args.join(' ')).toContain(says);
    }
  });

  it('plain options are read, and a level that is none is refused by name', () => {
    const r = run('--socket', join(tmpdir(), 'procctl-never.sock'), '--log-level', 'nope');
    expect(r.status).toBe(2);
    expect(r.stderr).toContain('--log-level "nope" is not a level');
  });
});
