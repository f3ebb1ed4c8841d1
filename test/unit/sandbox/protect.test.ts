import { spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, renameSync, rmSync, utimesSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DEFAULT_PROTECT } from '../../../src/config/schema.js';
import { Listings } from '../../../src/sandbox/listings.js';
import { findProtected } from '../../../src/sandbox/protect.js';

const root = mkdtempSync(join(tmpdir(), 'procctl-protect-'));
afterAll(() => rmSync(root, { recursive: true, force: true }));

const kinds = [
  { kind: 'watched (inotify, read at each walk)', make: () => new Listings() },
  { kind: 'checked by ctime (no watches)', make: () => new Listings({ watch: false }) },
];

/** Trees made now, then left alone for longer than a ctime-checked listing waits before it is kept (2 s). */
const trees = kinds.map((_, k) => ['change', 'swap', 'backdate'].map((name) => join(root, `${k}-${name}`)));
beforeAll(async () => {
  for (const tree of trees.flat()) mkdirSync(join(tree, 'a', 'b'), { recursive: true });
  await new Promise((r) => setTimeout(r, 2500));
}, 10_000);

describe.each(kinds.map((k, i) => ({ ...k, i })))('the protect walk finds what is there at every start, listings $kind', ({ make, i }) => {
  const listings = make();
  afterAll(() => listings.close());
  const found = (tree: string) => findProtected([tree], DEFAULT_PROTECT, listings).paths;

  it('an entry added to a settled directory after it was listed', () => {
    const [tree] = trees[i];
    const deep = join(tree, 'a', 'b');
    expect(found(tree)).toEqual([]);
    expect(found(tree)).toEqual([]);
    writeFileSync(join(deep, '.envrc'), 'echo hi\n');
    mkdirSync(join(deep, '.git', 'hooks'), { recursive: true });
    writeFileSync(join(deep, '.git', 'config'), '[core]\n');
    expect(found(tree)).toEqual(
      expect.arrayContaining([
        { path: join(deep, '.envrc'), how: 'ro' },
        { path: join(deep, '.git'), how: 'pin' },
        { path: join(deep, '.git', 'config'), how: 'ro' },
        { path: join(deep, '.git', 'hooks'), how: 'ro' },
      ]),
    );
    rmSync(join(deep, '.envrc'));
    expect(found(tree)).not.toContainEqual({ path: join(deep, '.envrc'), how: 'ro' });
  });

  it('a directory replaced by another of the same name (its inode may be reused)', () => {
    const tree = trees[i][1];
    expect(found(tree)).toEqual([]);
    rmSync(join(tree, 'a', 'b'), { recursive: true });
    mkdirSync(join(tree, 'a', 'b'));
    writeFileSync(join(tree, 'a', 'b', '.npmrc'), '');
    expect(found(tree)).toEqual([{ path: join(tree, 'a', 'b', '.npmrc'), how: 'ro' }]);
  });

  it("a change whose directory's mtime was then set back to what it was (as a job could)", () => {
    const tree = trees[i][2];
    const deep = join(tree, 'a', 'b');
    expect(found(tree)).toEqual([]);
    const before = new Date(Date.now() - 3600_000);
    utimesSync(deep, before, before);
    writeFileSync(join(deep, '.bashrc'), '');
    utimesSync(deep, before, before);
    expect(found(tree)).toEqual([{ path: join(deep, '.bashrc'), how: 'ro' }]);
  });

  it('a tree changed in the same moment it was first listed', () => {
    const tree = join(root, `${i}-fresh`);
    mkdirSync(join(tree, 'x', 'y'), { recursive: true });
    expect(found(tree)).toEqual([]);
    writeFileSync(join(tree, 'x', 'y', '.profile'), '');
    expect(found(tree)).toEqual([{ path: join(tree, 'x', 'y', '.profile'), how: 'ro' }]);
  });

  it('a directory renamed away and another renamed into its name, and the whole tree swapped for another', () => {
    const tree = join(root, `${i}-rename`);
    mkdirSync(join(tree, 'a', 'b', 'c'), { recursive: true });
    mkdirSync(join(tree, 'other', 'c'), { recursive: true });
    writeFileSync(join(tree, 'other', 'c', '.vscode'), '');
    expect(found(tree)).toEqual([{ path: join(tree, 'other', 'c', '.vscode'), how: 'ro' }]);
    renameSync(join(tree, 'a', 'b'), join(tree, 'old'));
    renameSync(join(tree, 'other'), join(tree, 'a', 'b'));
    expect(found(tree)).toEqual([{ path: join(tree, 'a', 'b', 'c', '.vscode'), how: 'ro' }]);
    // The root itself: renamed away, and a tree with a git directory where the old one had `a` put in its place.
    const spare = join(root, `${i}-spare`);
    mkdirSync(join(spare, 'a', 'd', '.git'), { recursive: true });
    renameSync(tree, join(root, `${i}-rename-old`));
    renameSync(spare, tree);
    expect(found(tree)).toEqual([
      { path: join(tree, 'a', 'd', '.git'), how: 'pin' },
      { path: join(tree, 'a', 'd', '.git', 'hooks'), how: 'empty' },
    ]);
  });
  it('a tree whose path was given to another by a rename above it (no watch under it sees that)', () => {
    const above = join(root, `${i}-above`);
    const tree = join(above, 'ws');
    mkdirSync(join(tree, 'a'), { recursive: true });
    expect(found(tree)).toEqual([]);
    renameSync(above, join(root, `${i}-above-old`));
    mkdirSync(join(tree, 'a'), { recursive: true });
    writeFileSync(join(tree, 'a', '.zshrc'), '');
    expect(found(tree)).toEqual([{ path: join(tree, 'a', '.zshrc'), how: 'ro' }]);
  });
});

