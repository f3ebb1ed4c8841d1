import { describe, expect, it } from 'vitest';
import type { Session } from '../../../src/session/session.js';
import { Registry } from '../../../src/session/registry.js';
import { makeSession } from './make-session.js';

const session = (id: string, scope: string) => makeSession(id, scope);

/** a0..a9 in scope alice, interleaved with b0..b4 in scope bob; a0 and b0 are the oldest. */
function registry(): Registry {
  const r = new Registry();
  for (let i = 0; i < 10; i++) {
    r.add(session(`a${i}`, 'alice'));
    if (i % 2 === 0) r.add(session(`b${i / 2}`, 'bob'));
  }
  return r;
}

const ids = (p: { sessions: Session[] }) => p.sessions.map((s) => s.id);

describe('Registry.page', () => {
  it('without offset or limit: the whole scope, newest first, as list() gives it', () => {
    const r = registry();
    const p = r.page('alice');
    expect(ids(p)).toEqual(['a9', 'a8', 'a7', 'a6', 'a5', 'a4', 'a3', 'a2', 'a1', 'a0']);
    expect(p.sessions).toEqual(r.list('alice'));
    expect(p.total).toBe(10);
  });

  it('takes [offset, offset + limit) of the newest-first order', () => {
    const r = registry();
    expect(ids(r.page('alice', 0, 3))).toEqual(['a9', 'a8', 'a7']);
    expect(ids(r.page('alice', 3, 3))).toEqual(['a6', 'a5', 'a4']);
    expect(ids(r.page('alice', 8, 3))).toEqual(['a1', 'a0']);
    expect(ids(r.page('alice', 7))).toEqual(['a2', 'a1', 'a0']);
    expect(ids(r.page('bob', 1, 2))).toEqual(['b3', 'b2']);
  });

  it('an offset past the end or a limit of 0 gives an empty page and the right total', () => {
    const r = registry();
    expect(r.page('alice', 10, 5)).toMatchObject({ sessions: [], total: 10 });
    expect(r.page('alice', 99)).toMatchObject({ sessions: [], total: 10 });
    expect(r.page('alice', 0, 0)).toMatchObject({ sessions: [], total: 10 });
    expect(r.page('carol', 0, 5)).toMatchObject({ sessions: [], total: 0, running: 0 });
  });

  it('counts the running sessions of the whole scope, not just the page', () => {
    const r = registry();
    r.find('alice', 'a9')!.finish({ exitCode: 0, signal: null });
    r.find('alice', 'a0')!.finish({ exitCode: 1, signal: null });
    expect(r.page('alice', 0, 1)).toMatchObject({ total: 10, running: 8 });
    expect(r.page('bob').running).toBe(5);
  });

  it('a deleted session leaves the pages', () => {
    const r = registry();
    r.delete('a8');
    expect(ids(r.page('alice', 0, 3))).toEqual(['a9', 'a7', 'a6']);
    expect(r.page('alice').total).toBe(9);
  });
});
