import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { SessionOutput, spliceableLength, type Stream } from '../../../src/session/output.js';
import { expectedTail, richText, wellFormed } from '../support/text.js';

const MULTI = 'aé€😀z中𝄞\n'; // 1-, 2-, 3- and 4-byte UTF-8 sequences
const BIG = 1_000_000;

describe('SessionOutput: UTF-8 decoding', () => {
  it('keeps a character whole however one split falls', () => {
    const bytes = Buffer.from(MULTI, 'utf8');
    for (let i = 0; i <= bytes.length; i++) {
      const o = new SessionOutput(BIG, BIG);
      const first = o.write('stdout', bytes.subarray(0, i));
      const second = o.write('stdout', bytes.subarray(i));
      expect(first + second, `split at ${i}`).toBe(MULTI);
      expect(o.text(), `split at ${i}`).toBe(MULTI);
      expect(o.drain().text, `split at ${i}`).toBe(MULTI);
      expect(o.totalChars).toBe(MULTI.length);
    }
  });

  it('keeps characters whole when fed one byte at a time', () => {
    const bytes = Buffer.from(MULTI, 'utf8');
    const o = new SessionOutput(BIG, BIG);
    const returned: string[] = [];
    for (let i = 0; i < bytes.length; i++) returned.push(o.write('stderr', bytes.subarray(i, i + 1)));
    expect(returned.join('')).toBe(MULTI);
    expect(o.text()).toBe(MULTI);
    // A write that only starts a character adds nothing yet.
    expect(returned.filter((r) => r === '').length).toBe(bytes.length - [...MULTI].length);
  });

  it('keeps characters whole at every pair of split points', () => {
    const bytes = Buffer.from('😀€é', 'utf8');
    for (let i = 0; i <= bytes.length; i++) {
      for (let j = i; j <= bytes.length; j++) {
        const o = new SessionOutput(BIG, BIG);
        o.write('stdout', bytes.subarray(0, i));
        o.write('stdout', bytes.subarray(i, j));
        o.write('stdout', bytes.subarray(j));
        expect(o.text(), `splits at ${i}, ${j}`).toBe('😀€é');
      }
    }
  });

  it('decodes each stream separately', () => {
    const smile = Buffer.from('😀', 'utf8');
    const o = new SessionOutput(BIG, BIG);
    expect(o.write('stdout', smile.subarray(0, 2))).toBe('');
    expect(o.write('stderr', Buffer.from('err'))).toBe('err');
    expect(o.write('stdout', smile.subarray(2))).toBe('😀');
    expect(o.text()).toBe('err😀');
    expect(o.drain().text).toBe('err😀');
  });

  it('turns an incomplete character into U+FFFD at the end of the stream', () => {
    const o = new SessionOutput(BIG, BIG);
    o.write('stdout', Buffer.from('ok '));
    o.write('stdout', Buffer.from('€', 'utf8').subarray(0, 2));
    expect(o.end('stdout')).toBe('\uFFFD');
    expect(o.end('stderr')).toBe('');
    expect(o.text()).toBe('ok \uFFFD');
  });

  it('keeps ASCII bytes undecoded until read, and decodes what follows a split character', () => {
    const o = new SessionOutput(BIG, BIG);
    const ascii = Buffer.from('plain\n');
    expect(o.capture('stdout', ascii)).toBe(ascii);
    const euro = Buffer.from('€', 'utf8');
    expect(o.capture('stdout', euro.subarray(0, 2))).toBe('');
    // The held lead bytes and an ASCII byte: the decoder says U+FFFD, then the byte.
    expect(o.capture('stdout', Buffer.from('x'))).toBe('\uFFFDx');
    expect(o.capture('stdout', Buffer.from('y'))).toBeInstanceOf(Buffer);
    expect(o.text()).toBe('plain\n\uFFFDxy');
    expect(o.totalChars).toBe(9);
  });

  it('replaces invalid bytes', () => {
    const o = new SessionOutput(BIG, BIG);
    o.write('stdout', Buffer.from([0x61, 0xff, 0x62]));
    expect(o.text()).toBe('a\uFFFDb');
  });

  it('property: any byte split of any text decodes to that text, per stream', () => {
    const plan = fc.array(
      fc.record({ stream: fc.constantFrom<Stream>('stdout', 'stderr'), text: richText(30), cuts: fc.array(fc.nat(), { maxLength: 4 }) }),
      { maxLength: 12 },
    );
    fc.assert(
      fc.property(plan, (writes) => {
        const o = new SessionOutput(BIG, BIG);
        const sent = { stdout: '', stderr: '' };
        const got = { stdout: '', stderr: '' };
        let all = '';
        for (const w of writes) {
          const bytes = Buffer.from(w.text, 'utf8');
          const cuts = [...new Set(w.cuts.map((c) => c % (bytes.length + 1)))].sort((a, b) => a - b);
          let prev = 0;
          for (const cut of [...cuts, bytes.length]) {
            const text = o.write(w.stream, bytes.subarray(prev, cut));
            got[w.stream] += text;
            all += text;
            prev = cut;
          }
          sent[w.stream] += w.text;
        }
        expect(got).toEqual(sent);
        expect(o.text()).toBe(all);
        expect(o.drain().text).toBe(all);
        expect(o.totalChars).toBe(sent.stdout.length + sent.stderr.length);
      }),
      { numRuns: 300 },
    );
  });
});

