import { mkdirSync, mkdtempSync, rmSync, utimesSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DEFAULT_PROTECT } from '../../../src/config/schema.js';
import { findProtected } from '../../../src/sandbox/protect.js';

const root = mkdtempSync(join(tmpdir(), 'procctl-protect-'));
afterAll(() => rmSync(root, { recursive: true, force: true }));

/** Trees made now, then left alone for longer than the walk waits before it trusts a listing (2 s). */
const trees = ['change', 'swap', 'backdate'].map((name) => join(root, name));
beforeAll(async () => {
  for (const tree of trees) mkdirSync(join(tree, 'a', 'b'), { recursive: true });
  await new Promise((r) => setTimeout(r, 2500));
}, 10_000);

const found = (tree: string) => findProtected([tree], DEFAULT_PROTECT).paths;

describe('the protect walk finds what is there at every start, even in trees it has listed before', () => {
  it('an entry added to a settled directory after it was listed', () => {
    const [tree] = trees;
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
    const tree = trees[1];
    expect(found(tree)).toEqual([]);
    rmSync(join(tree, 'a', 'b'), { recursive: true });
    mkdirSync(join(tree, 'a', 'b'));
    writeFileSync(join(tree, 'a', 'b', '.npmrc'), '');
    expect(found(tree)).toEqual([{ path: join(tree, 'a', 'b', '.npmrc'), how: 'ro' }]);
  });

  it("a change whose directory's mtime was then set back to what it was (as a job could)", () => {
    const tree = trees[2];
    const deep = join(tree, 'a', 'b');
    expect(found(tree)).toEqual([]);
    const before = new Date(Date.now() - 3600_000);
    utimesSync(deep, before, before);
    writeFileSync(join(deep, '.bashrc'), '');
    utimesSync(deep, before, before);
    expect(found(tree)).toEqual([{ path: join(deep, '.bashrc'), how: 'ro' }]);
  });
});
