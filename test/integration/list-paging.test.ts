import { beforeAll, describe, expect, it } from 'vitest';
import { Scopes, type Scoped, sharedDaemon } from '../helpers/session.js';

let scopes: Scopes;
sharedDaemon({}, (x) => ({ scopes } = x));

const COUNT = 60;
let s: Scoped;
/** Session ids of `s`, newest first. */
let newestFirst: string[];

const list = (extra: Record<string, unknown> = {}) => s.process({ action: 'list', ...extra });

beforeAll(async () => {
  s = scopes.next('paging');
  const ids: string[] = [];
  // One at a time, so the order they started in is known.
  for (let i = 0; i < COUNT; i++) {
    const r = await s.exec({ command: `echo ${i}`, stdin: 'null' });
    expect(r.status).toBe('completed');
    ids.push(r.sessionId);
  }
  newestFirst = ids.reverse();
  // Another scope's sessions count nowhere here.
  const other = scopes.next('paging-other');
  for (let i = 0; i < 3; i++) await other.exec({ command: 'true', stdin: 'null' });
});

describe('process list paging', () => {
  it('without limit or offset answers every session of the scope, newest first, as before', async () => {
    const r = await list();
    expect(r.sessions.map((x: any) => x.sessionId)).toEqual(newestFirst);
    expect(r).toMatchObject({ total: COUNT, offset: 0 });
    expect(r).not.toHaveProperty('limit');
    expect(r.text.split('\n')[0]).toBe(`${COUNT} session(s), 0 running:`);
    expect(r.text.split('\n')).toHaveLength(COUNT + 1);
    expect(r.text).not.toContain('Showing');
  });

  it('limit gives the newest page, total counts the whole scope, text says how to go on', async () => {
    const r = await list({ limit: 25 });
    expect(r.sessions.map((x: any) => x.sessionId)).toEqual(newestFirst.slice(0, 25));
    expect(r).toMatchObject({ total: COUNT, offset: 0, limit: 25 });
    expect(r.text).toContain(`Showing 1–25 of ${COUNT}; pass offset:25, limit:25 for more.`);
  });

  it('pages with offset and limit add up to the whole list; the last page has no hint to go on', async () => {
    const seen: string[] = [];
    for (let offset = 0; offset < COUNT; offset += 25) {
      const r = await list({ offset, limit: 25 });
      expect(r.total).toBe(COUNT);
      expect(r.offset).toBe(offset);
      seen.push(...r.sessions.map((x: any) => x.sessionId));
      if (offset + 25 >= COUNT) expect(r.text).toContain(`Showing ${offset + 1}–${COUNT} of ${COUNT}.`);
    }
    expect(seen).toEqual(newestFirst);
  });

  it('offset alone skips the newest and runs to the end', async () => {
    const r = await list({ offset: 50 });
    expect(r.sessions.map((x: any) => x.sessionId)).toEqual(newestFirst.slice(50));
    expect(r.total).toBe(COUNT);
    expect(r.text).toContain(`Showing 51–${COUNT} of ${COUNT}.`);
  });

  it('an offset past the end answers an empty page with the right total', async () => {
    const r = await list({ offset: COUNT + 40, limit: 10 });
    expect(r.sessions).toEqual([]);
    expect(r.total).toBe(COUNT);
    expect(r.text).toContain(`none at offset ${COUNT + 40}`);
    expect(r.text).toContain(`${COUNT - 1}`);
  });

  it('limit 0 only counts', async () => {
    const r = await list({ limit: 0 });
    expect(r.sessions).toEqual([]);
    expect(r.total).toBe(COUNT);
    expect(r.text).toBe(`${COUNT} session(s), 0 running.`);
  });

  it('a page holds the same records as the whole list', async () => {
    const all = await list();
    const page = await list({ offset: 10, limit: 5 });
    expect(page.sessions).toEqual(all.sessions.slice(10, 15));
  });

  it.each([
    [{ limit: -1 }, 'limit'],
    [{ limit: 2.5 }, 'limit'],
    [{ limit: '10' }, 'limit'],
    [{ limit: null }, 'limit'],
    [{ offset: -3 }, 'offset'],
    [{ offset: 1.5 }, 'offset'],
    [{ offset: 'next' }, 'offset'],
  ])('refuses %j with -32602 and the field path', async (extra, field) => {
    const e = await s.error('process', { action: 'list', ...extra });
    expect(e.code).toBe(-32602);
    expect(e.data).toMatchObject({ kind: 'invalid', path: [field] });
    expect(e.message).toContain(`${field}: must be a whole number, 0 or more`);
  });

  it('counts running sessions of the whole scope, and a new session comes first', async () => {
    const t = scopes.next('paging-running');
    for (let i = 0; i < 3; i++) await t.exec({ command: 'true', stdin: 'null' });
    const r = await t.exec({ command: 'sleep 600', stdin: 'null', background: true });
    scopes.track(r.pid);
    const page = await t.process({ action: 'list', offset: 2, limit: 2 });
    expect(page.total).toBe(4);
    expect(page.text.split('\n')[0]).toBe('4 session(s), 1 running, newest first:');
    expect((await t.process({ action: 'list', limit: 1 })).sessions.map((x: any) => x.sessionId)).toEqual([r.sessionId]);
    await t.process({ action: 'kill', sessionId: r.sessionId });
  });

  it('pages stay whole and in order while sessions start, end and are removed', async () => {
    const t = scopes.next('paging-churn');
    /** This scope's session ids, oldest first, as the test made them. */
    const made: string[] = [];
    const running = new Set<string>();
    const start = async (command: string, background: boolean) => {
      const r = await t.exec({ command, stdin: 'null', ...(background ? { background: true } : {}) });
      scopes.track(r.pid);
      made.push(r.sessionId);
      if (r.status === 'running') running.add(r.sessionId);
      return r.sessionId as string;
    };
    /** Every page of `size` against what the test knows: the ids newest first, the totals, the running count. */
    const check = async (size: number) => {
      const want = [...made].reverse();
      const seen: string[] = [];
      for (let offset = 0; offset < want.length + size; offset += size) {
        const r = await t.process({ action: 'list', offset, limit: size });
        expect(r.total).toBe(want.length);
        expect(r.text.split('\n')[0]).toMatch(new RegExp(`^${want.length} session\\(s\\), ${running.size} running`));
        seen.push(...r.sessions.map((x: any) => x.sessionId));
      }
      expect(seen).toEqual(want);
    };
    for (let i = 0; i < 6; i++) await start(i % 2 ? 'sleep 600' : `echo ${i}`, i % 2 === 1);
    await check(4);
    // One running ends (kill), one finished is cleared, one running is removed (killed, then forgotten).
    const [, second, third, fourth, , sixth] = made;
    await t.process({ action: 'kill', sessionId: second });
    await t.waitEnded(second);
    running.delete(second);
    await t.process({ action: 'clear', sessionId: third });
    made.splice(made.indexOf(third), 1);
    await t.process({ action: 'remove', sessionId: fourth });
    made.splice(made.indexOf(fourth), 1);
    running.delete(fourth);
    await check(2);
    // New ones come first; the rest keep their order.
    for (let i = 0; i < 3; i++) await start(i === 1 ? 'sleep 600' : 'true', i === 1);
    await check(3);
    await t.process({ action: 'remove', sessionId: sixth });
    made.splice(made.indexOf(sixth), 1);
    running.delete(sixth);
    await check(5);
    for (const id of [...running]) {
      await t.process({ action: 'kill', sessionId: id });
      await t.waitEnded(id);
      running.delete(id);
    }
    await check(4);
  });

  it('an empty scope has no sessions and total 0', async () => {
    const r = await scopes.next('paging-empty').process({ action: 'list', limit: 10 });
    expect(r).toMatchObject({ sessions: [], total: 0, offset: 0, limit: 10, text: 'No sessions.' });
  });
});
