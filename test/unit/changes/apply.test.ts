import { chmodSync, existsSync, lstatSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, readlinkSync, rmSync, statSync, symlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { apply, fromBytes, plan, read, ReviewStore, toBytes, undo } from '../../../src/changes/index.js';
import { cannotMount, cleanup, inOverlay, layers, type Layers } from './overlay.js';

/** Every entry under a directory as "type mode content-or-target", by exact name: what a person sees. */
function snapshot(root: string, rel = ''): Record<string, string> {
  const out: Record<string, string> = {};
  const dir = Buffer.from(rel ? `${root}/` : root);
  for (const name of (readdirSync(rel ? Buffer.concat([dir, toBytes(rel)]) : dir, { encoding: 'buffer' }) as Buffer[]).sort(Buffer.compare)) {
    const path = rel ? `${rel}/${fromBytes(name)}` : fromBytes(name);
    const at = Buffer.concat([Buffer.from(`${root}/`), toBytes(path)]);
    const st = lstatSync(at);
    const mode = (st.mode & 0o7777).toString(8);
    if (st.isDirectory()) {
      out[path] = `dir ${mode}`;
      Object.assign(out, snapshot(root, path));
    } else if (st.isSymbolicLink()) out[path] = `symlink -> ${readlinkSync(at)}`;
    else if (st.isFile()) out[path] = `file ${mode} ${readFileSync(at, 'utf8')}`;
    else out[path] = `other ${mode}`;
  }
  return out;
}

function seed(l: Layers) {
  writeFileSync(join(l.lower, 'edit.txt'), 'one\n');
  writeFileSync(join(l.lower, 'gone.txt'), 'bye\n');
  writeFileSync(join(l.lower, 'run.sh'), 'echo hi\n');
  chmodSync(join(l.lower, 'run.sh'), 0o644);
  mkdirSync(join(l.lower, 'tree/deep'), { recursive: true });
  writeFileSync(join(l.lower, 'tree/deep/a'), 'a\n');
  mkdirSync(join(l.lower, 'box'));
  writeFileSync(join(l.lower, 'box/old'), 'old\n');
  writeFileSync(join(l.lower, 'was-file'), 'file\n');
  symlinkSync('edit.txt', join(l.lower, 'link'));
}

const SESSION_START = Date.now() - 60_000;
let l: Layers | undefined;
afterEach(() => {
  if (l) cleanup(l);
  l = undefined;
});

describe('apply and undo of what the kernel wrote', () => {
  it('makes the workspace what the session saw, and undo puts it back', (ctx) => {
    const why = cannotMount('trusted');
    if (why) return ctx.skip(why);
    l = layers();
    seed(l);
    const before = snapshot(l.lower);
    inOverlay(
      l,
      "echo two >> edit.txt; rm gone.txt; chmod 755 run.sh; rm -rf tree; rm -rf box && mkdir box && echo new > box/new; mkdir -p made/sub && echo x > made/sub/f; rm link && ln -s run.sh link; rm was-file && mkdir was-file && echo in > was-file/in; printf n > \"$(printf 'nl\\nname')\"; printf b > \"$(printf 'b\\377')\"",
    );
    const seen = snapshot(l.upper); // kept only to show in a failure
    const set = read(l.upper, l.lower);
    const rows = plan(set, l.lower, { sessionStartMs: SESSION_START });
    expect(rows.filter((r) => r.action === 'refuse' || r.action === 'conflict'), JSON.stringify(seen)).toEqual([]);
    const done = apply(rows, { workspace: l.lower, upper: l.upper, originals: l.originals });
    expect(done.failed).toEqual([]);
    expect(done.applied.length).toBe(rows.length);
    // Read again, nothing differs: the workspace holds what the session left.
    expect(read(l.upper, l.lower).files).toEqual([]);
    expect(readFileSync(join(l.lower, 'edit.txt'), 'utf8')).toBe('one\ntwo\n');
    expect(lstatSync(join(l.lower, 'run.sh')).mode & 0o777).toBe(0o755);
    expect(readlinkSync(join(l.lower, 'link'))).toBe('run.sh');
    expect(readFileSync(Buffer.from(`${l.lower}/b\xff`, 'latin1'), 'utf8')).toBe('b');
    expect(readFileSync(join(l.lower, 'nl\nname'), 'utf8')).toBe('n');

    const back = undo(done.manifest, { workspace: l.lower, originals: l.originals });
    expect(back.conflicts).toEqual([]);
    expect(snapshot(l.lower)).toEqual(before);
  });

  it('undo after the person edited an applied file: that one is a conflict, the others are restored', (ctx) => {
    const why = cannotMount('trusted');
    if (why) return ctx.skip(why);
    l = layers();
    seed(l);
    inOverlay(l, 'echo two >> edit.txt; rm gone.txt; echo n > new.txt');
    const rows = plan(read(l.upper, l.lower), l.lower, { sessionStartMs: SESSION_START });
    const done = apply(rows, { workspace: l.lower, upper: l.upper, originals: l.originals });
    writeFileSync(join(l.lower, 'edit.txt'), 'the person wrote this\n');
    const back = undo(done.manifest, { workspace: l.lower, originals: l.originals });
    expect(back.conflicts).toEqual([{ path: 'edit.txt', why: 'changed in the workspace since the apply wrote it' }]);
    expect(back.restored.sort()).toEqual(['gone.txt', 'new.txt']);
    expect(readFileSync(join(l.lower, 'edit.txt'), 'utf8')).toBe('the person wrote this\n');
    expect(readFileSync(join(l.lower, 'gone.txt'), 'utf8')).toBe('bye\n');
    expect(() => lstatSync(join(l!.lower, 'new.txt'))).toThrow(/ENOENT/);
  });

  it('kept originals on another file system than the workspace: apply copies them, and undo puts each back as it was, mode included', (ctx) => {
    const why = cannotMount('trusted');
    if (why) return ctx.skip(why);
    l = layers();
    const elsewhere = existsSync('/dev/shm') ? mkdtempSync('/dev/shm/procctl-originals-') : undefined;
    try {
      if (!elsewhere || statSync(elsewhere).dev === statSync(l.lower).dev) return ctx.skip('no second file system (/dev/shm) beside the temp directory');
      const originals = join(elsewhere, 'originals');
      seed(l);
      chmodSync(join(l.lower, 'edit.txt'), 0o640);
      const before = snapshot(l.lower);
      inOverlay(l, 'echo two >> edit.txt; rm gone.txt; chmod 755 run.sh; echo n > new.txt; rm link && ln -s run.sh link');
      const rows = plan(read(l.upper, l.lower), l.lower, { sessionStartMs: SESSION_START });
      const done = apply(rows, { workspace: l.lower, upper: l.upper, originals });
      expect(done.failed).toEqual([]);
      expect(readFileSync(join(l.lower, 'edit.txt'), 'utf8')).toBe('one\ntwo\n');
      const back = undo(done.manifest, { workspace: l.lower, originals });
      expect(back.conflicts).toEqual([]);
      expect(snapshot(l.lower)).toEqual(before);
    } finally {
      if (elsewhere) rmSync(elsewhere, { recursive: true, force: true });
    }
  });

  it('applies only the paths asked for, with the directories they need', (ctx) => {
    const why = cannotMount('trusted');
    if (why) return ctx.skip(why);
    l = layers();
    seed(l);
    inOverlay(l, 'mkdir -p a/b && echo 1 > a/b/one && echo 2 > two');
    const rows = plan(read(l.upper, l.lower), l.lower, { sessionStartMs: SESSION_START, paths: ['a/b/one'] });
    expect(rows.map((r) => [r.path, r.action])).toEqual([['a', 'mkdir'], ['a/b', 'mkdir'], ['a/b/one', 'write']]);
  });
});

describe('the review store', () => {
  it('allows apply and discard once, undo only after an apply, and survives a reload', () => {
    l = layers();
    const store = new ReviewStore(join(l.base, 'state'));
    store.open('s1');
    store.applied('s1', [], ['a']);
    expect(() => store.applied('s1', [], ['a'])).toThrow(expect.objectContaining({ kind: 'conflict' }));
    expect(() => store.undoable('s1')).toThrow(expect.objectContaining({ kind: 'conflict' }));
    store.applied('s1', []);
    expect(() => store.applied('s1', [])).toThrow(expect.objectContaining({ kind: 'conflict', message: expect.stringMatching(/applied, not pending/) }));
    expect(() => store.discarded('s1')).toThrow(expect.objectContaining({ kind: 'conflict' }));
    expect(new ReviewStore(join(l.base, 'state')).get('s1')).toMatchObject({ state: 'applied', applied: ['a'] });
    store.undone('s1');
    expect(() => store.undone('s1')).toThrow(expect.objectContaining({ kind: 'conflict' }));
    store.open('s2');
    store.discarded('s2');
    expect(() => store.discarded('s2')).toThrow(expect.objectContaining({ kind: 'conflict' }));
    writeFileSync(join(l.base, 'state', 's3.json'), '{"v":1,"state":"weird"}');
    expect(() => store.get('s3')).toThrow(expect.objectContaining({ kind: 'invalid' }));
    expect(() => store.get('../x')).toThrow(expect.objectContaining({ kind: 'invalid' }));
  });
});