describe('an answer given again while nothing it was read from changed', () => {
  it('is the same answer, until a change anywhere in the tree', () => {
    const listings = new Listings();
    const tree = join(root, 'again');
    mkdirSync(join(tree, 'p', 'q'), { recursive: true });
    writeFileSync(join(tree, '.envrc'), '');
    const first = findProtected([tree], DEFAULT_PROTECT, listings);
    expect(findProtected([tree], DEFAULT_PROTECT, listings)).toBe(first);
    writeFileSync(join(tree, 'p', 'q', 'plain.txt'), '');
    const second = findProtected([tree], DEFAULT_PROTECT, listings);
    expect(second).not.toBe(first);
    expect(second).toEqual(first);
    listings.close();
  });

  it('is read anew at every walk where a listing could not be watched (the watches spent)', () => {
    const listings = new Listings({ watches: 1 });
    const tree = join(root, 'budget');
    mkdirSync(join(tree, 'p', 'q'), { recursive: true });
    const first = findProtected([tree], DEFAULT_PROTECT, listings);
    expect(findProtected([tree], DEFAULT_PROTECT, listings)).not.toBe(first);
    writeFileSync(join(tree, 'p', 'q', '.idea'), '');
    expect(findProtected([tree], DEFAULT_PROTECT, listings).paths).toEqual([{ path: join(tree, 'p', 'q', '.idea'), how: 'ro' }]);
    listings.close();
  });

  const root0 = process.getuid?.() === 0;
  it.skipIf(!root0 || spawnSync('mount', ['--version']).status !== 0)('a file system mounted over a listed directory (no event in the directory under it): every listing read again', () => {
    const listings = new Listings();
    const tree = join(root, 'mounted');
    mkdirSync(join(tree, 'm'), { recursive: true });
    expect(findProtected([tree], DEFAULT_PROTECT, listings).paths).toEqual([]);
    const mount = spawnSync('mount', ['-t', 'tmpfs', 'none', join(tree, 'm')], { encoding: 'utf8' });
    expect(mount.status, mount.stderr).toBe(0);
    try {
      writeFileSync(join(tree, 'm', '.gitconfig'), '');
      expect(findProtected([tree], DEFAULT_PROTECT, listings).paths).toEqual([{ path: join(tree, 'm', '.gitconfig'), how: 'ro' }]);
    } finally {
      spawnSync('umount', [join(tree, 'm')]);
      listings.close();
    }
  });
});
