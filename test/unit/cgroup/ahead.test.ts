import { existsSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { CgroupsAhead } from '../../../src/cgroup/ahead.js';
import { closeCgroups, openCgroups, type CgroupLayout } from '../../../src/cgroup/host.js';
import { SessionCgroup } from '../../../src/cgroup/session.js';
import { waitFor } from '../../helpers/daemon.js';

/**
 * Session cgroups made ahead (cgroup/ahead.ts), on this machine's real cgroup2 (root only): an
 * exec takes one made off its path, under the id its session gets, and nothing made is left.
 */

const V2 = process.getuid?.() === 0 && (existsSync('/sys/fs/cgroup/unified/cgroup.procs') || existsSync('/sys/fs/cgroup/cgroup.procs'));

const undo: (() => void)[] = [];
afterEach(() => {
  for (const f of undo.splice(0).reverse()) f();
});

function layoutOf(): CgroupLayout {
  const state = mkdtempSync(join(tmpdir(), 'procctl-cgahead-'));
  undo.push(() => rmSync(state, { recursive: true, force: true }));
  const layout = openCgroups({ mode: 'v2' }, state);
  undo.push(() => closeCgroups(layout));
  return layout;
}

const sessionDirs = (layout: CgroupLayout) => readdirSync(layout.v2!).filter((n) => n.startsWith('s-')).sort();

/** Cgroups made ahead on a layout of their own, under ids `${prefix}1`, `${prefix}2`…; an id in `ids` is a session's already. Closed after the test. */
function aheadOf(prefix: string) {
  const layout = layoutOf();
  let n = 0;
  const ids = new Set<string>();
  const ahead = new CgroupsAhead(layout, () => `${prefix}${++n}`, (id) => ids.has(id));
  undo.push(() => void ahead.close());
  return { layout, ids, ahead };
}

/** Until both spares are made. */
const twoMade = (ahead: CgroupsAhead, what = 'two made ahead') => waitFor(() => ahead.ready === 2, { what });

describe.skipIf(!V2)('cgroups made ahead (v2)', () => {
  it('gives a made directory under an id no session has, and makes the next once the turn is over', async () => {
    const { layout, ahead } = aheadOf('a');
    expect(ahead.take({})).toBeUndefined(); // none made yet: the caller makes its own
    ahead.refill();
    await twoMade(ahead);
    const id = ahead.take({})!;
    expect(existsSync(SessionCgroup.v2Dir(layout, id)!)).toBe(true);
    const cg = SessionCgroup.madeAhead(layout, id, {});
    expect(cg.dirs()).toEqual([SessionCgroup.v2Dir(layout, id)]);
    expect(cg.populated()).toBe(false);
    await twoMade(ahead, 'made again');
    expect(cg.remove()).toBe(true);
  });

  it('skips one whose id a session took meanwhile, and gives none for limits that need a v1 hierarchy', async () => {
    const { layout, ids, ahead } = aheadOf('b');
    ahead.refill();
    await twoMade(ahead);
    // Drawn again by the registry for other sessions since: neither is given, both are removed.
    ids.add('b1');
    ids.add('b2');
    expect(ahead.take({})).toBeUndefined();
    expect(sessionDirs(layout)).toEqual([]);
    await twoMade(ahead, 'made again');
    expect(sessionDirs(layout)).toEqual(['s-b3', 's-b4']);
    if (!SessionCgroup.v2Only(layout, { memoryBytes: 64 * 1024 * 1024 })) expect(ahead.take({ memoryBytes: 64 * 1024 * 1024 })).toBeUndefined();
  });

  it('close also removes one taken by a start that never said it used or dropped it (it threw), and not one a session lives in', async () => {
    const { layout, ahead } = aheadOf('d');
    ahead.refill();
    await twoMade(ahead);
    const lost = ahead.take({})!;
    const kept = ahead.take({})!;
    ahead.used(kept);
    await ahead.close();
    expect(existsSync(SessionCgroup.v2Dir(layout, lost)!)).toBe(false);
    // The session's cgroup goes when the session ends, as any session's.
    expect(existsSync(SessionCgroup.v2Dir(layout, kept)!)).toBe(true);
    expect(SessionCgroup.madeAhead(layout, kept, {}).remove()).toBe(true);
  });

  it('close removes what it made, a mkdir in flight included, so the daemon\'s own cgroup can go', async () => {
    const { layout, ahead } = aheadOf('c');
    ahead.refill();
    await twoMade(ahead);
    ahead.take({});
    ahead.drop('c2');
    // A refill is due after the take, and one may be in flight: close waits for it.
    await new Promise((resolve) => setImmediate(resolve));
    await ahead.close();
    expect(sessionDirs(layout)).toEqual([]);
    expect(ahead.take({})).toBeUndefined();
  });
});
