import { existsSync, mkdirSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { HeldChanges } from '../../../src/changes/held.js';

/**
 * The keeper's own bookkeeping, on plain directories (what an overlay writes is read.test.ts's):
 * a review that held nothing leaves no directory behind, whether it is removed at once or left
 * half-removed by a crash, and one that held something stays pending.
 */
describe('HeldChanges: reviews that held nothing', () => {
  let base: string | undefined;
  afterEach(() => {
    if (base) rmSync(base, { recursive: true, force: true });
    base = undefined;
  });

  function setUp() {
    base = mkdtempSync(join(tmpdir(), 'procctl-held-'));
    const state = join(base, 'state');
    const ws = join(base, 'ws');
    mkdirSync(ws);
    const held = new HeldChanges(state);
    const begin = (id: string) => {
      held.begin(id, ws, Date.now());
      for (const d of ['upper', 'work/work']) mkdirSync(join(held.dirOf(id), d), { recursive: true });
    };
    return { state, ws, held, begin, root: join(state, 'changes') };
  }

  it('a review with an empty upper directory settles as none and its directory goes', async () => {
    const { held, begin, root } = setUp();
    begin('aaaaaaaa');
    expect(held.settle('aaaaaaaa')).toMatchObject({ state: 'none', pending: false, files: 0 });
    expect(existsSync(held.dirOf('aaaaaaaa'))).toBe(false);
    // Removed in the background: nothing is left under the changes directory once it is done.
    // (The next review's directory, made ahead, is all there is.)
    await vi.waitFor(() => expect(readdirSync(root).filter((n) => !n.startsWith('.spare-'))).toEqual([]), { timeout: 10_000, interval: 20 });
  });

  it('a review that wrote a file stays pending with its count, beside one that wrote nothing', () => {
    const { held, begin } = setUp();
    begin('bbbbbbbb');
    begin('cccccccc');
    writeFileSync(join(held.dirOf('bbbbbbbb'), 'upper', 'new.txt'), 'hello\n');
    expect(held.settle('bbbbbbbb')).toMatchObject({ state: 'pending', pending: true, files: 1, bytes: 6 });
    expect(held.settle('cccccccc')).toMatchObject({ state: 'none' });
    expect(existsSync(join(held.dirOf('bbbbbbbb'), 'upper', 'new.txt'))).toBe(true);
  });

  it('a removal cut short (a crash) is finished at the next start, and is not taken for a review', () => {
    const { held, begin, root, state } = setUp();
    begin('dddddddd');
    writeFileSync(join(held.dirOf('dddddddd'), 'upper', 'kept.txt'), 'x\n');
    // What a crash mid-removal leaves: a renamed directory with its layout still inside.
    mkdirSync(join(root, '.removing-eeeeeeee-1-0', 'upper'), { recursive: true });
    writeFileSync(join(root, '.removing-eeeeeeee-1-0', 'layout.json'), '{}');
    const seen: string[] = [];
    new HeldChanges(state).load((id) => seen.push(id));
    expect(seen).toEqual(['dddddddd']);
    expect(readdirSync(root).filter((n) => n.startsWith('.'))).toEqual([]);
  });

  it('a review whose job outlived the last run is running, not pending, until the caller settles it once the job is gone', async () => {
    const { held, begin, state } = setUp();
    begin('ffffffff');
    writeFileSync(join(held.dirOf('ffffffff'), 'upper', 'still-writing.txt'), 'part\n');
    const after = new HeldChanges(state);
    const seen = new Map<string, unknown>();
    after.load((id, summary) => seen.set(id, summary), (id) => id === 'ffffffff');
    expect(seen.get('ffffffff')).toMatchObject({ state: 'running', pending: false });
    // Nothing of a running job's changes is applied.
    await expect(after.apply('ffffffff')).rejects.toThrow(/still running/);
    writeFileSync(join(held.dirOf('ffffffff'), 'upper', 'still-writing.txt'), 'whole\n');
    expect(after.settle('ffffffff')).toMatchObject({ state: 'pending', pending: true, files: 1, bytes: 6 });
  });

  it('a review takes the directory made ahead for it, and a restart removes one it left', async () => {
    const { state, ws, held, root } = setUp();
    held.begin('gggggggg', ws, Date.now());
    const spares = () => readdirSync(root).filter((n) => n.startsWith('.spare-'));
    // Ready once the keeper holds it, not as soon as its directory shows (its work directory may still be on the way).
    const ready = () => (held as unknown as { spares: string[] }).spares.length;
    await vi.waitFor(() => expect(ready()).toBe(1), { timeout: 10_000, interval: 20 });
    const [made] = spares();
    held.begin('hhhhhhhh', ws, Date.now());
    expect(existsSync(join(root, made))).toBe(false);
    for (const d of ['upper', 'work']) expect(existsSync(join(held.dirOf('hhhhhhhh'), d))).toBe(true);
    await vi.waitFor(() => expect(spares()).toHaveLength(1), { timeout: 10_000, interval: 20 });
    const [left] = spares();
    // The restart removes the spare it finds, and settles the two reviews: they held nothing, and become its spares.
    const next = new HeldChanges(state);
    next.load(() => undefined);
    expect(spares()).not.toContain(left);
    expect(existsSync(held.dirOf('gggggggg'))).toBe(false);
    await vi.waitFor(() => expect(spares()).toHaveLength(2), { timeout: 10_000, interval: 20 });
  });

  it('a review that held nothing becomes the next one\'s directory, emptied of the kernel\'s leftovers; one with anything in its upper directory does not', async () => {
    const { ws, held, root } = setUp();
    const spares = () => readdirSync(root).filter((n) => n.startsWith('.spare-'));
    held.begin('iiiiiiii', ws, Date.now());
    await vi.waitFor(() => expect(spares()).toHaveLength(1), { timeout: 10_000, interval: 20 });
    // What a volatile overlay's mount leaves in the work directory, as the kernel makes it.
    const work = join(held.dirOf('iiiiiiii'), 'work');
    mkdirSync(join(work, 'work', 'incompat', 'volatile'), { recursive: true });
    writeFileSync(join(work, 'work', 'incompat', 'volatile', 'dirty'), '');
    expect(held.settle('iiiiiiii')).toMatchObject({ state: 'none' });
    // Out of the way at once; a spare once the kernel's leftovers are out, off the caller's path.
    expect(existsSync(held.dirOf('iiiiiiii'))).toBe(false);
    await vi.waitFor(() => expect(spares()).toHaveLength(2), { timeout: 10_000, interval: 20 });
    const now = spares();
    for (const s of now) {
      expect(readdirSync(join(root, s)).sort()).toEqual(['upper', 'work']);
      expect(readdirSync(join(root, s, 'work'))).toEqual([]);
    }
    // Both spares are taken before another is made. A directory the kernel copied up and the job emptied again
    // (a file made and removed in it) changes nothing, but is in the upper directory: not recycled.
    mkdirSync(join(ws, 'existing'), { mode: 0o755 });
    held.begin('jjjjjjjj', ws, Date.now());
    held.begin('kkkkkkkk', ws, Date.now());
    mkdirSync(join(held.dirOf('kkkkkkkk'), 'upper', 'existing'), { mode: 0o755 });
    expect(held.settle('kkkkkkkk')).toMatchObject({ state: 'none' });
    // Removed, not recycled: nothing of it is left once the removal is done, and no spare has anything in its upper directory.
    await vi.waitFor(() => expect(readdirSync(root).filter((n) => n.startsWith('.removing-'))).toEqual([]), { timeout: 10_000, interval: 20 });
    expect(spares().filter((s) => readdirSync(join(root, s, 'upper')).length > 0)).toEqual([]);
  });
});
