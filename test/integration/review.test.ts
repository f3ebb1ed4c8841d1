import { execFileSync, spawnSync } from 'node:child_process';
import { existsSync, lstatSync, mkdirSync, readdirSync, readFileSync, readlinkSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startDaemon, type TestDaemon } from '../helpers/daemon.js';
import { Scoped } from '../helpers/session.js';
import { killMarked, scratchRoot, SKIP_SANDBOX } from './sandbox-support.js';
import { cli } from '../cli/run.js';
import { cannotActAsAnotherUser } from '../helpers/caps.js';
import { checkoutFor, removeCheckouts } from '../helpers/readable.js';
import { TestClient } from '../helpers/rpc.js';
import { waitFor } from '../helpers/daemon.js';

/**
 * Review and undo (SPEC §16), tried as a user would, with a real sandbox and real overlay mounts:
 * a command's writes are held until applied, the workspace is untouched meanwhile, apply and
 * undo are exact, and what a hostile job plants in its changes is never followed on apply.
 */

const fs = scratchRoot('procctl-review-');
const ws = fs.dir('ws');
const ids = new Set<string>();
let d: TestDaemon;
let s: Scoped;
const state = join(fs.root, 'state');

const config = { sandbox: { mode: 'workspace-write', workspaces: [ws] }, scopes: { host: { elevated: 'allow' }, held: { changes: 'review' } } };

async function review(command: string, cwd = ws): Promise<any> {
  const r = await s.exec({ command, workdir: cwd, changes: 'review', yieldMs: 60_000 });
  ids.add(r.sessionId);
  return r;
}

beforeAll(async () => {
  if (SKIP_SANDBOX) return;
  d = await startDaemon({ config, env: { PROCCTL_STATE_DIR: state } });
  s = new Scoped(await d.client(), 'review');
});

afterAll(async () => {
  await d?.stop();
  killMarked(ids);
  fs.cleanup();
  removeCheckouts();
});

/** Why a daemon cannot run as uid 65534 here, or undefined. */
const AS_NOBODY = cannotActAsAnotherUser();