describe('SessionOutput: a stream\'s unfinished character, spliced or read', () => {
  it('says which stream holds the first bytes of a character, until its rest or its end', () => {
    const o = new SessionOutput(BIG, BIG);
    const euro = Buffer.from('€', 'utf8');
    expect(o.unfinished('stdout')).toBe(false);
    o.capture('stdout', Buffer.concat([Buffer.from('x'), euro.subarray(0, 2)]));
    expect(o.unfinished('stdout')).toBe(true);
    expect(o.unfinished('stderr')).toBe(false);
    o.capture('stdout', euro.subarray(2));
    expect(o.unfinished('stdout')).toBe(false);
    o.capture('stderr', euro.subarray(0, 1));
    expect(o.unfinished('stderr')).toBe(true);
    o.end('stderr');
    expect(o.unfinished('stderr')).toBe(false);
    o.restoreHeld('stdout', euro.subarray(0, 1));
    expect(o.unfinished('stdout')).toBe(true);
  });

  it('a read spliced up to its unfinished character, or not at all when an invalid lead comes before it', () => {
    const euro = Buffer.from('€', 'utf8');
    expect(spliceableLength(Buffer.from('abc'))).toBe(3);
    expect(spliceableLength(Buffer.concat([Buffer.from('x'), euro.subarray(0, 2)]))).toBe(1);
    expect(spliceableLength(euro.subarray(0, 1))).toBe(0);
    // C2 is ended (U+FFFD) only by the next lead: spliced alone it would join what comes next in the spool.
    expect(spliceableLength(Buffer.from([0x61, 0xc2, 0xc0]))).toBe(0);
    expect(spliceableLength(Buffer.from([0x80, 0x80]))).toBe(2);
  });

  it('property: reads spliced (whole characters in the spool by the reader) or written by the capture give the spool each stream decoded on its own', () => {
    // runner/launch/splice.ts's rule: a read is spliced only while neither stream is unfinished
    // (and the spool takes splices), counted without a character it ends inside; else the capture writes it.
    const bytes = fc.uint8Array({ maxLength: 40 }).chain((raw) =>
      fc.oneof(fc.constant(Buffer.from(raw)), fc.string({ unit: fc.constantFrom('a', '\n', 'é', '€', '😀'), maxLength: 20 }).map((t) => Buffer.from(t, 'utf8'))),
    );
    const plan = fc.record({ out: bytes, err: bytes, cutsOut: fc.array(fc.nat(), { maxLength: 8 }), cutsErr: fc.array(fc.nat(), { maxLength: 8 }), order: fc.array(fc.boolean(), { maxLength: 16 }), room: fc.array(fc.boolean(), { maxLength: 16 }) });
    const cut = (b: Buffer, at: number[]) => {
      const points = [...new Set(at.map((x) => x % (b.length + 1)))].sort((x, y) => x - y);
      return [...points, b.length].map((p, k) => b.subarray(k ? points[k - 1] : 0, p)).filter((c) => c.length > 0);
    };
    fc.assert(
      fc.property(plan, ({ out, err, cutsOut, cutsErr, order, room }) => {
        const o = new SessionOutput(BIG, BIG);
        const spool: Buffer[] = [];
        const sink = { write: (d: Buffer | string) => spool.push(Buffer.from(d as Buffer)) };
        const reads = { stdout: cut(out, cutsOut), stderr: cut(err, cutsErr) };
        for (let k = 0; reads.stdout.length + reads.stderr.length > 0; k++) {
          const stream: Stream = reads.stderr.length === 0 || (reads.stdout.length > 0 && order[k % Math.max(1, order.length)]) ? 'stdout' : 'stderr';
          const chunk = reads[stream].shift()!;
          const splice = (room[k % Math.max(1, room.length)] ?? true) && !o.unfinished('stdout') && !o.unfinished('stderr');
          const whole = splice ? spliceableLength(chunk) : 0;
          if (whole > 0) {
            spool.push(chunk.subarray(0, whole));
            o.capture(stream, chunk);
          } else o.capture(stream, chunk, sink);
        }
        o.end('stdout', sink);
        o.end('stderr', sink);
        expect(Buffer.concat(spool).toString('utf8')).toBe(o.text());
        expect(o.text().length).toBe(out.toString('utf8').length + err.toString('utf8').length);
      }),
      { numRuns: 5_000 },
    );
  });
});

