import { appendFileSync, mkdtempSync, readFileSync, readdirSync, rmSync, truncateSync, writeFileSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pino from 'pino';
import { afterEach, describe, expect, it } from 'vitest';
import { AuditBus, type AuditEvent } from '../../src/audit/events.js';
import { queryHistory } from '../../src/audit/history.js';
import { GENESIS, hashOf, lineOf } from '../../src/audit/line.js';
import { verifyTrail } from '../../src/audit/verify.js';
import { AuditTrail } from '../../src/audit/writer.js';

const log = pino({ level: 'silent' });
const dirs: string[] = [];
afterEach(() => {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

function trail(limits = { enabled: true, maxBytes: 256 * 1024 * 1024, days: 90 }) {
  const dir = mkdtempSync(join(tmpdir(), 'procctl-audit-'));
  dirs.push(dir);
  const bus = new AuditBus();
  const t = new AuditTrail(dir, limits, log);
  t.open(bus);
  return { dir, bus, t };
}

const started = (id: string, command = `echo ${id}`, scope = 'default'): AuditEvent => ({
  type: 'session', sessionId: id, scope, peer: { uid: 1000, pid: 42, exe: '/usr/bin/node' }, client: { kind: 'cli' }, host: 'h', command, workdir: '/tmp', sandbox: 'off', network: 'host', changes: 'direct', elevated: false,
});
const ended = (id: string, status = 'completed', exit: number | null = 0, scope = 'default'): AuditEvent => ({
  type: 'end', sessionId: id, scope, status, exit, signal: null, reason: null, runtimeMs: 5, resources: null, outputBytes: 3,
});

async function sessions(n: number) {
  const x = trail();
  for (let i = 0; i < n; i++) {
    x.bus.emit(started(`s${i}`));
    x.bus.emit(ended(`s${i}`, i % 3 === 0 ? 'failed' : 'completed', i % 3 === 0 ? 1 : 0));
  }
  await x.t.flushed();
  const file = join(x.dir, 'audit-1.jsonl');
  return { ...x, file, lines: () => readFileSync(file, 'utf8').split('\n').slice(0, -1) };
}

async function until(cond: () => boolean, ms = 10_000): Promise<void> {
  const deadline = Date.now() + ms;
  while (!cond()) {
    if (Date.now() > deadline) throw new Error('timed out');
    await new Promise((r) => setTimeout(r, 10));
  }
}

const rewrite = (file: string, lines: string[]) => writeFileSync(file, `${lines.join('\n')}\n`);

describe('the audit trail', () => {
  it('writes one line per event, each naming the hash of the line before; the first names the genesis', async () => {
    const { lines, t } = await sessions(3);
    const l = lines();
    expect(l).toHaveLength(6);
    const recs = l.map((x) => JSON.parse(x));
    expect(recs.map((r) => r.seq)).toEqual([1, 2, 3, 4, 5, 6]);
    expect(recs[0].prev).toBe(GENESIS);
    for (let i = 1; i < l.length; i++) expect(recs[i].prev).toBe(hashOf(l[i - 1]));
    expect(recs[0]).toMatchObject({ type: 'session', sessionId: 's0', peer: { uid: 1000, pid: 42, exe: '/usr/bin/node' } });
    expect(t.lastWritten()).toEqual({ seq: 6, hash: hashOf(l[5]) });
  });

  it('an untouched trail verifies', async () => {
    const { dir, t } = await sessions(50);
    expect(verifyTrail(dir, t.lastWritten())).toEqual({ ok: true, records: 100, files: 1 });
  });

  it('an edited record is named as changed', async () => {
    const { dir, file, lines } = await sessions(10);
    const l = lines();
    l[6] = l[6].replace('echo s3', 'echo s3 && rm -rf /');
    rewrite(file, l);
    expect(verifyTrail(dir).firstBad).toEqual({ file: 'audit-1.jsonl', line: 7, why: 'changed' });
  });

  it("an edit of a record's own link is named at that record", async () => {
    const { dir, file, lines } = await sessions(10);
    const l = lines();
    l[4] = l[4].replace(/"prev":"[0-9a-f]{64}"/, `"prev":"${'1'.repeat(64)}"`);
    rewrite(file, l);
    expect(verifyTrail(dir).firstBad).toEqual({ file: 'audit-1.jsonl', line: 5, why: 'changed' });
  });

  it('an edit of the newest record is seen against what the daemon last wrote', async () => {
    const { dir, file, lines, t } = await sessions(3);
    const l = lines();
    l[5] = l[5].replace('"exit":0', '"exit":1');
    rewrite(file, l);
    expect(verifyTrail(dir, t.lastWritten()).firstBad).toEqual({ file: 'audit-1.jsonl', line: 6, why: 'changed' });
  });

  it('a deleted record is named as missing', async () => {
    const { dir, file, lines } = await sessions(10);
    const l = lines();
    l.splice(8, 1);
    rewrite(file, l);
    expect(verifyTrail(dir).firstBad).toEqual({ file: 'audit-1.jsonl', line: 9, why: 'missing' });
  });

  it('two swapped records are named as reordered', async () => {
    const { dir, file, lines } = await sessions(10);
    const l = lines();
    [l[10], l[11]] = [l[11], l[10]];
    rewrite(file, l);
    expect(verifyTrail(dir).firstBad).toEqual({ file: 'audit-1.jsonl', line: 11, why: 'reordered' });
  });

  it('a last line cut mid-record is torn, not an edit; the next start goes on after it and the trail verifies again', async () => {
    const { dir, file, t } = await sessions(5);
    t.close();
    truncateSync(file, statSync(file).size - 30);
    const bad = verifyTrail(dir);
    expect(bad.ok).toBe(false);
    expect(bad.firstBad).toEqual({ file: 'audit-1.jsonl', line: 10, why: 'torn' });
    // The next run: it ends the torn line, says so in a record naming it, and chains on from the last whole record.
    const bus = new AuditBus();
    const next = new AuditTrail(dir, { enabled: true, maxBytes: 256 * 1024 * 1024, days: 90 }, log);
    next.open(bus);
    bus.emit(started('after'));
    await next.flushed();
    const r = verifyTrail(dir, next.lastWritten());
    expect(r).toMatchObject({ ok: true, torn: [{ file: 'audit-1.jsonl', line: 10 }] });
    const last = readFileSync(file, 'utf8').split('\n').slice(-3, -1).map((x) => JSON.parse(x));
    expect(last[0]).toMatchObject({ type: 'audit', event: 'torn', file: 'audit-1.jsonl', line: 10, seq: 10 });
    expect(last[1]).toMatchObject({ type: 'session', sessionId: 'after', seq: 11 });
    next.close();
  });

  it('a line that is not a record in the middle of the trail is an edit, not a tear', async () => {
    const { dir, file, lines } = await sessions(5);
    const l = lines();
    l[3] = l[3].slice(0, 40);
    rewrite(file, l);
    expect(verifyTrail(dir).firstBad).toEqual({ file: 'audit-1.jsonl', line: 4, why: 'changed' });
  });

  it('a trail of many files is read a file or two at a time, and an edit or a swap across two files is still named', async () => {
    const { dir, bus, t } = trail({ enabled: true, maxBytes: 256 * 1024, days: 90 });
    for (let round = 0; round < 20; round++) {
      for (let i = 0; i < 20; i++) bus.emit(started(`m${round}x${i}`, `echo ${'y'.repeat(100)}`));
      await t.flushed();
    }
    const files = readdirSync(dir).filter((f) => f.endsWith('.jsonl')).sort((a, b) => parseInt(a.slice(6), 10) - parseInt(b.slice(6), 10));
    expect(files.length).toBeGreaterThan(4);
    expect(verifyTrail(dir, t.lastWritten())).toMatchObject({ ok: true, records: 400, files: files.length });
    t.close();
    const linesOf = (f: string) => readFileSync(join(dir, f), 'utf8').split('\n').slice(0, -1);
    // An edit in a middle file: named by its file and line.
    const middle = files[2];
    const saved = readFileSync(join(dir, middle), 'utf8');
    const l = linesOf(middle);
    l[3] = l[3].replace('echo y', 'echo z');
    rewrite(join(dir, middle), l);
    expect(verifyTrail(dir).firstBad).toEqual({ file: middle, line: 4, why: 'changed' });
    writeFileSync(join(dir, middle), saved);
    // The last record of one file swapped with the first of the next: found by looking into the next file.
    const [a, b] = [files[1], files[2]];
    const la = linesOf(a);
    const lb = linesOf(b);
    [la[la.length - 1], lb[0]] = [lb[0], la[la.length - 1]];
    rewrite(join(dir, a), la);
    rewrite(join(dir, b), lb);
    expect(verifyTrail(dir).firstBad).toEqual({ file: a, line: la.length, why: 'reordered' });
  });

  it('rotates by whole files, removes the oldest past maxBytes, records each removal, and still verifies', async () => {
    const { dir, bus, t } = trail({ enabled: true, maxBytes: 64 * 1024, days: 90 });
    for (let round = 0; round < 40; round++) {
      for (let i = 0; i < 20; i++) bus.emit(started(`r${round}x${i}`, `echo ${'x'.repeat(100)}`));
      await t.flushed();
    }
    const files = readdirSync(dir).filter((f) => f.endsWith('.jsonl'));
    expect(files.length).toBeGreaterThan(2);
    expect(files).not.toContain('audit-1.jsonl');
    const total = files.reduce((n, f) => n + statSync(join(dir, f)).size, 0);
    expect(total).toBeLessThanOrEqual(64 * 1024 + 8 * 1024 + 4096);
    const all = files.flatMap((f) => readFileSync(join(dir, f), 'utf8').split('\n').filter(Boolean).map((x) => JSON.parse(x)));
    expect(all.some((r) => r.type === 'audit' && r.event === 'removed' && r.why === 'maxBytes')).toBe(true);
    const v = verifyTrail(dir, t.lastWritten());
    expect(v.ok).toBe(true);
    expect(v.removed).toBeGreaterThan(0);
    expect(t.status()).toMatchObject({ files: files.length, failedWrites: 0, lostRecords: 0 });
  });

  it('removing the oldest file by hand is named as missing', async () => {
    const { dir, bus, t } = trail({ enabled: true, maxBytes: 10 * 1024 * 1024, days: 90 });
    // Small files: maxBytes/8 is 1.25 MiB; write enough for two.
    for (let round = 0; round < 50; round++) {
      for (let i = 0; i < 100; i++) bus.emit(started(`m${round}x${i}`, `echo ${'y'.repeat(200)}`));
      await t.flushed();
    }
    expect(readdirSync(dir).length).toBeGreaterThan(1);
    rmSync(join(dir, 'audit-1.jsonl'));
    expect(verifyTrail(dir).firstBad).toEqual({ file: 'audit-2.jsonl', line: 1, why: 'missing' });
  });

  it('events past the queue bound are dropped, counted, and said in the trail, which still verifies', async () => {
    const { dir, bus, t } = trail();
    for (let i = 0; i < 100_005; i++) bus.emit(ended(`q${i}`));
    await t.flushed();
    expect(t.status()).toMatchObject({ lostRecords: 5, records: 100_001 });
    const last = JSON.parse(readFileSync(join(dir, readdirSync(dir).sort().at(-1)!), 'utf8').trimEnd().split('\n').at(-1)!);
    expect(last).toMatchObject({ type: 'audit', event: 'lost', records: 5, seq: 100_001 });
    expect(verifyTrail(dir, t.lastWritten())).toMatchObject({ ok: true, records: 100_001, lost: 5 });
  });

  it('a write the disk refuses is counted and retried; the daemon goes on', async () => {
    const { dir, bus, t } = trail();
    bus.emit(started('a'));
    await t.flushed();
    // Take the file's descriptor away underneath it: the next write fails (EBADF) and is counted.
    const fd = (t as unknown as { fd: number }).fd;
    (t as unknown as { fd: number }).fd = 999_999;
    bus.emit(started('b'));
    await until(() => t.status().failedWrites === 1);
    expect(t.status()).toMatchObject({ writable: false, failedWrites: 1 });
    (t as unknown as { fd: number }).fd = fd;
    await t.flushed();
    expect(t.status()).toMatchObject({ writable: true, lostRecords: 0 });
    expect(verifyTrail(dir, t.lastWritten())).toMatchObject({ ok: true, records: 2 });
  });
});

describe('history from the trail', () => {
  it('finds sessions by time, scope, status and text, newest first and paged, with their ends', async () => {
    const { dir, bus, t } = trail();
    bus.emit(started('one', 'make build', 'a'));
    bus.emit(ended('one', 'completed', 0, 'a'));
    bus.emit(started('two', 'make test', 'b'));
    bus.emit(ended('two', 'failed', 2, 'b'));
    bus.emit(started('three', 'echo "quoted"', 'a'));
    await t.flushed();
    const q = { offset: 0, limit: 50 };
    expect((await queryHistory(dir, q)).sessions.map((s) => s.sessionId)).toEqual(['three', 'two', 'one']);
    expect((await queryHistory(dir, { ...q, scope: 'a' })).sessions.map((s) => s.sessionId)).toEqual(['three', 'one']);
    const failed = await queryHistory(dir, { ...q, status: 'failed' });
    expect(failed.sessions).toMatchObject([{ sessionId: 'two', status: 'failed', end: { exit: 2 } }]);
    expect((await queryHistory(dir, { ...q, grep: 'MAKE' })).total).toBe(2);
    expect((await queryHistory(dir, { ...q, grep: '"quoted"' })).sessions.map((s) => s.sessionId)).toEqual(['three']);
    expect((await queryHistory(dir, { ...q, status: 'running' })).sessions.map((s) => s.sessionId)).toEqual(['three']);
    const page = await queryHistory(dir, { offset: 1, limit: 1 });
    expect(page).toMatchObject({ total: 3, sessions: [{ sessionId: 'two' }] });
    const future = new Date(Date.now() + 60_000).toISOString();
    expect((await queryHistory(dir, { ...q, since: future })).total).toBe(0);
    const story = await queryHistory(dir, { ...q, sessionId: 'two' });
    expect(story.records?.map((r) => r.type)).toEqual(['session', 'end']);
  });

  it('finds the window inside a file by bisection: every session from since on, none before', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'procctl-audit-'));
    dirs.push(dir);
    const t0 = Date.parse('2026-01-01T00:00:00Z');
    let prev = GENESIS;
    let text = '';
    for (let i = 0; i < 1000; i++) {
      const line = lineOf(i + 1, new Date(t0 + i * 60_000).toISOString(), prev, started(`b${i}`) as unknown as Record<string, unknown>);
      prev = hashOf(line);
      text += `${line}\n`;
    }
    writeFileSync(join(dir, 'audit-1.jsonl'), text);
    for (const from of [0, 1, 499, 500, 998, 999]) {
      const r = await queryHistory(dir, { since: new Date(t0 + from * 60_000).toISOString(), offset: 0, limit: 1000 });
      expect(r.total, `since minute ${from}`).toBe(1000 - from);
      expect(r.sessions.at(-1)?.sessionId).toBe(`b${from}`);
    }
    const between = await queryHistory(dir, { since: new Date(t0 + 30_000).toISOString(), until: new Date(t0 + 10 * 60_000).toISOString(), offset: 0, limit: 1000 });
    expect(between.sessions.map((s) => s.sessionId).reverse()).toEqual(['b1', 'b2', 'b3', 'b4', 'b5', 'b6', 'b7', 'b8', 'b9', 'b10']);
  });

  it('skips whole files whose last record is before the window', async () => {
    const { dir, bus, t } = trail({ enabled: true, maxBytes: 64 * 1024, days: 90 });
    for (let i = 0; i < 60; i++) bus.emit(started(`old${i}`, `echo ${'z'.repeat(200)}`));
    await t.flushed();
    // Rewrite the first file's times a day back, as an older day's file would be (the chain is not history's concern).
    const first = join(dir, 'audit-1.jsonl');
    const day = new Date(Date.now() - 86_400_000).toISOString().slice(0, 10);
    writeFileSync(first, readFileSync(first, 'utf8').replace(/"time":"\d{4}-\d{2}-\d{2}/g, `"time":"${day}`));
    appendFileSync(first, '');
    const r = await queryHistory(dir, { since: new Date(Date.now() - 3_600_000).toISOString(), offset: 0, limit: 10 });
    expect(r.scanned.skipped).toBe(1);
    expect(r.scanned.files).toBeGreaterThan(0);
  });
});
