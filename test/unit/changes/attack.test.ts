import { execFileSync } from 'node:child_process';
import { existsSync, linkSync, lstatSync, mkdirSync, readdirSync, readFileSync, rmSync, symlinkSync, utimesSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { apply, plan, read, type ChangeSet, type PlanEntry } from '../../../src/changes/index.js';
import { cannotMount, cleanup, inOverlay, layers, setXattr, type Layers } from './overlay.js';

/**
 * Upper directories a hostile job (or the test, crafting one directly) leaves, and what apply
 * does with them: refuses and says why, and writes nothing outside the workspace.
 */
const SESSION_START = Date.now() - 60_000;
let l: Layers | undefined;
afterEach(() => {
  if (l) cleanup(l);
  l = undefined;
});

const rowOf = (rows: PlanEntry[], path: string) => rows.find((r) => r.path === path);
const planned = (l: Layers, force = false) => plan(read(l.upper, l.lower), l.lower, { sessionStartMs: SESSION_START, force });
const outsideOf = (l: Layers) => {
  const dir = join(l.base, 'outside');
  mkdirSync(dir, { recursive: true });
  return dir;
};

describe('what apply refuses', () => {
  it('a symlink to outside is made as a symlink, and nothing is written through it', (ctx) => {
    const why = cannotMount('trusted');
    if (why) return ctx.skip(why);
    l = layers();
    const outside = outsideOf(l);
    inOverlay(l, `ln -s ${outside} escape`);
    // A second row as if the job had written escape/pwned: apply meets the symlink it just made.
    const rows: PlanEntry[] = [...planned(l), { path: 'escape/pwned', kind: 'added', action: 'write', mode: 0o644 }];
    const done = apply(rows, { workspace: l.lower, upper: l.upper, originals: l.originals });
    expect(lstatSync(join(l.lower, 'escape')).isSymbolicLink()).toBe(true);
    expect(done.refused).toEqual([{ path: 'escape/pwned', why: 'escape is a symlink in the workspace (not written through)' }]);
    expect(readdirSync(outside)).toEqual([]);
  });

  it('a workspace directory replaced by a symlink to outside after the session: refused, nothing written outside', (ctx) => {
    const why = cannotMount('trusted');
    if (why) return ctx.skip(why);
    l = layers();
    const outside = outsideOf(l);
    mkdirSync(join(l.lower, 'src'));
    writeFileSync(join(l.lower, 'src/main.c'), 'int main;\n');
    inOverlay(l, 'echo changed > src/main.c; echo new > src/added.c; rm src/main.c');
    writeFileSync(join(outside, 'main.c'), 'outside\n');
    const rows = planned(l);
    rmSync(join(l.lower, 'src'), { recursive: true });
    symlinkSync(outside, join(l.lower, 'src'));
    // Planned before the swap, applied after it: apply's own check is what holds.
    const done = apply(rows, { workspace: l.lower, upper: l.upper, originals: l.originals });
    expect(done.applied).toEqual([]);
    expect(done.refused.map((r) => r.why)).toEqual(['src is a symlink in the workspace (not written through)', 'src is a symlink in the workspace (not written through)']);
    expect(readdirSync(outside)).toEqual(['main.c']);
    expect(readFileSync(join(outside, 'main.c'), 'utf8')).toBe('outside\n');
    // Read and planned after the swap: the symlink is what the workspace has now, a conflict;
    // forced, it is replaced by the session's directory, never written through.
    expect(planned(l).map((r) => [r.path, r.action])).toEqual([['src', 'conflict'], ['src/added.c', 'conflict']]);
    const forced = apply(planned(l, true), { workspace: l.lower, upper: l.upper, originals: l.originals });
    expect(forced.applied.map((r) => r.path)).toEqual(['src', 'src/added.c']);
    expect(lstatSync(join(l.lower, 'src')).isDirectory()).toBe(true);
    expect(readdirSync(outside)).toEqual(['main.c']);
  });

  it('".." and absolute names fed to the planner', () => {
    l = layers();
    const set: ChangeSet = {
      files: ['../escape', '/etc/passwd', 'a/../../b', 'a//b', './x'].map((path) => ({ path, kind: 'added' as const, type: 'file' as const, mode: 0o644, size: 1 })),
      totals: { files: 5, added: 5, modified: 0, deleted: 0, bytes: 5 },
      facts: new Map(),
    };
    const rows = plan(set, l.lower, { sessionStartMs: SESSION_START, force: true });
    expect(rows.map((r) => [r.action, r.why])).toEqual([
      ['refuse', 'a name with a ".." segment'],
      ['refuse', 'an absolute name'],
      ['refuse', 'a name with a ".." segment'],
      ['refuse', 'a name with an empty or "." segment'],
      ['refuse', 'a name with an empty or "." segment'],
    ]);
  });

  it('a FIFO, a device node, a socket, a setuid and a setgid file', (ctx) => {
    const why = cannotMount('trusted');
    if (why) return ctx.skip(why);
    l = layers();
    inOverlay(l, "mkfifo fifo; echo x > suid && chmod 4755 suid; echo x > sgid && chmod 2755 sgid; python3 -c 'import socket; socket.socket(socket.AF_UNIX).bind(\"sock\")'");
    execFileSync('mknod', [join(l.upper, 'null2'), 'c', '1', '3']);
    const rows = planned(l, true);
    expect(Object.fromEntries(rows.map((r) => [r.path, `${r.action}: ${r.why}`]))).toEqual({
      fifo: 'refuse: a FIFO',
      null2: 'refuse: a char device node',
      sgid: 'refuse: a setgid file (mode 02755): clear the bit in the session to apply it',
      sock: 'refuse: a socket',
      suid: 'refuse: a setuid file (mode 04755): clear the bit in the session to apply it',
    });
    const done = apply(rows, { workspace: l.lower, upper: l.upper, originals: l.originals });
    expect(done.refused.length).toBe(5);
    expect(readdirSync(l.lower)).toEqual([]);
  });

  it('a hard link to a file outside the changes is refused; links within them are copied', () => {
    l = layers();
    const secret = join(outsideOf(l), 'secret');
    writeFileSync(secret, 'secret\n');
    linkSync(secret, join(l.upper, 'leak'));
    writeFileSync(join(l.upper, 'one'), 'same\n');
    linkSync(join(l.upper, 'one'), join(l.upper, 'two'));
    const rows = planned(l);
    expect(rowOf(rows, 'leak')).toMatchObject({ action: 'refuse', why: 'a hard link to a file outside the changes (2 links, 1 of them here)' });
    expect(rowOf(rows, 'one')?.action).toBe('write');
    apply(rows, { workspace: l.lower, upper: l.upper, originals: l.originals });
    expect(existsSync(join(l.lower, 'leak'))).toBe(false);
    expect(lstatSync(join(l.lower, 'one')).nlink).toBe(1);
    expect(readFileSync(join(l.lower, 'two'), 'utf8')).toBe('same\n');
  });

  it('an overlay redirect mark this reader does not follow', () => {
    l = layers();
    mkdirSync(join(l.upper, 'moved'));
    writeFileSync(join(l.upper, 'moved/f'), 'x');
    setXattr(join(l.upper, 'moved'), 'trusted.overlay.redirect', '/elsewhere');
    const rows = planned(l, true);
    expect(rows).toEqual([{ path: 'moved', kind: 'added', action: 'refuse', why: expect.stringMatching(/^an overlay redirect mark/) }]);
  });
});

describe('conflicts', () => {
  it('a file edited in the workspace after the session copied it up is left alone unless forced', (ctx) => {
    const why = cannotMount('trusted');
    if (why) return ctx.skip(why);
    l = layers();
    writeFileSync(join(l.lower, 'shared.txt'), 'base\n');
    writeFileSync(join(l.lower, 'other.txt'), 'base\n');
    inOverlay(l, 'echo session >> shared.txt; echo session >> other.txt');
    // The person edits the real file after the copy-up; ctime moves on by itself.
    execFileSync('sleep', ['0.05']);
    writeFileSync(join(l.lower, 'shared.txt'), 'person\n');
    utimesSync(join(l.lower, 'shared.txt'), 0, 0);
    const rows = planned(l);
    expect(rowOf(rows, 'shared.txt')).toMatchObject({ action: 'conflict', why: 'changed in the workspace since the session first wrote it' });
    expect(rowOf(rows, 'other.txt')?.action).toBe('write');
    const done = apply(rows, { workspace: l.lower, upper: l.upper, originals: l.originals });
    expect(done.conflicts).toEqual([{ path: 'shared.txt', why: 'changed in the workspace since the session first wrote it' }]);
    expect(readFileSync(join(l.lower, 'shared.txt'), 'utf8')).toBe('person\n');
    const forced = planned(l, true);
    expect(rowOf(forced, 'shared.txt')).toMatchObject({ action: 'write', why: expect.stringMatching(/^forced over a conflict/) });
  });

  it('a file the session added that the workspace now has too', (ctx) => {
    const why = cannotMount('trusted');
    if (why) return ctx.skip(why);
    l = layers();
    inOverlay(l, 'echo session > both.txt');
    writeFileSync(join(l.lower, 'both.txt'), 'person\n');
    // Read before the person's file appeared, as a review shown earlier would have.
    const set = read(l.upper, l.lower);
    expect(set.files[0].kind).toBe('modified');
    const rows = plan({ ...set, files: [{ ...set.files[0], kind: 'added', oldType: undefined }] }, l.lower, { sessionStartMs: SESSION_START });
    expect(rows[0]).toMatchObject({ action: 'conflict', why: 'the workspace now has a file there, which the session did not see' });
  });
});