describe('SessionOutput: retained transcript', () => {
  it('keeps the newest maxOutputChars and counts what it dropped', () => {
    const o = new SessionOutput(10, BIG);
    o.write('stdout', 'hello ');
    o.write('stderr', 'world ');
    o.write('stdout', 'again');
    expect(o.text()).toBe('orld again');
    expect(o.retainedChars).toBe(10);
    expect(o.droppedChars).toBe(7);
    expect(o.totalChars).toBe(17);
    expect(o.tail(5)).toBe('again');
  });

  it('is not changed by a drain', () => {
    const o = new SessionOutput(100, 100);
    o.write('stdout', 'abc');
    o.drain();
    expect(o.text()).toBe('abc');
    expect(o.retainedChars).toBe(3);
  });

  it('records when output last came', () => {
    const o = new SessionOutput(100, 100);
    expect(o.lastOutputAt).toBeUndefined();
    o.write('stdout', 'x');
    expect(typeof o.lastOutputAt).toBe('number');
  });

  it('property: retained text is the newest maxOutputChars of everything written', () => {
    const plan = fc.array(fc.record({ stream: fc.constantFrom<Stream>('stdout', 'stderr'), text: richText(25) }), { maxLength: 25 });
    fc.assert(
      fc.property(fc.integer({ min: 1, max: 60 }), plan, (cap, writes) => {
        const o = new SessionOutput(cap, BIG);
        let all = '';
        for (const w of writes) {
          o.write(w.stream, Buffer.from(w.text, 'utf8'));
          all += w.text;
        }
        const expected = expectedTail(all, cap);
        expect(o.text()).toBe(expected);
        expect(wellFormed(o.text())).toBe(true);
        expect(o.totalChars).toBe(all.length);
        expect(o.droppedChars + o.retainedChars).toBe(o.totalChars);
        expect(o.droppedChars).toBe(all.length - expected.length);
      }),
      { numRuns: 500 },
    );
  });
});

