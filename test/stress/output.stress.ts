import fc from 'fast-check';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { waitFor, type TestDaemon } from '../helpers/daemon.js';
import type { TestClient } from '../helpers/rpc.js';
import { Scoped, sharedDaemon, type Scopes } from '../helpers/session.js';
import { SessionOutput } from '../../src/session/output.js';
import { sayIfDaemonDies } from './bystander.js';
import { rng, runSeed, sha256 } from './random.js';

/**
 * Output integrity (SPEC §5, §6): characters split across writes, invalid UTF-8, CR, a 10 MB
 * line, stdout and stderr interleaved. Every view of the output — the exec result, poll, log
 * and the `output` events — must say the same thing, exactly.
 */

const MAX_OUTPUT = 200_000;
const PENDING = 30_000;

const seed = runSeed(fc.readConfigureGlobal().seed);

let d: TestDaemon;
let scopes: Scopes;
let events: TestClient;
let dir: string;

sharedDaemon({ env: { PROCCTL_INTERRUPT: 'false', PROCCTL_KILL_GRACE_MS: '1000' } }, (x) => {
  ({ d, scopes } = x);
  sayIfDaemonDies(d);
});

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'procctl-output-'));
  events = await d.client();
});

afterAll(() => {
  events?.close();
  rmSync(dir, { recursive: true, force: true });
});

/** A fresh scope whose `output` events this file's event client receives. */
async function watchedScope(prefix: string): Promise<Scoped> {
  const s = scopes.next(prefix);
  const sub = await new Scoped(events, s.scope).request('subscribe', { events: ['output'] });
  expect(sub.error).toBeUndefined();
  return s;
}

/** The `output` events of a session, once they add up to `chars` characters; offsets checked to be contiguous. */
async function outputEvents(sessionId: string, chars: number): Promise<{ stream: string; data: string }[]> {
  const mine = () => events.notifications.filter((n) => n.method === 'event' && n.params.sessionId === sessionId && n.params.type === 'output').map((n) => n.params);
  await events.until(() => mine().reduce((k, e) => k + e.data.length, 0) >= chars, 30_000);
  const list = mine();
  let at = 0;
  for (const e of list) {
    expect(e.offset, 'event offsets run on without gaps').toBe(at);
    at += e.data.length;
  }
  return list;
}

const join_ = (list: { data: string }[]) => list.map((e) => e.data).join('');
const ofStream = (list: { stream: string; data: string }[], stream: string) => join_(list.filter((e) => e.stream === stream));
/** What `log` shows of a text: its lines joined by \n, so only a final newline goes. */
const asLog = (text: string) => text.replace(/\n$/, '');

/** Bytes as printf octal escapes. */
const octal = (bytes: Iterable<number>) => [...bytes].map((b) => `\\${b.toString(8).padStart(3, '0')}`).join('');

/**
 * Every view of a finished session's output agrees with `combined` (both streams in arrival
 * order): exec result, first poll, log and the events; each stream's events are exact.
 */
async function allViewsAgree(s: Scoped, r: any, want: { combined: string; stdout: string; stderr: string }): Promise<void> {
  expect(r.status).toBe('completed');
  expect(r.output).toBe(want.combined.slice(-MAX_OUTPUT));
  const poll = await s.process({ action: 'poll', sessionId: r.sessionId });
  expect(poll.output).toBe(want.combined);
  const log = await s.log(r.sessionId, { offset: 0 });
  expect(log.output).toBe(asLog(want.combined));
  expect(log.totalChars).toBe(want.combined.length);
  const ev = await outputEvents(r.sessionId, want.combined.length);
  expect(join_(ev)).toBe(want.combined);
  expect(ofStream(ev, 'stdout')).toBe(want.stdout);
  expect(ofStream(ev, 'stderr')).toBe(want.stderr);
}

const CHARS = ['é', '€', '😀', '𝄞', '\u{10FFFF}'];

