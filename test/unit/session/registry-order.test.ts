import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import type { Session } from '../../../src/session/session.js';
import { ALL_SCOPES, Registry } from '../../../src/session/registry.js';
import { makeSession } from './make-session.js';

const SCOPES = ['alice', 'bob', 'carol'];

const session = (id: string, scope: string) => makeSession(id, scope);

/**
 * The page as it was made before the registry kept its orders: every session in the order added
 * (a Map, where a replaced id keeps its place), filtered by scope, newest first, then sliced; the
 * running ones counted by walking them.
 */
function plainPage(all: Map<string, Session>, scope: string, offset = 0, limit = Number.POSITIVE_INFINITY) {
  const of = [...all.values()].filter((s) => scope === ALL_SCOPES || s.scope === scope).reverse();
  return {
    ids: of.slice(offset, offset + limit).map((s) => s.id),
    total: of.length,
    running: of.filter((s) => s.running).length,
  };
}

type Op =
  | { kind: 'start'; scope: number; ended: boolean }
  | { kind: 'end'; pick: number }
  | { kind: 'remove'; pick: number }
  | { kind: 'replace'; pick: number; scope: number | undefined; ended: boolean }
  | { kind: 'page'; scope: number; offset: number; limit: number | undefined };

const op: fc.Arbitrary<Op> = fc.oneof(
  { weight: 5, arbitrary: fc.record({ kind: fc.constant('start' as const), scope: fc.nat(SCOPES.length - 1), ended: fc.boolean() }) },
  { weight: 2, arbitrary: fc.record({ kind: fc.constant('end' as const), pick: fc.nat() }) },
  { weight: 2, arbitrary: fc.record({ kind: fc.constant('remove' as const), pick: fc.nat() }) },
  {
    weight: 1,
    arbitrary: fc.record({ kind: fc.constant('replace' as const), pick: fc.nat(), scope: fc.option(fc.nat(SCOPES.length - 1), { nil: undefined, freq: 4 }), ended: fc.boolean() }),
  },
  {
    weight: 3,
    arbitrary: fc.record({ kind: fc.constant('page' as const), scope: fc.nat(SCOPES.length + 1), offset: fc.nat(40), limit: fc.option(fc.nat(30), { nil: undefined }) }),
  },
);

describe('Registry.page against the plain filter and sort', () => {
  it('property: the same sessions in the same order, the same total and running count, through starts, ends, removals and replacements', () => {
    fc.assert(
      fc.property(fc.array(op, { maxLength: 300 }), (ops) => {
        const r = new Registry();
        const plain = new Map<string, Session>();
        let next = 0;
        const pick = (n: number) => {
          const ids = [...plain.keys()];
          return ids.length === 0 ? undefined : ids[n % ids.length];
        };
        const check = (scope: string, offset?: number, limit?: number) => {
          const want = plainPage(plain, scope, offset, limit);
          const got = r.page(scope, offset, limit);
          expect({ ids: got.sessions.map((s) => s.id), total: got.total, running: got.running }).toEqual(want);
        };
        for (const o of ops) {
          if (o.kind === 'start') {
            const s = session(`s${next++}`, SCOPES[o.scope]);
            if (o.ended) s.finish({ exitCode: 0, signal: null });
            r.add(s);
            plain.set(s.id, s);
          } else if (o.kind === 'end') {
            const id = pick(o.pick);
            if (id !== undefined) plain.get(id)!.finish({ exitCode: 1, signal: null });
          } else if (o.kind === 'remove') {
            const id = pick(o.pick) ?? 'nothing';
            r.delete(id);
            plain.delete(id);
          } else if (o.kind === 'replace') {
            const id = pick(o.pick);
            if (id === undefined) continue;
            const s = session(id, o.scope === undefined ? plain.get(id)!.scope : SCOPES[o.scope]);
            if (o.ended) s.finish({ exitCode: 0, signal: null });
            r.add(s);
            plain.set(id, s);
          } else {
            // A scope with no sessions ever (dave) and every scope ("*") too.
            check([...SCOPES, 'dave', ALL_SCOPES][o.scope], o.offset, o.limit);
          }
        }
        for (const scope of [...SCOPES, ALL_SCOPES]) check(scope);
        const running = [...plain.values()].filter((s) => s.running).length;
        expect(r.counts()).toEqual({ running, finished: plain.size - running });
      }),
      { numRuns: 300 },
    );
  });

  it('a replaced session that ends later is counted once; the one it replaced ending changes nothing', () => {
    const r = new Registry();
    const first = session('aaaa', 'alice');
    r.add(first);
    r.add(session('bbbb', 'alice'));
    const second = session('aaaa', 'alice');
    r.add(second);
    expect(r.page('alice')).toMatchObject({ total: 2, running: 2 });
    first.finish({ exitCode: 0, signal: null });
    expect(r.page('alice').running).toBe(2);
    second.finish({ exitCode: 0, signal: null });
    expect(r.page('alice').running).toBe(1);
    expect(r.page('alice').sessions.map((s) => s.id)).toEqual(['bbbb', 'aaaa']);
  });

  it('a page after many removals is read from the newest end, and the removed leave no trace in any scope', () => {
    const r = new Registry();
    const all: Session[] = [];
    for (let i = 0; i < 1000; i++) {
      const s = session(`s${i}`, SCOPES[i % 2]);
      r.add(s);
      all.push(s);
    }
    // Every third removed, the newest few ended.
    for (let i = 0; i < 1000; i += 3) r.delete(`s${i}`);
    for (let i = 990; i < 1000; i++) all[i].finish({ exitCode: 0, signal: null });
    const kept = all.filter((_, i) => i % 3 !== 0);
    const alice = kept.filter((s) => s.scope === 'alice').reverse();
    expect(r.page('alice', 0, 50).sessions).toEqual(alice.slice(0, 50));
    expect(r.page('alice', 300, 50).sessions).toEqual(alice.slice(300, 350));
    expect(r.page(ALL_SCOPES, 0, 5).sessions).toEqual(kept.slice(-5).reverse());
    expect(r.page(ALL_SCOPES).total).toBe(kept.length);
    expect(r.page(ALL_SCOPES).running).toBe(kept.filter((s) => s.running).length);
    for (const s of all) r.delete(s.id);
    expect(r.page('alice')).toEqual({ sessions: [], total: 0, running: 0 });
    expect(r.page(ALL_SCOPES)).toEqual({ sessions: [], total: 0, running: 0 });
  });

  it('a page of 50 of 1,000 sessions looks at no session outside it: not its scope, not whether it runs', () => {
    const r = new Registry();
    let looks = 0;
    for (let i = 0; i < 1000; i++) {
      const s = session(`s${i}`, SCOPES[i % 3]);
      r.add(s);
      // Counted from here on: what the page reads of each session.
      const scope = s.scope;
      Object.defineProperty(s, 'scope', { get: () => (looks++, scope) });
      const proto = Object.getPrototypeOf(s) as object;
      const running = Object.getOwnPropertyDescriptor(proto, 'running')!.get!;
      Object.defineProperty(s, 'running', { get: () => (looks++, running.call(s)) });
    }
    const page = r.page('bob', 0, 50);
    expect(page.sessions).toHaveLength(50);
    expect(page.total).toBe(333);
    expect(looks).toBeLessThanOrEqual(50);
    looks = 0;
    expect(r.page(ALL_SCOPES, 900, 50).sessions[0].id).toBe('s99');
    expect(looks).toBeLessThanOrEqual(50);
  });
});
