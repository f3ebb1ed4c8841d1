import { describe, expect, it } from 'vitest';
import { waitFor, type TestDaemon } from '../helpers/daemon.js';
import type { TestClient } from '../helpers/rpc.js';
import { Scopes, sharedDaemon } from '../helpers/session.js';

const MAX = 1000;
const PENDING = 300;

let d: TestDaemon;
let c: TestClient;
let scopes: Scopes;

sharedDaemon({
    env: { PROCCTL_MAX_OUTPUT_CHARS: String(MAX), PROCCTL_PENDING_MAX_OUTPUT_CHARS: String(PENDING), PROCCTL_KILL_GRACE_MS: '1000', PROCCTL_INTERRUPT: 'false' },
  }, (x) => ({ d, c, scopes } = x));

const seqText = (n: number) => Array.from({ length: n }, (_, i) => `${i + 1}\n`).join('');

describe('retained output cap (maxOutputChars)', () => {
  it('keeps the newest characters, counts what it dropped exactly, and says so in text', async () => {
    const s = scopes.next('cap');
    const r = await s.exec({ command: 'seq 1 1000' });
    const full = seqText(1000);
    expect(r.status).toBe('completed');
    expect(r.output).toBe(full.slice(-MAX));
    expect(r.truncated).toBe(true);
    expect(r.droppedChars).toBe(full.length - MAX);
    expect(r.text).toContain(String(full.length - MAX));
    expect(r.text).toContain('1000');

    const log = await s.log(r.sessionId, { limit: 3 });
    expect(log.output).toBe('998\n999\n1000');
    // log pages over the on-disk spool (SPEC §10), so what the in-memory cap dropped is still there.
    const head = await s.log(r.sessionId, { offset: 0, limit: 2 });
    expect(head.output).toBe('1\n2');
    expect(head.totalLines).toBe(1000);
    expect(head.truncated).toBe(false);

    const listed = (await s.list())[0];
    expect(listed.truncated).toBe(true);
  });

  it('marks stderr in a page read back from the spool, past what memory keeps', async () => {
    const s = scopes.next('capstreams');
    // stderr first and alone, then more stdout than memory keeps: the head is paged from the spool.
    const r = await s.exec({ command: 'echo err-head >&2; sleep 0.1; seq 1 1000' });
    expect(r.status).toBe('completed');
    const head = await s.log(r.sessionId, { offset: 0, limit: 2 });
    expect(head.source).toBe('spool');
    expect(head.output).toBe('err-head\n1');
    expect(head.stderr).toEqual([[0, 'err-head\n'.length]]);
    expect((await s.log(r.sessionId, { offset: 1, limit: 2 })).stderr).toBeUndefined();
  });

  it('stays exact over a few megabytes of output in many chunks', async () => {
    const s = scopes.next('capbig');
    const n = 300_000;
    const r = await s.exec({ command: `seq 1 ${n}`, yieldMs: 60_000 });
    expect(r.status).toBe('completed');
    const total = seqText(n).length;
    expect(r.droppedChars).toBe(total - MAX);
    expect(r.output).toBe(seqText(n).slice(-MAX));
    const p = await s.process({ action: 'poll', sessionId: r.sessionId });
    expect(p.output).toBe(seqText(n).slice(-PENDING));
    expect(p.droppedChars).toEqual({ stdout: total - PENDING, stderr: 0 });
  });

  it('does not truncate output that fits', async () => {
    const s = scopes.next('fit');
    const r = await s.exec({ command: 'seq 1 100' });
    expect(r.output).toBe(seqText(100));
    expect(r.truncated).toBe(false);
    expect(r.droppedChars).toBe(0);
  });

  it('counts characters (not bytes) and never splits a character when dropping', async () => {
    const s = scopes.next('capmb');
    // 600 × U+1F600: 4 bytes, 2 UTF-16 code units each.
    const r = await s.exec({ command: "for i in $(seq 1 600); do printf '\\360\\237\\230\\200'; done" });
    const full = '\u{1F600}'.repeat(600);
    expect(r.droppedChars + r.output.length).toBe(full.length);
    expect(r.output).toBe(full.slice(-r.output.length));
    expect(r.output.length).toBeLessThanOrEqual(MAX);
    expect(r.output).not.toContain('\uFFFD');
    expect(r.droppedChars).toBeGreaterThan(0);
  });
});