describe.skipIf(SKIP_SANDBOX)('review mode', () => {
  it('a chmod of the workspace root itself is shown and said, and apply leaves the root as it is', async () => {
    const mode = statSync(ws).mode & 0o7777;
    expect(mode).not.toBe(0o750);
    const r = await review('chmod 750 . && echo x > root-mode.txt');
    expect(r.status, r.text).toBe('completed');
    const c = await s.process({ action: 'changes', sessionId: r.sessionId, stat: true });
    expect(c.root).toEqual({ mode: 0o750, oldMode: mode });
    expect(c.text).toContain(`from 0${mode.toString(8)} to 0750`);
    const a = await s.process({ action: 'apply', sessionId: r.sessionId });
    expect(a.root).toEqual({ mode: 0o750, oldMode: mode });
    expect(a.text).toContain('apply does not carry that');
    expect(statSync(ws).mode & 0o7777).toBe(mode);
    expect(readFileSync(join(ws, 'root-mode.txt'), 'utf8')).toBe('x\n');
    // A session that leaves the root alone says nothing of it.
    const other = await review('echo y > root-mode-2.txt');
    expect((await s.process({ action: 'changes', sessionId: other.sessionId, stat: true })).root).toBeUndefined();
    await s.process({ action: 'discard', sessionId: other.sessionId });
  });

  it('holds what a command writes: the workspace is untouched until apply, exact after it, and back after undo', async () => {
    const dir = join(ws, 'basic');
    mkdirSync(dir);
    writeFileSync(join(dir, 'keep.txt'), 'original\n');
    writeFileSync(join(dir, 'gone.txt'), 'to delete\n');
    const r = await review('echo changed > keep.txt && echo new > added.txt && rm gone.txt && mkdir sub && echo deep > sub/f && cat keep.txt', dir);
    expect(r.status, r.text).toBe('completed');
    // The job saw its own writes; nobody else does.
    expect(r.output).toBe('changed\n');
    expect(readFileSync(join(dir, 'keep.txt'), 'utf8')).toBe('original\n');
    expect(existsSync(join(dir, 'added.txt'))).toBe(false);
    expect(existsSync(join(dir, 'gone.txt'))).toBe(true);
    expect(r.changes).toMatchObject({ state: 'pending', pending: true, files: 5 });

    const c = await s.process({ action: 'changes', sessionId: r.sessionId });
    expect(c.totals).toMatchObject({ files: 5, added: 3, modified: 1, deleted: 1 });
    expect(c.files.map((f: any) => `${f.kind} ${f.path}`).sort()).toEqual(['added basic/added.txt', 'added basic/sub', 'added basic/sub/f', 'deleted basic/gone.txt', 'modified basic/keep.txt']);
    expect(c.diff).toContain('-original');
    expect(c.diff).toContain('+changed');
    expect(c.text).toContain('Nothing of this is in the workspace yet');
    const stat = await s.process({ action: 'changes', sessionId: r.sessionId, stat: true });
    expect(stat.diff).toBeUndefined();

    const listed = (await s.list()).find((x) => x.sessionId === r.sessionId);
    expect(listed.changes).toMatchObject({ pending: true, files: 5 });

    const a = await s.process({ action: 'apply', sessionId: r.sessionId });
    expect(a.conflicts).toEqual([]);
    expect(a.refused).toEqual([]);
    expect(readFileSync(join(dir, 'keep.txt'), 'utf8')).toBe('changed\n');
    expect(readFileSync(join(dir, 'added.txt'), 'utf8')).toBe('new\n');
    expect(readFileSync(join(dir, 'sub', 'f'), 'utf8')).toBe('deep\n');
    expect(existsSync(join(dir, 'gone.txt'))).toBe(false);
    // Exactly once.
    const again = await s.error('process', { action: 'apply', sessionId: r.sessionId });
    expect(again.data.kind).toBe('conflict');
    const discard = await s.error('process', { action: 'discard', sessionId: r.sessionId });
    expect(discard.data.kind).toBe('conflict');

    const u = await s.process({ action: 'undo', sessionId: r.sessionId });
    expect(u.conflicts).toEqual([]);
    expect(readFileSync(join(dir, 'keep.txt'), 'utf8')).toBe('original\n');
    expect(readFileSync(join(dir, 'gone.txt'), 'utf8')).toBe('to delete\n');
    expect(existsSync(join(dir, 'added.txt'))).toBe(false);
    expect(existsSync(join(dir, 'sub'))).toBe(false);
  });

  it('subscribers hear where a review\'s changes went: pending at its end, then applied, then undone', async () => {
    const listener = await d.client();
    try {
      await new Scoped(listener, 'review').request('subscribe', { events: ['changes'] });
      const dir = join(ws, 'heard');
      mkdirSync(dir);
      const r = await review('echo one > a.txt && echo two > b.txt', dir);
      const states = () => listener.notifications.filter((n) => n.params?.type === 'changes' && n.params.sessionId === r.sessionId).map((n) => n.params);
      await listener.until(() => states().some((e) => e.state === 'pending'));
      expect(states().find((e) => e.state === 'pending')).toMatchObject({ pending: true, files: 2 });
      await s.process({ action: 'apply', sessionId: r.sessionId });
      await listener.until(() => states().some((e) => e.state === 'applied'));
      await s.process({ action: 'undo', sessionId: r.sessionId });
      await listener.until(() => states().some((e) => e.state === 'undone'));
      // A session run with direct writes has no changes to tell of.
      const plain = await s.exec({ command: 'echo x > c.txt', workdir: dir, yieldMs: 60_000 });
      ids.add(plain.sessionId);
      expect(listener.notifications.some((n) => n.params?.type === 'changes' && n.params.sessionId === plain.sessionId)).toBe(false);
    } finally {
      listener.close();
    }
  });

  it('npm ci in review mode: node_modules appears only with apply, the project runs, and undo removes it', async () => {
    const npm = spawnSync('npm', ['--version'], { encoding: 'utf8' });
    if (npm.status !== 0) return void process.stderr.write('skipping the npm ci review test: npm is not on PATH\n');
    // A real project whose dependency is a local package: npm ci needs no network.
    const dep = join(ws, 'npm', 'dep');
    const app = join(ws, 'npm', 'app');
    mkdirSync(dep, { recursive: true });
    mkdirSync(app, { recursive: true });
    writeFileSync(join(dep, 'package.json'), JSON.stringify({ name: 'dep', version: '1.0.0', main: 'index.js' }));
    writeFileSync(join(dep, 'index.js'), 'module.exports = () => "from dep";\n');
    writeFileSync(join(app, 'package.json'), JSON.stringify({ name: 'app', version: '1.0.0', dependencies: { dep: 'file:../dep' } }));
    execFileSync('npm', ['install', '--no-audit', '--no-fund', '--install-links', '--package-lock-only'], { cwd: app, stdio: 'ignore' });
    const r = await review('npm ci --no-audit --no-fund --install-links --cache "$PROCCTL_TMPDIR/npm-cache" && node -e "console.log(require(\'dep\')())"', app);
    expect(r.status, r.text).toBe('completed');
    expect(r.output).toContain('from dep');
    expect(existsSync(join(app, 'node_modules'))).toBe(false);
    const stat = await s.process({ action: 'changes', sessionId: r.sessionId, stat: true });
    expect(stat.files.some((f: any) => f.path === 'npm/app/node_modules/dep/index.js')).toBe(true);
    expect(stat.totals.files).toBeGreaterThanOrEqual(4);

    await s.process({ action: 'apply', sessionId: r.sessionId });
    const run = spawnSync(process.execPath, ['-e', 'console.log(require("dep")())'], { cwd: app, encoding: 'utf8' });
    expect(run.stdout).toBe('from dep\n');
    await s.process({ action: 'undo', sessionId: r.sessionId });
    expect(existsSync(join(app, 'node_modules'))).toBe(false);
  });

  it('a terminal session (its overlay mounted by util-linux, not the spawner) is held the same way', async () => {
    const dir = join(ws, 'pty');
    mkdirSync(dir);
    const r = await s.exec({ command: 'echo typed > t.txt && cat t.txt', workdir: dir, changes: 'review', pty: true, yieldMs: 60_000 });
    ids.add(r.sessionId);
    expect(r.status, r.text).toBe('completed');
    expect(r.output).toContain('typed');
    expect(existsSync(join(dir, 't.txt'))).toBe(false);
    expect(r.changes).toMatchObject({ pending: true, files: 1 });
  });

  it('the overlay is mounted volatile (no sync of the state directory\'s disk at its unmount), by the spawner and by util-linux alike', async () => {
    const [major, minor] = (await import('node:os')).release().split('.').map(Number);
    const volatile = major > 5 || (major === 5 && minor >= 10);
    // The workspace's line of the job's mountinfo: an overlay, and its options.
    const line = `awk '$5 == "${ws}" && / - overlay /' /proc/self/mountinfo`;
    for (const pty of [false, true]) {
      const r = await s.exec({ command: line, workdir: ws, changes: 'review', pty, yieldMs: 60_000 });
      ids.add(r.sessionId);
      expect(r.output, `pty ${pty}`).toContain(' - overlay overlay ');
      // Linux 6.x shows it as fsync=volatile.
      if (volatile) expect(r.output, `pty ${pty}`).toMatch(/[ ,](fsync=)?volatile(,|\s|$)/);
      else expect(r.output, `pty ${pty}`).not.toContain('volatile');
      expect(r.output).toContain('redirect_dir=nofollow');
    }
  });

  it('git commit in review mode changes .git only once applied', async () => {
    const repo = join(ws, 'repo');
    mkdirSync(repo);
    const git = (...args: string[]) => execFileSync('git', ['-c', 'user.name=t', '-c', 'user.email=t@example.invalid', ...args], { cwd: repo, encoding: 'utf8' }).trim();
    git('init', '-q');
    writeFileSync(join(repo, 'a.txt'), 'a\n');
    git('add', 'a.txt');
    git('commit', '-qm', 'first');
    const head = git('rev-parse', 'HEAD');
    const r = await review('echo b > b.txt && git add b.txt && git -c user.name=agent -c user.email=a@example.invalid commit -qm second && git log --oneline | wc -l', repo);
    expect(r.status, r.text).toBe('completed');
    expect(r.output.trim()).toBe('2');
    expect(git('rev-parse', 'HEAD')).toBe(head);
    const a = await s.process({ action: 'apply', sessionId: r.sessionId });
    expect(a.conflicts).toEqual([]);
    expect(git('log', '--format=%s')).toBe('second\nfirst');
    expect(git('status', '--porcelain')).toBe('');
  });

  it('two review sessions that change the same file: the second apply is a conflict, left alone unless force', async () => {
    const dir = join(ws, 'both');
    mkdirSync(dir);
    writeFileSync(join(dir, 'shared.txt'), 'base\n');
    const first = await review('echo first > shared.txt', dir);
    const second = await review('echo second > shared.txt', dir);
    await s.process({ action: 'apply', sessionId: first.sessionId });
    expect(readFileSync(join(dir, 'shared.txt'), 'utf8')).toBe('first\n');
    const a = await s.process({ action: 'apply', sessionId: second.sessionId });
    expect(a.conflicts.map((c: any) => c.path)).toEqual(['both/shared.txt']);
    expect(a.text).toContain('Conflicts');
    expect(readFileSync(join(dir, 'shared.txt'), 'utf8')).toBe('first\n');
  });

  it('an apply that met a conflict leaves it pending: force then writes it, recorded, and undo puts the person\'s file back', async () => {
    const dir = join(ws, 'pending-conflict');
    mkdirSync(dir);
    writeFileSync(join(dir, 'f.txt'), 'base\n');
    const r = await review('echo session > f.txt && echo other > g.txt', dir);
    writeFileSync(join(dir, 'f.txt'), 'person\n');
    const first = await s.process({ action: 'apply', sessionId: r.sessionId });
    expect(first.conflicts.map((c: any) => c.path)).toEqual(['pending-conflict/f.txt']);
    expect(first.state).toBe('pending');
    expect(readFileSync(join(dir, 'g.txt'), 'utf8')).toBe('other\n');
    const forced = await s.process({ action: 'apply', sessionId: r.sessionId, force: true });
    expect(forced.applied.map((a: any) => a.path)).toEqual(['pending-conflict/f.txt']);
    expect(forced.state).toBe('applied');
    expect(readFileSync(join(dir, 'f.txt'), 'utf8')).toBe('session\n');
    await s.process({ action: 'undo', sessionId: r.sessionId });
    expect(readFileSync(join(dir, 'f.txt'), 'utf8')).toBe('person\n');
    expect(existsSync(join(dir, 'g.txt'))).toBe(false);
    // Nothing is written by an apply that may not happen.
    expect((await s.error('process', { action: 'apply', sessionId: r.sessionId, force: true })).data.kind).toBe('conflict');
    expect(readFileSync(join(dir, 'f.txt'), 'utf8')).toBe('person\n');
  });

  it('two applies of some paths each keep their originals, and undo restores both', async () => {
    const dir = join(ws, 'partial');
    mkdirSync(dir);
    writeFileSync(join(dir, 'a.txt'), 'a0\n');
    writeFileSync(join(dir, 'b.txt'), 'b0\n');
    const r = await review('echo a1 > a.txt && echo b1 > b.txt', dir);
    await s.process({ action: 'apply', sessionId: r.sessionId, paths: ['partial/a.txt'] });
    expect((await s.error('process', { action: 'apply', sessionId: r.sessionId, paths: ['partial/a.txt'] })).data.kind).toBe('conflict');
    await s.process({ action: 'apply', sessionId: r.sessionId, paths: ['partial/b.txt'] });
    expect(readFileSync(join(dir, 'a.txt'), 'utf8') + readFileSync(join(dir, 'b.txt'), 'utf8')).toBe('a1\nb1\n');
    const all = await s.process({ action: 'apply', sessionId: r.sessionId });
    expect(all.state).toBe('applied');
    await s.process({ action: 'undo', sessionId: r.sessionId });
    expect(readFileSync(join(dir, 'a.txt'), 'utf8') + readFileSync(join(dir, 'b.txt'), 'utf8')).toBe('a0\nb0\n');
  });

  it('a conflict is overwritten with force', async () => {
    const dir = join(ws, 'forced');
    mkdirSync(dir);
    writeFileSync(join(dir, 'f.txt'), 'base\n');
    const r = await review('echo session > f.txt', dir);
    writeFileSync(join(dir, 'f.txt'), 'person\n');
    const a = await s.process({ action: 'apply', sessionId: r.sessionId, force: true });
    expect(a.conflicts).toEqual([]);
    expect(readFileSync(join(dir, 'f.txt'), 'utf8')).toBe('session\n');
  });

  it('a symlink the job planted is applied as a symlink, and nothing is written through it', async () => {
    const dir = join(ws, 'planted');
    const outside = fs.dir('outside');
    mkdirSync(dir);
    const r = await review(`ln -s ${outside} escape && ln -s /etc/passwd pw && mkfifo fifo && touch suid && chmod u+s suid && echo ok`, dir);
    expect(r.status, r.text).toBe('completed');
    const a = await s.process({ action: 'apply', sessionId: r.sessionId });
    expect(lstatSync(join(dir, 'escape')).isSymbolicLink()).toBe(true);
    expect(readlinkSync(join(dir, 'escape'))).toBe(outside);
    expect(readlinkSync(join(dir, 'pw'))).toBe('/etc/passwd');
    // A FIFO is refused and said; a setuid bit is never carried.
    expect(a.refused.map((x: any) => x.path)).toContain('planted/fifo');
    expect(existsSync(join(dir, 'fifo'))).toBe(false);
    if (existsSync(join(dir, 'suid'))) expect(lstatSync(join(dir, 'suid')).mode & 0o6000).toBe(0);
    expect(readFileSync('/etc/passwd', 'utf8')).toContain('root:');
  });

  it('clear and remove of pending changes are conflicts unless discard; discard leaves the workspace as it was', async () => {
    const dir = join(ws, 'pending');
    mkdirSync(dir);
    const r = await review('echo x > made.txt', dir);
    const clear = await s.error('process', { action: 'clear', sessionId: r.sessionId });
    expect(clear.data.kind).toBe('conflict');
    expect(clear.message).toContain('discard');
    const viaCli = await cli(['--socket', d.socket, '--scope', 'review', 'rm', r.sessionId]);
    expect(viaCli.code).not.toBe(0);
    expect(viaCli.stderr).toContain(`--scope review rm ${r.sessionId} --discard`);
    await s.process({ action: 'remove', sessionId: r.sessionId, discard: true });
    expect(existsSync(join(dir, 'made.txt'))).toBe(false);
    expect(existsSync(join(state, 'changes', r.sessionId))).toBe(false);
  });

  it('a remove of a running review session stops it and keeps what it wrote unless discard; a kill answers with its changes', async () => {
    const dir = join(ws, 'running');
    mkdirSync(dir);
    const start = async () => {
      const r = await s.exec({ command: 'echo x > made.txt && echo written && sleep 600', workdir: dir, changes: 'review', yieldMs: 0 });
      ids.add(r.sessionId);
      await waitFor(async () => (await s.process({ action: 'poll', sessionId: r.sessionId })).output?.includes('written'), { timeoutMs: 60_000, what: 'the job to write' });
      return r.sessionId as string;
    };
    const removed = await start();
    const e = await s.error('process', { action: 'remove', sessionId: removed });
    expect(e.data.kind, e.message).toBe('conflict');
    expect(e.message).toContain('It stays listed');
    expect(e.message).toContain('discard');
    expect(e.data).toMatchObject({ stopped: true, changes: { pending: true, files: 1 } });
    // Listed still, and a poll says what it holds and the next step (SPEC §16: poll shows changes).
    expect((await s.list()).find((x) => x.sessionId === removed)?.changes).toMatchObject({ pending: true, files: 1 });
    const kept = await s.process({ action: 'poll', sessionId: removed });
    expect(kept.status).not.toBe('running');
    expect(kept.changes).toMatchObject({ pending: true, files: 1 });
    expect(kept.text).toContain('are held, not in the workspace');
    expect(existsSync(join(dir, 'made.txt'))).toBe(false);
    await s.process({ action: 'remove', sessionId: removed, discard: true });
    expect(existsSync(join(state, 'changes', removed))).toBe(false);
    // A kill's final record already says what the job left (its changes read before the answer).
    const killed = await start();
    const k = await s.process({ action: 'kill', sessionId: killed });
    expect(k.changes).toMatchObject({ pending: true, files: 1 });
    await s.process({ action: 'remove', sessionId: killed, discard: true });
    expect(existsSync(join(dir, 'made.txt'))).toBe(false);
  });

  it('is refused at the request when elevated, or with no workspace sandbox, and says why', async () => {
    const e = await new Scoped(s.c, 'host').error('exec', { command: 'true', workdir: ws, changes: 'review', elevated: true });
    expect(e.data.kind).toBe('invalid');
    expect(e.message).toContain('elevated');
    const plain = await startDaemon({});
    try {
      const p = new Scoped(await plain.client(), 'x');
      const r = await p.error('exec', { command: 'true', changes: 'review' });
      expect(r.data.kind).toBe('invalid');
      expect(r.message).toContain('sandbox.mode is "off"');
      expect((await p.c.call('daemon.status')).changes).toMatchObject({ review: true });
    } finally {
      await plain.stop();
    }
  });

  it('scopes.NAME.changes "review" holds a scope\'s commands without asking each exec, and an exec may still ask for direct', async () => {
    const dir = join(ws, 'scope-default');
    mkdirSync(dir);
    const held = new Scoped(s.c, 'held');
    const r = await held.exec({ command: 'echo x > held.txt', workdir: dir });
    ids.add(r.sessionId);
    expect(r.changes).toMatchObject({ pending: true, files: 1 });
    expect(existsSync(join(dir, 'held.txt'))).toBe(false);
    const direct = await held.exec({ command: 'echo y > now.txt', workdir: dir, changes: 'direct' });
    expect(direct.changes).toBeUndefined();
    expect(readFileSync(join(dir, 'now.txt'), 'utf8')).toBe('y\n');
  });

  it('a session started direct writes straight in, and has no changes to act on', async () => {
    const dir = join(ws, 'direct');
    mkdirSync(dir);
    const r = await s.exec({ command: 'echo x > now.txt', workdir: dir });
    expect(readFileSync(join(dir, 'now.txt'), 'utf8')).toBe('x\n');
    const e = await s.error('process', { action: 'changes', sessionId: r.sessionId });
    expect(e.data.kind).toBe('conflict');
  });

  it('pending changes survive a daemon restart and can be applied after it', async () => {
    const dir = join(ws, 'restart');
    mkdirSync(dir);
    const r = await review('echo kept > later.txt', dir);
    await d.stop();
    d = await startDaemon({ config, env: { PROCCTL_STATE_DIR: state } });
    s = new Scoped(await d.client(), 'review');
    const listed = (await s.list()).find((x) => x.sessionId === r.sessionId);
    expect(listed?.changes).toMatchObject({ pending: true, files: 1 });
    await s.process({ action: 'apply', sessionId: r.sessionId });
    expect(readFileSync(join(dir, 'later.txt'), 'utf8')).toBe('kept\n');
  });

  it('at start, a review whose session is gone is removed when nothing waits, and kept and said when changes do', async () => {
    await d.stop();
    // What a lost record leaves: review directories no session names.
    const orphan = (id: string, file?: string) => {
      const dir = join(state, 'changes', id);
      mkdirSync(join(dir, 'upper'), { recursive: true });
      writeFileSync(join(dir, 'layout.json'), `${JSON.stringify({ v: 1, workspace: ws, startedAt: Date.now(), xattrs: 'trusted' })}\n`);
      if (file) writeFileSync(join(dir, 'upper', file), 'only copy\n');
      return dir;
    };
    const empty = orphan('zzempty1');
    const held = orphan('zzheld01', 'precious.txt');
    const log = join(fs.root, 'orphans.log');
    d = await startDaemon({ config, env: { PROCCTL_STATE_DIR: state }, logFile: log });
    s = new Scoped(await d.client(), 'review');
    expect(existsSync(empty)).toBe(false);
    expect(readFileSync(join(held, 'upper', 'precious.txt'), 'utf8')).toBe('only copy\n');
    expect(readFileSync(log, 'utf8')).toMatch(/zzheld01.*belong to no session any more: kept/);
  });
});

