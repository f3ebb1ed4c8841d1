import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { ChunkQueue, safeSliceFrom } from '../../../src/session/chunks.js';
import { expectedTail, richText, wellFormed } from '../support/text.js';

const SMILE = '😀'; // two UTF-16 code units

describe('ChunkQueue', () => {
  it('holds everything under the cap', () => {
    const q = new ChunkQueue(10);
    q.push('abc');
    q.push('def');
    expect(q.text()).toBe('abcdef');
    expect(q.length).toBe(6);
    expect(q.dropped).toBe(0);
    expect(q.empty).toBe(false);
  });

  it('property: ASCII bytes kept undecoded read exactly as the same text pushed as strings', () => {
    const piece = fc.tuple(fc.string({ unit: fc.constantFrom('a', 'b', '\n', ' ', '\0'), maxLength: 12 }), fc.boolean());
    fc.assert(
      fc.property(fc.array(piece, { maxLength: 20 }), fc.integer({ min: 1, max: 30 }), fc.integer({ min: 0, max: 40 }), (pieces, cap, n) => {
        const asBytes = new ChunkQueue(cap);
        const asText = new ChunkQueue(cap);
        pieces.forEach(([text, bytes], i) => {
          asBytes.push(bytes ? Buffer.from(text, 'latin1') : text, i);
          asText.push(text, i);
        });
        expect([asBytes.length, asBytes.dropped]).toEqual([asText.length, asText.dropped]);
        expect(asBytes.tail(n)).toBe(asText.tail(n));
        expect([...asBytes.entries()]).toEqual([...asText.entries()]);
        expect(asBytes.text()).toBe(asText.text());
        expect(asBytes.text()).toBe(asText.text());
        expect(asBytes.drain()).toEqual(asText.drain());
      }),
    );
  });

  it('property: bytes pushed from one reused buffer (the daemon reads every pipe into one) are kept as they were, across the wraps and growth of its ring', () => {
    const piece = fc.tuple(fc.integer({ min: 0, max: 5000 }), fc.integer({ min: 0, max: 25 }), fc.boolean());
    fc.assert(
      fc.property(fc.array(piece, { maxLength: 40 }), fc.integer({ min: 1, max: 40_000 }), (pieces, cap) => {
        const reused = Buffer.alloc(5001); // the longest piece: 5,000 letters and a newline
        const asBytes = new ChunkQueue(cap);
        const asText = new ChunkQueue(cap);
        pieces.forEach(([n, letter, text], i) => {
          const s = String.fromCharCode(97 + letter).repeat(n) + (i % 7 === 0 ? '\n' : '');
          if (text) asBytes.push(s, i);
          else {
            const len = reused.write(s, 'latin1');
            asBytes.push(reused.subarray(0, len), i);
          }
          asText.push(s, i);
          // The next read lands in the same buffer.
          reused.fill(0x23);
        });
        expect([asBytes.length, asBytes.dropped]).toEqual([asText.length, asText.dropped]);
        expect(asBytes.tail(cap)).toBe(asText.tail(cap));
        // A piece the ring wraps is held as two with the same place in order: the same text, in the same order.
        const joined = (d: ReturnType<ChunkQueue['drain']>) => ({ text: d.chunks.map(([t]) => t).join(''), order: [...new Set(d.chunks.map(([, seq]) => seq))], dropped: d.dropped });
        expect(joined(asBytes.drain())).toEqual(joined(asText.drain()));
      }),
      { numRuns: 300 },
    );
  });

  it('starts empty and ignores empty pushes', () => {
    const q = new ChunkQueue(3);
    expect(q.empty).toBe(true);
    q.push('');
    expect(q.empty).toBe(true);
    expect([...q.entries()]).toEqual([]);
    expect(q.text()).toBe('');
  });

  it('keeps the newest characters and counts the dropped ones', () => {
    const q = new ChunkQueue(4);
    q.push('abc');
    q.push('def');
    expect(q.text()).toBe('cdef');
    expect(q.length).toBe(4);
    expect(q.dropped).toBe(2);
  });

  it('keeps the last cap characters of a single oversized push', () => {
    const q = new ChunkQueue(3);
    q.push('0123456789');
    expect(q.text()).toBe('789');
    expect(q.dropped).toBe(7);
  });

  it('drops whole chunks, then part of the next', () => {
    const q = new ChunkQueue(5);
    for (const s of ['aa', 'bb', 'cc', 'dd']) q.push(s);
    expect(q.text()).toBe('bccdd');
    expect(q.dropped).toBe(3);
    expect([...q.entries()].map(([t]) => t).join('')).toBe('bccdd');
  });

  it('never keeps the second half of a surrogate pair at the front', () => {
    const q = new ChunkQueue(2);
    q.push(`a${SMILE}b`); // a, high, low, b: the newest 2 would start on the low half
    expect(q.text()).toBe('b');
    expect(q.length).toBe(1);
    expect(q.dropped).toBe(3);
  });

  it('keeps a whole pair when the cut falls before it', () => {
    const q = new ChunkQueue(3);
    q.push(`a${SMILE}b`);
    expect(q.text()).toBe(`${SMILE}b`);
    expect(q.dropped).toBe(1);
  });

  it('keeps counting across many pushes', () => {
    const q = new ChunkQueue(100);
    for (let i = 0; i < 1000; i++) q.push(String(i % 10));
    expect(q.length).toBe(100);
    expect(q.dropped).toBe(900);
    expect(q.text()).toBe('0123456789'.repeat(10));
  });

  it('reads the text again after more pushes', () => {
    const q = new ChunkQueue(6);
    q.push('abc');
    q.push('def');
    expect(q.text()).toBe('abcdef');
    q.push('gh');
    expect(q.text()).toBe('cdefgh');
    expect(q.text()).toBe('cdefgh');
    expect(q.dropped).toBe(2);
  });

  describe('tail', () => {
    it('returns the last n characters across chunks', () => {
      const q = new ChunkQueue(100);
      for (const s of ['one ', 'two ', 'three']) q.push(s);
      expect(q.tail(7)).toBe('o three');
      expect(q.tail(5)).toBe('three');
      expect(q.tail(0)).toBe('');
      expect(q.tail(1000)).toBe('one two three');
    });

    it('does not start with half a surrogate pair', () => {
      const q = new ChunkQueue(100);
      q.push(`x${SMILE}`);
      q.push('yz');
      expect(q.tail(3)).toBe('yz');
      expect(q.tail(4)).toBe(`${SMILE}yz`);
    });

    it('does not change what is held', () => {
      const q = new ChunkQueue(100);
      q.push('abc');
      q.push('def');
      q.tail(2);
      expect(q.text()).toBe('abcdef');
      expect(q.length).toBe(6);
    });
  });

  describe('drain', () => {
    it('returns the chunks with their sequence numbers and resets', () => {
      const q = new ChunkQueue(100);
      q.push('a', 3);
      q.push('b', 7);
      expect(q.drain()).toEqual({ chunks: [['a', 3], ['b', 7]], dropped: 0 });
      expect(q.empty).toBe(true);
      expect(q.length).toBe(0);
      expect(q.drain()).toEqual({ chunks: [], dropped: 0 });
    });

    it('with nothing held keeps its arrays: a poll of a quiet session makes nothing its long-lived session then holds', () => {
      const q = new ChunkQueue(100);
      q.push('a', 1);
      q.drain();
      const held = q as unknown as { items: unknown[]; seqs: unknown[] };
      const [items, seqs] = [held.items, held.seqs];
      expect(q.drain()).toEqual({ chunks: [], dropped: 0 });
      expect(held.items).toBe(items);
      expect(held.seqs).toBe(seqs);
      q.push('b', 2);
      expect(q.drain()).toEqual({ chunks: [['b', 2]], dropped: 0 });
    });

    it('reports what the cap dropped since the last drain, then starts counting again', () => {
      const q = new ChunkQueue(3);
      q.push('abcd', 1);
      q.push('ef', 2);
      expect(q.drain()).toEqual({ chunks: [['d', 1], ['ef', 2]], dropped: 3 });
      q.push('xy', 3);
      expect(q.drain()).toEqual({ chunks: [['xy', 3]], dropped: 0 });
    });

    it('keeps the sequence number of a partly dropped chunk', () => {
      const q = new ChunkQueue(4);
      q.push('12345', 9);
      expect([...q.entries()]).toEqual([['2345', 9]]);
    });
  });

  it('property: holds the newest cap characters, never a split pair, and counts the rest', () => {
    fc.assert(
      fc.property(fc.integer({ min: 1, max: 30 }), fc.array(richText(20), { maxLength: 30 }), (cap, pushes) => {
        const q = new ChunkQueue(cap);
        let all = '';
        for (const p of pushes) {
          q.push(p);
          all += p;
          // The invariant holds after every push, not just at the end.
          expect(q.length + q.dropped).toBe(all.length);
          expect(q.length).toBeLessThanOrEqual(cap);
        }
        const expected = expectedTail(all, cap);
        expect(q.tail(cap)).toBe(expected);
        expect(q.text()).toBe(expected);
        expect(q.length).toBe(expected.length);
        expect(q.dropped).toBe(all.length - expected.length);
        expect(wellFormed(q.text())).toBe(true);
      }),
      { numRuns: 500 },
    );
  });

  it('property: tail(n) is the last n characters of the text, minus a split pair', () => {
    fc.assert(
      fc.property(fc.array(richText(10), { maxLength: 10 }), fc.integer({ min: 0, max: 120 }), (pushes, n) => {
        const q = new ChunkQueue(1000);
        for (const p of pushes) q.push(p);
        const all = pushes.join('');
        expect(q.tail(n)).toBe(expectedTail(all, n));
      }),
      { numRuns: 300 },
    );
  });
});

describe('safeSliceFrom', () => {
  it('slices like String.slice away from pairs', () => {
    expect(safeSliceFrom('abcdef', 2)).toBe('cdef');
    expect(safeSliceFrom('abc', 0)).toBe('abc');
    expect(safeSliceFrom('abc', 3)).toBe('');
    expect(safeSliceFrom('abc', 10)).toBe('');
  });

  it('moves past the second half of a pair', () => {
    expect(safeSliceFrom(`a${SMILE}b`, 1)).toBe(`${SMILE}b`);
    expect(safeSliceFrom(`a${SMILE}b`, 2)).toBe('b');
  });
});