describe('pending output cap (pendingMaxOutputChars), per stream', () => {
  it('poll returns the newest of each stream in arrival order and the dropped count of each', async () => {
    const s = scopes.next('pend');
    const r = await s.exec({
      command: "head -c 1000 /dev/zero | tr '\\0' a; read x; head -c 800 /dev/zero | tr '\\0' b >&2; exit 0",
      background: true,
    });
    scopes.track(r.pid);
    // Wait (without draining) until all of stdout is in before stderr starts.
    await waitFor(async () => (await s.log(r.sessionId)).output.length === 1000, { what: 'stdout to be captured' });
    await s.process({ action: 'write', sessionId: r.sessionId, data: '\n' });
    await s.waitEnded(r.sessionId);

    const p = await s.process({ action: 'poll', sessionId: r.sessionId });
    expect(p.status).toBe('completed');
    expect(p.output).toBe('a'.repeat(PENDING) + 'b'.repeat(PENDING));
    expect(p.droppedChars).toEqual({ stdout: 1000 - PENDING, stderr: 800 - PENDING });
    expect(p.text).toContain(String(1000 - PENDING));
    expect(p.text).toContain(String(800 - PENDING));
    expect(p.text).toContain('stdout');
    expect(p.text).toContain('stderr');

    // The dropped counts were reported once; the retained transcript has its own cap.
    const p2 = await s.process({ action: 'poll', sessionId: r.sessionId });
    expect(p2.output).toBe('');
    expect(p2.droppedChars?.stdout ?? 0).toBe(0);
    // The retained transcript kept the newest 1000 of 1800; log still has it all, from the spool.
    const list = (await s.list())[0];
    expect(list.droppedChars).toBe(800);
    expect(list.truncated).toBe(true);
    // The default page is bounded by maxOutputChars (its newest, the rest counted); a page asked for by offset is whole.
    const page = await s.log(r.sessionId);
    expect(page.output).toBe('a'.repeat(200) + 'b'.repeat(800));
    expect(page.cutChars).toBe(800);
    const log = await s.log(r.sessionId, { offset: 0 });
    expect(log.output).toBe('a'.repeat(1000) + 'b'.repeat(800));
  });

  it('counts from the last poll: a poll in between resets what is pending', async () => {
    const s = scopes.next('pend2');
    const r = await s.exec({
      command: "head -c 500 /dev/zero | tr '\\0' x; read a; head -c 350 /dev/zero | tr '\\0' y; read b",
      background: true,
    });
    scopes.track(r.pid);
    await waitFor(async () => (await s.log(r.sessionId)).output.length === 500, { what: 'first burst' });
    const p1 = await s.process({ action: 'poll', sessionId: r.sessionId });
    expect(p1.output).toBe('x'.repeat(PENDING));
    expect(p1.droppedChars).toEqual({ stdout: 200, stderr: 0 });
    await s.process({ action: 'write', sessionId: r.sessionId, data: '\n' });
    await waitFor(async () => (await s.log(r.sessionId)).output.endsWith('y'.repeat(350)), { what: 'second burst' });
    const p2 = await s.process({ action: 'poll', sessionId: r.sessionId });
    expect(p2.output).toBe('y'.repeat(PENDING));
    expect(p2.droppedChars).toEqual({ stdout: 50, stderr: 0 });
    await s.process({ action: 'kill', sessionId: r.sessionId });
  });
});

describe('UTF-8 decoding across write boundaries', () => {
  it('keeps a character whose bytes arrive in separate writes whole, on both streams', async () => {
    const s = scopes.next('utf8');
    const sub = await s.request('subscribe', { events: ['output'] });
    expect(sub.error).toBeUndefined();
    const r = await s.exec({
      command:
        "printf '\\342\\202'; sleep 0.2; printf '\\254\\n'; " +
        "printf '\\360\\237' >&2; sleep 0.2; printf '\\230' >&2; sleep 0.2; printf '\\200\\n' >&2",
    });
    expect(r.status).toBe('completed');
    expect(r.output).toBe('€\n\u{1F600}\n');
    expect(r.output).not.toContain('\uFFFD');

    const p = await s.process({ action: 'poll', sessionId: r.sessionId });
    expect(p.output).toBe('€\n\u{1F600}\n');

    await c.until(() => c.notifications.filter((n) => n.params.sessionId === r.sessionId).map((n) => n.params.data).join('').length >= 4);
    const events = c.notifications.filter((n) => n.params.sessionId === r.sessionId);
    const byStream = (stream: string) => events.filter((n) => n.params.stream === stream).map((n) => n.params.data).join('');
    expect(byStream('stdout')).toBe('€\n');
    expect(byStream('stderr')).toBe('\u{1F600}\n');
    await s.request('unsubscribe', { subscription: sub.result.subscription });
  });

  it('turns an incomplete character at the end of output into U+FFFD instead of losing it', async () => {
    const s = scopes.next('utf8end');
    const r = await s.exec({ command: "printf 'ok\\342\\202'" });
    expect(r.output).toBe('ok\uFFFD');
  });
});
