import { spawnSync } from 'node:child_process';
import { chmodSync, chownSync, closeSync, copyFileSync, existsSync, mkdirSync, mkdtempSync, openSync, renameSync, rmSync, utimesSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DEFAULT_PROTECT } from '../../../src/config/schema.js';
import { Listings } from '../../../src/sandbox/listings.js';
import { findProtected } from '../../../src/sandbox/protect.js';

const root = mkdtempSync(join(tmpdir(), 'procctl-protect-'));
afterAll(() => rmSync(root, { recursive: true, force: true }));

/** What the walk gives a git directory with no hooks yet: pinned, and an empty read-only hooks. */
const newRepo = (dir: string) => [
  { path: join(dir, '.git'), how: 'pin' },
  { path: join(dir, '.git', 'hooks'), how: 'empty' },
];

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
    expect(found(tree)).toEqual(newRepo(join(tree, 'a', 'd')));
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

  it('a directory a process holds open, renamed over by a repository (its own event waits for the last holder)', () => {
    const tree = join(root, `${i}-pinned`);
    mkdirSync(join(tree, 'x'), { recursive: true });
    mkdirSync(join(tree, 'repo', '.git'), { recursive: true });
    expect(found(tree)).toEqual(newRepo(join(tree, 'repo')));
    const held = openSync(join(tree, 'x'), 'r');
    try {
      renameSync(join(tree, 'repo'), join(tree, 'x'));
      expect(found(tree)).toEqual(newRepo(join(tree, 'x')));
    } finally {
      closeSync(held);
    }
  });

  it('a tree listed as its own root, then reached from a root above it after a directory between was replaced', () => {
    const top = join(root, `${i}-nested`);
    mkdirSync(join(top, 'a', 'b'), { recursive: true });
    expect(found(join(top, 'a', 'b'))).toEqual([]);
    renameSync(join(top, 'a'), join(top, 'a-old'));
    mkdirSync(join(top, 'a', 'b', '.git'), { recursive: true });
    expect(found(top)).toEqual(newRepo(join(top, 'a', 'b')));
  });

  it("a root whose own listing was let go by a file made in it, then given a new directory by a rename above it", () => {
    const above = join(root, `${i}-above2`);
    const tree = join(above, 'ws');
    mkdirSync(join(tree, 'proj'), { recursive: true });
    expect(found(tree)).toEqual([]);
    writeFileSync(join(tree, 'notes.txt'), '');
    expect(found(tree)).toEqual([]);
    writeFileSync(join(tree, 'more.txt'), '');
    renameSync(above, join(root, `${i}-above2-old`));
    mkdirSync(join(tree, 'proj', '.git'), { recursive: true });
    expect(found(tree)).toEqual(newRepo(join(tree, 'proj')));
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

  it("is not given once a directory's mode changed (what the walk may list of it), and still is after a file's did", () => {
    const listings = new Listings();
    const tree = join(root, 'modes');
    mkdirSync(join(tree, 'p'), { recursive: true });
    writeFileSync(join(tree, 'p', 'f'), '');
    const first = findProtected([tree], DEFAULT_PROTECT, listings);
    chmodSync(join(tree, 'p', 'f'), 0o600);
    expect(findProtected([tree], DEFAULT_PROTECT, listings)).toBe(first);
    chmodSync(join(tree, 'p'), 0o700);
    expect(findProtected([tree], DEFAULT_PROTECT, listings)).not.toBe(first);
    listings.close();
  });

  it('a directory holding a name that is not UTF-8 (what is under it could not be named to bind) is read-only whole', () => {
    const listings = new Listings();
    const tree = join(root, 'bytes');
    mkdirSync(join(tree, 'sub'), { recursive: true });
    const odd = Buffer.concat([Buffer.from(`${join(tree, 'sub')}/`), Buffer.from([0x72, 0x65, 0xff])]);
    mkdirSync(Buffer.concat([odd, Buffer.from('/.git/hooks')]), { recursive: true });
    expect(findProtected([tree], DEFAULT_PROTECT, listings).paths).toEqual([{ path: join(tree, 'sub'), how: 'ro' }]);
    // Kept, and still said so.
    expect(findProtected([tree], DEFAULT_PROTECT, listings).paths).toEqual([{ path: join(tree, 'sub'), how: 'ro' }]);
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

  const dist = join(process.cwd(), 'dist', 'src', 'sandbox', 'protect.js');
  it.skipIf(!root0 || spawnSync('setpriv', ['--version']).status !== 0 || !existsSync(dist))(
    'a directory the walk cannot list or look into (a job of the daemon\'s user made it mode 000, or 644, to hide its .git) is read-only whole',
    () => {
      const base = mkdtempSync(join(tmpdir(), 'procctl-protect-user-'));
      try {
        chmodSync(base, 0o755);
        const tree = join(base, 'ws');
        mkdirSync(join(tree, 'd', '.git', 'hooks'), { recursive: true });
        // Readable but not searchable: its entries are listed, and none of them can be looked at.
        mkdirSync(join(tree, 'e', 'sub', '.git'), { recursive: true });
        for (const p of [tree, join(tree, 'd'), join(tree, 'd', '.git'), join(tree, 'd', '.git', 'hooks'), join(tree, 'e'), join(tree, 'e', 'sub'), join(tree, 'e', 'sub', '.git')]) chownSync(p, 65534, 65534);
        chmodSync(join(tree, 'd'), 0);
        chmodSync(join(tree, 'e'), 0o644);
        // The walk's own modules, where that user can read them (the checkout need not be).
        const code = join(base, 'code');
        for (const f of ['sandbox/protect.js', 'sandbox/listings.js', 'base/addon.js', 'base/close-quietly.js']) {
          mkdirSync(dirname(join(code, f)), { recursive: true, mode: 0o755 });
          copyFileSync(join(dirname(dist), '..', f), join(code, f));
          chmodSync(join(code, f), 0o644);
        }
        writeFileSync(join(code, 'package.json'), '{"type":"module"}\n', { mode: 0o644 });
        const script = `import(process.argv[1]).then((m) => console.log(JSON.stringify(m.findProtected([process.argv[2]], JSON.parse(process.argv[3])).paths)))`;
        const r = spawnSync('setpriv', ['--reuid=65534', '--regid=65534', '--clear-groups', process.execPath, '--input-type=module', '-e', script, pathToFileURL(join(code, 'sandbox', 'protect.js')).href, tree, JSON.stringify(DEFAULT_PROTECT)], { encoding: 'utf8', cwd: base });
        expect(r.status, r.stderr).toBe(0);
        expect(JSON.parse(r.stdout)).toEqual(
          expect.arrayContaining([
            { path: join(tree, 'd'), how: 'ro' },
            { path: join(tree, 'e'), how: 'ro' },
          ]),
        );
        expect(JSON.parse(r.stdout)).toHaveLength(2);
      } finally {
        rmSync(base, { recursive: true, force: true });
      }
    },
  );
});