describe('output integrity', () => {
  it.each(['stdout', 'stderr'])('keeps a character whole when its bytes are split at any offset, on %s', async (stream) => {
    const s = await watchedScope(`split-${stream}`);
    const to = stream === 'stderr' ? ' >&2' : '';
    const parts: string[] = [];
    let text = '';
    for (const ch of CHARS) {
      const bytes = Buffer.from(ch);
      for (let k = 1; k < bytes.length; k++) {
        // Two writes around the split, apart in time so the daemon reads them apart.
        parts.push(`printf '${k}:${octal(bytes.subarray(0, k))}'${to}; sleep 0.02; printf '${octal(bytes.subarray(k))}\\n'${to}`);
        text += `${k}:${ch}\n`;
      }
      // Byte by byte, each write flushed on its own.
      parts.push(`printf 'b:'${to}; ${[...bytes].map((b) => `printf '${octal([b])}'${to}; sleep 0.01`).join('; ')}; printf '\\n'${to}`);
      text += `b:${ch}\n`;
    }
    const r = await s.exec({ command: parts.join('; '), yieldMs: 60_000 });
    expect(r.output).not.toContain('\uFFFD');
    await allViewsAgree(s, r, { combined: text, stdout: stream === 'stdout' ? text : '', stderr: stream === 'stderr' ? text : '' });
  });

  /** Random bytes with every kind of invalid UTF-8 among valid text and newlines. */
  function brokenBytes(n: number, salt: number): Buffer {
    const r = rng(seed + salt);
    const pieces = [[0x80], [0xbf], [0xc0, 0xaf], [0xc3], [0xe2, 0x82], [0xed, 0xa0, 0x80], [0xf0, 0x9f, 0x98], [0xf4, 0x90, 0x80, 0x80], [0xff], [0xfe], [0xf8, 0x88, 0x80, 0x80, 0x80], [0x0a], [0x0d, 0x0a]];
    const out: number[] = [];
    while (out.length < n) {
      const x = r.next();
      if (x < 0.5) out.push(r.int(0x20, 0x7e));
      else if (x < 0.7) out.push(...Buffer.from(r.pick(CHARS)));
      else if (x < 0.8) out.push(r.int(0, 255));
      else out.push(...r.pick(pieces));
    }
    return Buffer.from(out);
  }

  it('renders invalid UTF-8 as U+FFFD the standard way, the same in the exec result, poll, log and events', async () => {
    const s = await watchedScope('invalid');
    const bytes = brokenBytes(20_000, 1);
    const file = join(dir, 'broken.bin');
    writeFileSync(file, bytes);
    const text = bytes.toString('utf8');
    expect(text).toContain('\uFFFD');
    // In one piece, and in 7-byte writes that cut sequences anywhere; on either stream.
    for (const [command, stream] of [
      [`cat ${file}`, 'stdout'],
      [`dd if=${file} bs=7 status=none`, 'stdout'],
      [`dd if=${file} bs=5 status=none >&2`, 'stderr'],
    ]) {
      const r = await s.exec({ command, yieldMs: 60_000 });
      await allViewsAgree(s, r, { combined: text, stdout: stream === 'stdout' ? text : '', stderr: stream === 'stderr' ? text : '' });
    }
  });

  it('renders invalid UTF-8 the same when log pages over the spool (output past maxOutputChars)', async () => {
    const s = scopes.next('invalid-spool');
    const bytes = brokenBytes(20_000, 2);
    const file = join(dir, 'broken2.bin');
    writeFileSync(file, bytes);
    const text = `${'a'.repeat(MAX_OUTPUT)}\n${bytes.toString('utf8')}`;
    const r = await s.exec({ command: `head -c ${MAX_OUTPUT} /dev/zero | tr '\\0' a; echo; dd if=${file} bs=3 status=none`, yieldMs: 60_000 });
    expect(r.status).toBe('completed');
    expect(r.output).toBe(text.slice(-MAX_OUTPUT));
    expect(r.droppedChars).toBe(text.length - MAX_OUTPUT);
    const log = await s.log(r.sessionId, { offset: 0 });
    expect(log.totalChars).toBe(text.length);
    expect(sha256(log.output)).toBe(sha256(asLog(text)));
    const poll = await s.process({ action: 'poll', sessionId: r.sessionId });
    expect(poll.output).toBe(text.slice(-PENDING));
  });

  it('log over the spool keeps a character whole when the other stream wrote between its bytes', async () => {
    // Past maxOutputChars, `log` reads the spool, which holds both streams in arrival order:
    // each character here is split on stdout, with a stderr line arriving between its bytes.
    const s = scopes.next('split-spool');
    const octal = (b: Buffer) => [...b].map((x) => `\\${x.toString(8)}`).join('');
    let command = `head -c ${MAX_OUTPUT} /dev/zero | tr '\\0' a; echo`;
    const want: string[] = [];
    for (const ch of ['é', '€', '😀']) {
      const b = Buffer.from(ch, 'utf8');
      for (let k = 1; k < b.length; k++) {
        command += `; printf '${octal(b.subarray(0, k))}'; sleep 0.1; echo 'ERR ${ch} ${k}' >&2; sleep 0.1; printf '${octal(b.subarray(k))}\\n'`;
        want.push(`ERR ${ch} ${k}`, ch);
      }
    }
    const r = await s.exec({ command, yieldMs: 60_000 });
    expect(r.status).toBe('completed');
    expect(r.output.endsWith(`${want.join('\n')}\n`)).toBe(true);
    const log = await s.log(r.sessionId, { limit: want.length });
    expect(log.source).toBe('spool');
    expect(log.output).toBe(want.join('\n'));
    expect(log.totalChars).toBe(r.output.length + r.droppedChars);
  });

  it('the spool copy is each stream decoded on its own, however reads split and interleave (property, in process)', () => {
    const bytes = fc.uint8Array({ maxLength: 60 }).chain((raw) =>
      fc.oneof(
        fc.constant(Buffer.from(raw)),
        // Mostly well-formed text, so whole chunks (written as they came) are common too.
        fc.string({ unit: fc.constantFrom('a', '\n', 'é', '€', '😀', '\uFFFD'), maxLength: 30 }).map((t) => Buffer.from(t, 'utf8')),
      ),
    );
    // Each stream's bytes, cut into reads at the given points, and the order the reads arrive in.
    const plan = fc.record({ out: bytes, err: bytes, cutsOut: fc.array(fc.nat(), { maxLength: 8 }), cutsErr: fc.array(fc.nat(), { maxLength: 8 }), order: fc.array(fc.boolean(), { maxLength: 20 }) });
    const cut = (b: Buffer, at: number[]) => {
      const points = [...new Set(at.map((x) => x % (b.length + 1)))].sort((x, y) => x - y);
      return [...points, b.length].map((p, k) => b.subarray(k ? points[k - 1] : 0, p)).filter((c) => c.length > 0);
    };
    fc.assert(
      fc.property(plan, ({ out, err, cutsOut, cutsErr, order }) => {
        const o = new SessionOutput(1_000_000, 1_000_000);
        const spooled: Buffer[] = [];
        const sink = { write: (d: Buffer | string) => spooled.push(typeof d === 'string' ? Buffer.from(d, 'utf8') : d) };
        const reads = { stdout: cut(out, cutsOut), stderr: cut(err, cutsErr) };
        for (let k = 0; reads.stdout.length + reads.stderr.length > 0; k++) {
          const stream = reads.stderr.length === 0 || (reads.stdout.length > 0 && order[k % Math.max(1, order.length)]) ? 'stdout' : 'stderr';
          const chunk = reads[stream].shift()!;
          o.write(stream, chunk, sink);
        }
        o.end('stdout', sink);
        o.end('stderr', sink);
        // Decoded as one (as log over the spool does), the copy is the transcript exactly.
        expect(Buffer.concat(spooled).toString('utf8')).toBe(o.text());
        expect(o.text().length).toBe(out.toString('utf8').length + err.toString('utf8').length);
      }),
      { numRuns: 20_000 },
    );
    // Reads of whole characters go to the spool as they came (no copy).
    const o = new SessionOutput(1_000, 1_000);
    const got: (Buffer | string)[] = [];
    const reads = [Buffer.from('plain\n'), Buffer.from('€ whole\n')];
    o.write('stdout', reads[0], { write: (d) => got.push(d) });
    o.write('stderr', reads[1], { write: (d) => got.push(d) });
    expect(got[0]).toBe(reads[0]);
    expect(got[1]).toBe(reads[1]);
  });

  it('keeps CR and CRLF as they are; log splits lines on LF only', async () => {
    const s = await watchedScope('crlf');
    const text = 'one\r\ntwo\r\n\r\nthree\rfour\n\r';
    const r = await s.exec({ command: "printf 'one\\r\\ntwo\\r\\n\\r\\nthree\\rfour\\n\\r'" });
    await allViewsAgree(s, r, { combined: text, stdout: text, stderr: '' });
    const log = await s.log(r.sessionId, { limit: 2 });
    expect(log.output).toBe('three\rfour\n\r');
    expect(log.totalLines).toBe(5);
  });

  it('handles a single 10 MB line: the newest maxOutputChars exact, log has all of it', async () => {
    const s = scopes.next('bigline');
    const r0 = rng(seed + 3);
    const raw = Buffer.alloc(7_500_000);
    for (let k = 0; k < raw.length; k += 4) raw.writeUInt32LE((r0.next() * 2 ** 32) >>> 0, k);
    const line = raw.toString('base64');
    expect(line.length).toBe(10_000_000);
    const file = join(dir, 'line.txt');
    writeFileSync(file, `${line}\n`);
    const text = `${line}\n`;
    const r = await s.exec({ command: `cat ${file}`, yieldMs: 120_000 });
    expect(r.status).toBe('completed');
    expect(r.truncated).toBe(true);
    expect(r.droppedChars).toBe(text.length - MAX_OUTPUT);
    expect(sha256(r.output)).toBe(sha256(text.slice(-MAX_OUTPUT)));
    const log = await s.log(r.sessionId, { limit: 1 });
    expect(log.totalLines).toBe(1);
    expect(log.totalChars).toBe(text.length);
    expect(sha256(log.output)).toBe(sha256(line));
    const poll = await s.process({ action: 'poll', sessionId: r.sessionId });
    expect(sha256(poll.output)).toBe(sha256(text.slice(-PENDING)));
    expect(poll.droppedChars).toEqual({ stdout: text.length - PENDING, stderr: 0 });
    const listed = (await s.list()).find((x) => x.sessionId === r.sessionId);
    expect(listed.tail).toBe(text.slice(-listed.tail.length));
  });

  it('keeps arrival order across stdout and stderr when they take turns', async () => {
    const s = await watchedScope('turns');
    const n = 12;
    const r = await s.exec({
      command: `for i in $(seq 1 ${n}); do echo "out $i"; read x; echo "err $i" >&2; read x; done`,
      background: true,
    });
    scopes.track(r.pid);
    let want = '';
    for (let i = 1; i <= n; i++) {
      for (const line of [`out ${i}\n`, `err ${i}\n`]) {
        want += line;
        // Each line is in before the job is let go to write the next, on the other stream.
        await waitFor(async () => (await s.log(r.sessionId, { offset: 0 })).totalChars === want.length, { what: line.trim() });
        await s.process({ action: 'write', sessionId: r.sessionId, data: '\n' });
      }
    }
    const { last, output } = await s.pollUntilEnded(r.sessionId);
    expect(last.status).toBe('completed');
    expect(output).toBe(want);
    expect((await s.log(r.sessionId, { offset: 0 })).output).toBe(asLog(want));
    const ev = await outputEvents(r.sessionId, want.length);
    expect(join_(ev)).toBe(want);
    expect(ofStream(ev, 'stdout')).toBe(want.split('\n').filter((l) => l.startsWith('out')).map((l) => `${l}\n`).join(''));
    expect(ofStream(ev, 'stderr')).toBe(want.split('\n').filter((l) => l.startsWith('err')).map((l) => `${l}\n`).join(''));
  });

  it('keeps each stream exact and the combined output in arrival order when both write at once', async () => {
    const s = await watchedScope('both');
    const seqText = (p: string) => Array.from({ length: 3000 }, (_, i) => `${p}${i + 1}\n`).join('');
    const r = await s.exec({ command: "seq -f 'o%g' 1 3000 & seq -f 'e%g' 1 3000 >&2 & wait", yieldMs: 60_000 });
    expect(r.status).toBe('completed');
    const total = 2 * seqText('o').length;
    const ev = await outputEvents(r.sessionId, total);
    expect(ofStream(ev, 'stdout')).toBe(seqText('o'));
    expect(ofStream(ev, 'stderr')).toBe(seqText('e'));
    // Arrival order, as the events saw it, is the order of the combined output in every view.
    await allViewsAgree(s, r, { combined: join_(ev), stdout: seqText('o'), stderr: seqText('e') });
  });
});