describe('SessionOutput: pending output for poll', () => {
  it('drains both streams interleaved in arrival order', () => {
    const o = new SessionOutput(BIG, BIG);
    o.write('stdout', 'a');
    o.write('stderr', 'B');
    o.write('stdout', 'c');
    o.write('stdout', 'd');
    o.write('stderr', 'E');
    expect(o.drain()).toEqual({ text: 'aBcdE', dropped: { stdout: 0, stderr: 0 } });
  });

  it('returns only what came since the last drain', () => {
    const o = new SessionOutput(BIG, BIG);
    o.write('stdout', 'one\n');
    expect(o.drain().text).toBe('one\n');
    expect(o.hasPending).toBe(false);
    expect(o.drain()).toEqual({ text: '', dropped: { stdout: 0, stderr: 0 } });
    o.write('stderr', 'two\n');
    expect(o.hasPending).toBe(true);
    expect(o.drain().text).toBe('two\n');
  });

  it('caps each stream separately, keeping the newest, and says how much each lost', () => {
    const o = new SessionOutput(BIG, 4);
    o.write('stdout', 'out1-');
    o.write('stderr', 'E');
    o.write('stdout', 'out2');
    o.write('stderr', 'rr');
    // stdout keeps "out2" (5 dropped); stderr keeps "Err" (nothing dropped).
    expect(o.drain()).toEqual({ text: 'Eout2rr', dropped: { stdout: 5, stderr: 0 } });
  });

  it('a noisy stream does not push out the quiet one', () => {
    const o = new SessionOutput(BIG, 10);
    o.write('stderr', 'error!');
    for (let i = 0; i < 100; i++) o.write('stdout', `line ${i}\n`);
    const d = o.drain();
    expect(d.text.startsWith('error!')).toBe(true);
    expect(d.text).toBe('error!8\nline 99\n');
    expect(d.dropped.stderr).toBe(0);
    expect(d.dropped.stdout).toBe(o.totalChars - 6 - 10);
  });

  it('still has something to report when only drops are pending', () => {
    const o = new SessionOutput(BIG, 2);
    o.write('stdout', 'abc');
    expect(o.hasPending).toBe(true);
    const d = o.drain();
    expect(d).toEqual({ text: 'bc', dropped: { stdout: 1, stderr: 0 } });
    expect(o.hasPending).toBe(false);
  });

  it('resets the dropped counts after a drain', () => {
    const o = new SessionOutput(BIG, 2);
    o.write('stderr', 'abcdef');
    expect(o.drain().dropped).toEqual({ stdout: 0, stderr: 4 });
    o.write('stderr', 'x');
    expect(o.drain()).toEqual({ text: 'x', dropped: { stdout: 0, stderr: 0 } });
  });

  it('property: each stream drains its newest pending characters, interleaved in arrival order, with drops counted', () => {
    const plan = fc.array(
      fc.oneof(
        fc.record({ stream: fc.constantFrom<Stream>('stdout', 'stderr'), text: richText(15) }),
        fc.constant('drain' as const),
      ),
      { maxLength: 40 },
    );
    fc.assert(
      fc.property(fc.integer({ min: 1, max: 30 }), plan, (cap, steps) => {
        const o = new SessionOutput(BIG, cap);
        // A model: every pending character with its stream, in arrival order.
        let pending: { ch: string; stream: Stream }[] = [];
        const check = () => {
          const d = o.drain();
          const keep = new Set<number>();
          const dropped = { stdout: 0, stderr: 0 };
          for (const stream of ['stdout', 'stderr'] as const) {
            const mine = pending.flatMap((p, i) => (p.stream === stream ? [i] : []));
            const kept = expectedTail(mine.map((i) => pending[i].ch).join(''), cap).length;
            dropped[stream] = mine.length - kept;
            for (const i of mine.slice(mine.length - kept)) keep.add(i);
          }
          expect(d.dropped).toEqual(dropped);
          expect(d.text).toBe(pending.filter((_, i) => keep.has(i)).map((p) => p.ch).join(''));
          expect(o.hasPending).toBe(false);
          pending = [];
        };
        for (const step of steps) {
          if (step === 'drain') check();
          else {
            o.write(step.stream, Buffer.from(step.text, 'utf8'));
            for (let k = 0; k < step.text.length; k++) pending.push({ ch: step.text[k], stream: step.stream });
          }
        }
        check();
      }),
      { numRuns: 400 },
    );
  });
});

describe('SessionOutput: where stderr lies', () => {
  it('says which characters of a range came on stderr, adjacent runs joined', () => {
    const o = new SessionOutput(BIG, BIG);
    o.write('stdout', 'out-1\n'); // 0..6
    o.write('stderr', 'err-1\n'); // 6..12
    o.write('stderr', 'err-2\n'); // 12..18
    o.write('stdout', 'out-2\n'); // 18..24
    o.write('stderr', 'e3'); // 24..26
    expect(o.stderrIn(0, 26)).toEqual([[6, 18], [24, 26]]);
    expect(o.stderrIn(10, 20)).toEqual([[0, 8]]);
    expect(o.stderrIn(18, 24)).toEqual([]);
    expect(o.stderrIn(20, 26)).toEqual([[4, 6]]);
    expect(o.stderrIn(0, 6)).toEqual([]);
  });

  it('keeps the place of the newest runs only', () => {
    const o = new SessionOutput(BIG, BIG);
    // Past twice the 20,000 runs kept, the oldest half goes.
    for (let i = 0; i < 45_000; i++) {
      o.write('stdout', 'o');
      o.write('stderr', 'e');
    }
    // The oldest runs are forgotten; the newest are known.
    expect(o.stderrIn(0, 10)).toEqual([]);
    expect(o.stderrIn(89_990, 90_000)).toEqual([[1, 2], [3, 4], [5, 6], [7, 8], [9, 10]]);
  });
});

describe('SessionOutput: a drain that finds nothing', () => {
  it('gives the one shared answer, frozen, and what came since after it', () => {
    const o = new SessionOutput();
    const quiet = o.drain();
    expect(quiet).toEqual({ text: '', dropped: { stdout: 0, stderr: 0 } });
    expect(Object.isFrozen(quiet) && Object.isFrozen(quiet.dropped)).toBe(true);
    expect(o.drain()).toBe(quiet);
    o.capture('stdout', Buffer.from('out\n'));
    o.capture('stderr', Buffer.from('err\n'));
    const drained = o.drain();
    expect(drained).not.toBe(quiet);
    expect(drained.text).toBe('out\nerr\n');
    expect(o.drain()).toBe(quiet);
  });
});
