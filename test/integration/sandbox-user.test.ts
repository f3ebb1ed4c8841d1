import { spawnSync } from 'node:child_process';
import { chmodSync, chownSync, existsSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import type { TestClient } from '../helpers/rpc.js';
import { startDaemon } from '../helpers/daemon.js';
import { waitGone } from '../helpers/procs.js';
import { Scoped, Scopes, sharedDaemon } from '../helpers/session.js';
import { killMarked, scratchRoot, SKIP_SANDBOX } from './sandbox-support.js';
import { cannotActAsAnotherUser } from '../helpers/caps.js';

// sandbox.user (SPEC §12): a daemon running as root runs non-elevated sessions as that user,
// sandboxed or not. Needs root with the capabilities to act as another user (CI runs as root;
// inside a sandbox root has none) and the user `nobody`.
const nobody = spawnSync('getent', ['passwd', 'nobody'], { encoding: 'utf8' }).stdout.trim().split(':');
const NOBODY = nobody.length >= 7 ? { uid: Number(nobody[2]), gid: Number(nobody[3]), home: nobody[5] } : undefined;
const CANNOT = cannotActAsAnotherUser() ?? (NOBODY ? undefined : 'there is no user "nobody"');
const SKIP = CANNOT !== undefined;
if (SKIP) process.stderr.write(`skipping the sandbox.user tests: ${CANNOT}\n`);

const fs = scratchRoot('procctl-sbxu-');
afterAll(() => fs.cleanup());
const ELEVATED = 'user-elevated';
const PROCESSES = 20;

/** A directory the user owns (the test root itself is the test's: passable by anyone). */
function userDir(name: string): string {
  const dir = fs.dir(name);
  chmodSync(fs.root, 0o755);
  chownSync(dir, NOBODY!.uid, NOBODY!.gid);
  return dir;
}

function suite(name: string, sandbox: object) {
  describe.skipIf(SKIP || ('mode' in sandbox && SKIP_SANDBOX))(name, () => {
    let c: TestClient;
    let scopes: Scopes;
    const ids: string[] = [];
    sharedDaemon(
      { env: { PROCCTL_KILL_GRACE_MS: '1000' }, config: { sandbox: { user: 'nobody', ...sandbox }, scopes: { [ELEVATED]: { elevated: 'allow' } } } },
      (x) => ({ c, scopes } = x),
    );
    afterAll(() => killMarked(ids));
    const run = async (command: string, extra: Record<string, unknown> = {}, s: Scoped = scopes.next('user')) => {
      const r = await s.exec({ command, yieldMs: 30_000, stdin: 'null', ...extra });
      scopes.track(r.pid);
      ids.push(r.sessionId);
      return r;
    };

    it('runs as the user and its groups, with its HOME; no capability, no_new_privs', async () => {
      const r = await run('id -u; id -g; echo "$HOME $USER"; grep -E "^(CapEff|CapPrm|CapInh|NoNewPrivs)" /proc/self/status', { workdir: userDir(`${name}-id`) });
      const lines = r.output.split('\n');
      expect(lines.slice(0, 3)).toEqual([String(NOBODY!.uid), String(NOBODY!.gid), `${NOBODY!.home} nobody`]);
      for (const cap of ['CapEff', 'CapPrm', 'CapInh']) expect(r.output).toContain(`${cap}:\t0000000000000000`);
    });

    it('on a terminal too', async () => {
      const r = await run('id -u', { pty: true, workdir: userDir(`${name}-pty`) });
      expect(r.output.trim()).toBe(String(NOBODY!.uid));
    });

    it('what it writes in its workdir is the user\'s', async () => {
      const work = userDir(`${name}-write`);
      const r = await run('echo hi > made-by-job', { workdir: work });
      expect(r.status, r.text).toBe('completed');
      expect(statSync(join(work, 'made-by-job')).uid).toBe(NOBODY!.uid);
    });

    it('a workdir the user cannot enter: the exec fails saying so, and nothing runs', async () => {
      const closed = fs.dir(`${name}-closed`);
      chmodSync(closed, 0o700);
      const r = await run('touch ran', { workdir: closed });
      expect(r).toMatchObject({ status: 'failed', reason: 'spawn_error' });
      expect(r.text).toContain(`not accessible to sandbox.user "nobody" (uid ${NOBODY!.uid})`);
      expect(existsSync(join(closed, 'ran'))).toBe(false);
    });

    it('its scratch dir is its own, and it reads its stop file on kill', async () => {
      const s = scopes.next('stop');
      const r = await run(`touch "$PROCCTL_TMPDIR/x" && echo scratch-ok; trap 'cat "$PROCCTL_STOP_FILE"; exit 0' TERM; echo ready; sleep 600 & wait`, { background: true, workdir: userDir(`${name}-stop`) }, s);
      await s.waitOutput(r.sessionId, 'ready');
      const k = await s.process({ action: 'kill', sessionId: r.sessionId, graceMs: 10_000, reason: 'user stop' });
      expect(k).toMatchObject({ status: 'failed', reason: 'user', exitCode: 0 });
      const out = (await s.log(r.sessionId, { offset: 0 })).output;
      expect(out).toContain('scratch-ok');
      expect(out).toContain('"reason":"user stop"');
    });

    it('limits.processes binds: past it, fork fails', async () => {
      // A daemon of its own: the sleeps this leaves outlive their shell, and until whoever
      // adopts them reaps them they count against the user's processes. The shared daemon sets
      // no limit, so they cannot fail a later test's fork.
      const own = await startDaemon({ config: { sandbox: { user: 'nobody', ...sandbox }, limits: { processes: PROCESSES } } });
      const client = await own.client();
      const s = new Scoped(client, 'nproc');
      let id: string | undefined;
      try {
        const r = await s.exec({ command: `sh -c 'i=0; while [ $i -lt ${PROCESSES * 2} ]; do sleep 2 & i=$((i+1)); done; echo all-started' 2>&1`, yieldMs: 30_000, stdin: 'null', workdir: userDir(`${name}-nproc`) });
        id = r.sessionId;
        expect(r.output).toMatch(/Cannot fork|Resource temporarily unavailable/);
        expect(r.output).not.toContain('all-started');
      } finally {
        client.close();
        await own.stop();
        if (id) expect(await waitGone(killMarked([id]), 20_000)).toEqual([]);
      }
    });

    it('elevated:true runs as the daemon, root', async () => {
      const r = await run('id -u', { elevated: true }, new Scoped(c, ELEVATED));
      expect(r.output).toBe('0\n');
    });

    it('a stop file the job replaced with a symlink is never followed', async () => {
      const victim = join(fs.root, `${name}-victim`.replace(/\W+/g, '-'));
      writeFileSync(victim, 'untouched\n');
      const s = scopes.next('symlink');
      const r = await run(`ln -s ${victim} "$PROCCTL_STOP_FILE"; trap 'cat "$PROCCTL_STOP_FILE"; exit 0' TERM; echo ready; sleep 600 & wait`, { background: true, workdir: userDir(`${name}-symlink`) }, s);
      await s.waitOutput(r.sessionId, 'ready');
      await s.process({ action: 'kill', sessionId: r.sessionId, graceMs: 10_000 });
      expect(readFileSync(victim, 'utf8')).toBe('untouched\n');
      expect((await s.log(r.sessionId, { offset: 0 })).output).toContain('"by":"user"');
    });

    it('a FIFO the job left at the stop file\'s name does not hold up the stop', async () => {
      const s = scopes.next('fifo');
      const r = await run(`mkfifo "$PROCCTL_STOP_FILE"; trap 'cat "$PROCCTL_STOP_FILE"; exit 0' TERM; echo ready; sleep 600 & wait`, { background: true, workdir: userDir(`${name}-fifo`) }, s);
      await s.waitOutput(r.sessionId, 'ready');
      const k = await s.process({ action: 'kill', sessionId: r.sessionId, graceMs: 10_000 });
      expect(k).toMatchObject({ status: 'failed', reason: 'user' });
      expect((await s.log(r.sessionId, { offset: 0 })).output).toContain('"by":"user"');
    });
  });
}

suite('sandbox.user without a sandbox', {});
suite('sandbox.user in the sandbox', { mode: 'workspace-write', workspaces: [fs.root] });

