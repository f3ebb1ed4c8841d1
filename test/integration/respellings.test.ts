import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startDaemon, type TestDaemon } from '../helpers/daemon.js';
import { Scoped } from '../helpers/session.js';

/**
 * The rules tried as an agent would get around them (SPEC §8), for real: each respelling runs
 * through a real daemon against a temp directory and a local bare git repository, and nothing
 * happens; the plain commands next to them still run.
 */

const base = mkdtempSync(join(tmpdir(), 'procctl-respell-'));
const work = join(base, 'work');
const remote = join(base, 'remote.git');
let d: TestDaemon;
let s: Scoped;

const RULES = [
  { command: ['rm', '-r|-R|--recursive'], action: 'deny', reason: 'recursive delete' },
  { command: ['git', 'push'], action: 'ask', reason: 'publishes commits' },
];

const git = (...args: string[]) => execFileSync('git', args, { cwd: work, encoding: 'utf8' }).trim();

beforeAll(async () => {
  mkdirSync(work);
  execFileSync('git', ['init', '-q', '--bare', remote]);
  git('init', '-q');
  git('remote', 'add', 'origin', remote);
  writeFileSync(join(work, 'a.txt'), 'a\n');
  git('add', 'a.txt');
  git('-c', 'user.name=t', '-c', 'user.email=t@example.invalid', 'commit', '-qm', 'first');
  d = await startDaemon({ config: { approvals: { rules: RULES } } });
  s = new Scoped(await d.client(), 'respell');
});

afterAll(async () => {
  await d?.stop();
  rmSync(base, { recursive: true, force: true });
});

const refs = () => execFileSync('git', ['--git-dir', remote, 'for-each-ref'], { encoding: 'utf8' });

describe('respellings run for real change nothing', () => {
  const DELETES = [
    "r''m -rf build",
    '"rm" -rf build',
    'r\\m -rf build',
    '/bin/rm -fr build',
    'rm -r -f build',
    'rm --recursive --force build',
    "$'\\x72m' -Rf build",
    'x=rm; $x -rf build',
    '$(printf rm) -rf build',
    "eval 'r''m -rf build'",
    'echo cm0gLXJmIGJ1aWxk | base64 -d | sh',
    "sh -c 'rm -rf build'",
    'env -i PATH=/usr/bin:/bin rm -rf build',
    'ls && sudo rm -rf build',
    'find . -maxdepth 1 -name build -exec rm -rf {} +',
    'rm \\\n -rf build',
  ];

  it.each(DELETES)('%j: nothing is deleted', async (command) => {
    mkdirSync(join(work, 'build'), { recursive: true });
    writeFileSync(join(work, 'build', 'keep'), 'x');
    const r = await s.exec({ command, workdir: work });
    expect(['denied', 'approval_required'], JSON.stringify(r).slice(0, 300)).toContain(r.status);
    expect(existsSync(join(work, 'build', 'keep'))).toBe(true);
    if (r.status === 'approval_required') await s.process({ action: 'kill', sessionId: r.sessionId });
  });

  const PUSHES = ['git push origin HEAD:main', 'git -C . push origin HEAD:main', 'git -c x.y=z push origin HEAD:main', "g''it push origin HEAD:main", "git pu''sh origin HEAD:main", 'echo would push; "git" push origin HEAD:main'];

  it.each(PUSHES)('%j: waits for a person, and the remote has no new ref', async (command) => {
    const before = refs();
    const r = await s.exec({ command, workdir: work });
    expect(r.status).toBe('approval_required');
    expect(refs()).toBe(before);
    await s.process({ action: 'kill', sessionId: r.sessionId });
  });

  it('the plain commands still run: a file removed without -r, a commit, a status', async () => {
    writeFileSync(join(work, 'tmp.log'), 'x');
    const r = await s.exec({ command: 'rm -f tmp.log && git status --short && echo ok', workdir: work });
    expect(r).toMatchObject({ status: 'completed', exitCode: 0 });
    expect(r.output).toContain('ok');
    expect(existsSync(join(work, 'tmp.log'))).toBe(false);
  });
});

// SPEC §8: an operator who writes approvals.unanalyzable with no rules means it.
describe('approvals.unanalyzable set alone', () => {
  let only: TestDaemon;
  let o: Scoped;
  beforeAll(async () => {
    only = await startDaemon({ config: { approvals: { unanalyzable: 'deny' } } });
    o = new Scoped(await only.client(), 'unanalyzable');
  });
  afterAll(() => only?.stop());

  it.each(['$(printf touch) z1', 't=touch; $t z2', 'echo dG91Y2ggejMK | base64 -d | bash'])('%j is denied and makes no file', async (command) => {
    const r = await o.exec({ command, workdir: work });
    expect(r.status, JSON.stringify(r).slice(0, 300)).toBe('denied');
    expect(r.text).toContain('approvals.unanalyzable');
    for (const f of ['z1', 'z2', 'z3']) expect(existsSync(join(work, f))).toBe(false);
  });

  it('what can be judged still runs', async () => {
    const r = await o.exec({ command: 'touch z4 && echo made', workdir: work });
    expect(r).toMatchObject({ status: 'completed', exitCode: 0 });
    expect(existsSync(join(work, 'z4'))).toBe(true);
  });
});