// A daemon that is not root mounts the overlay in a user namespace of the job's own (its ids mapped to
// themselves), with overlayfs's user.* marks; nothing else changes for the person.
describe.skipIf(SKIP_SANDBOX || AS_NOBODY !== undefined)('review mode on a daemon that is not root', () => {
  it('holds, applies and undoes as it does for root', async () => {
    const home = fs.dir('nobody');
    const work = join(home, 'ws');
    mkdirSync(work);
    writeFileSync(join(work, 'a.txt'), 'before\n');
    execFileSync('chown', ['-R', '65534:65534', home]);
    execFileSync('chmod', ['0755', fs.root]);
    const file = join(home, 'config.json');
    writeFileSync(file, JSON.stringify({ sandbox: { mode: 'workspace-write', workspaces: [work] } }));
    const sock = join(home, 'run', 'procctl.sock');
    const { root } = checkoutFor(65534);
    const env = { ...process.env, PROCCTL_STATE_DIR: join(home, 'state'), HOME: home, PROCCTL_LOG_LEVEL: 'warn' };
    delete env.PROCCTL_SOCKET;
    delete env.XDG_RUNTIME_DIR;
    const { spawn } = await import('node:child_process');
    const daemon = spawn('setpriv', ['--reuid=65534', '--regid=65534', '--clear-groups', '--', process.execPath, join(root, 'bin', 'procctld'), '--socket', sock, '--config', file], { env, stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    daemon.stderr!.setEncoding('utf8').on('data', (x: string) => (out += x));
    const exited = new Promise((r) => daemon.on('exit', r));
    try {
      await waitFor(() => existsSync(sock) || daemon.exitCode !== null, { what: 'the daemon as uid 65534 to listen' });
      expect(daemon.exitCode, out).toBe(null);
      const c = new Scoped(await waitFor(() => TestClient.connect(sock).catch(() => undefined), { what: 'a connection' }) as TestClient, 'nobody');
      expect((await c.c.call('daemon.status')).changes, out).toMatchObject({ review: true, how: 'overlayfs in a user namespace' });
      const r = await c.exec({ command: 'echo after > a.txt && echo new > b.txt && id -u', workdir: work, changes: 'review', yieldMs: 60_000 });
      ids.add(r.sessionId);
      expect(r.status, r.text).toBe('completed');
      expect(r.output.trim()).toBe('65534');
      expect(readFileSync(join(work, 'a.txt'), 'utf8')).toBe('before\n');
      expect(existsSync(join(work, 'b.txt'))).toBe(false);
      const changes = await c.process({ action: 'changes', sessionId: r.sessionId, stat: true });
      expect(changes.files.map((f: any) => `${f.kind} ${f.path}`).sort()).toEqual(['added b.txt', 'modified a.txt']);
      await c.process({ action: 'apply', sessionId: r.sessionId });
      expect(readFileSync(join(work, 'a.txt'), 'utf8')).toBe('after\n');
      expect(lstatSync(join(work, 'b.txt')).uid).toBe(65534);
      await c.process({ action: 'undo', sessionId: r.sessionId });
      expect(readFileSync(join(work, 'a.txt'), 'utf8')).toBe('before\n');
      expect(existsSync(join(work, 'b.txt'))).toBe(false);
      // Discarded, and a review that wrote nothing: the kernel's work directories (mode 000) go too.
      const other = await c.exec({ command: 'echo x > c.txt', workdir: work, changes: 'review', yieldMs: 60_000 });
      const nothing = await c.exec({ command: 'true', workdir: work, changes: 'review', yieldMs: 60_000 });
      ids.add(other.sessionId).add(nothing.sessionId);
      await c.process({ action: 'discard', sessionId: other.sessionId });
      const held = join(home, 'state', 'changes');
      await waitFor(() => !existsSync(join(held, other.sessionId, 'work')) && readdirSync(held).every((n) => (!n.startsWith('.') || n.startsWith('.spare-')) && n !== nothing.sessionId), { what: 'the review directories to go' });
      c.c.close();
    } finally {
      daemon.kill('SIGTERM');
      const t = setTimeout(() => daemon.kill('SIGKILL'), 15_000);
      await exited;
      clearTimeout(t);
    }
  });
});
