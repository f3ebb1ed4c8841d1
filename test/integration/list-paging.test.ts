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

  it('an empty scope has no sessions and total 0', async () => {
    const r = await scopes.next('paging-empty').process({ action: 'list', limit: 10 });
    expect(r).toMatchObject({ sessions: [], total: 0, offset: 0, limit: 10, text: 'No sessions.' });
  });
});
