import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { LineSplitter } from '../../../src/rpc/lines.js';

/** A chunk's result, for brevity: the lines, or 'oversized' when a frame passed the limit. */
function flat(s: LineSplitter, chunk: Buffer): string[] | 'oversized' {
  const lines: string[] = [];
  return s.push(chunk, lines) ? 'oversized' : lines;
}

const b = (s: string) => Buffer.from(s, 'utf8');

describe('LineSplitter', () => {
  it('returns each complete line of a chunk', () => {
    const s = new LineSplitter(1024);
    expect(flat(s, b('{"a":1}\n{"b":2}\n'))).toEqual(['{"a":1}', '{"b":2}']);
  });

  it('holds an unfinished line until its newline comes', () => {
    const s = new LineSplitter(1024);
    expect(flat(s, b('{"jsonrpc":'))).toEqual([]);
    expect(flat(s, b('"2.0",'))).toEqual([]);
    expect(flat(s, b('"id":1}\n{"next'))).toEqual(['{"jsonrpc":"2.0","id":1}']);
    expect(flat(s, b('":true}\n'))).toEqual(['{"next":true}']);
  });

  it('keeps a multi-byte character split across chunks whole', () => {
    const line = '{"command":"echo é€😀"}';
    const bytes = b(`${line}\n`);
    for (let i = 1; i < bytes.length; i++) {
      const s = new LineSplitter(1024);
      const got = [...(flat(s, bytes.subarray(0, i)) as string[]), ...(flat(s, bytes.subarray(i)) as string[])];
      expect(got, `split at ${i}`).toEqual([line]);
    }
  });

  it('is not confused by a reused input buffer', () => {
    const s = new LineSplitter(1024);
    const buf = Buffer.alloc(3);
    buf.write('ab');
    expect(flat(s, buf.subarray(0, 2))).toEqual([]);
    buf.write('c\n');
    expect(flat(s, buf.subarray(0, 2))).toEqual(['abc']);
  });

  it('strips the CR of a CRLF line ending', () => {
    const s = new LineSplitter(1024);
    expect(flat(s, b('one\r\ntwo\r'))).toEqual(['one']);
    expect(flat(s, b('\nthree\n'))).toEqual(['two', 'three']);
  });

  it('keeps a CR that is not at the end of the line', () => {
    const s = new LineSplitter(1024);
    expect(flat(s, b('a\rb\n'))).toEqual(['a\rb']);
  });

  it('returns empty lines as empty strings', () => {
    const s = new LineSplitter(1024);
    expect(flat(s, b('\n\nx\n'))).toEqual(['', '', 'x']);
  });

  describe('oversized frames', () => {
    it('still returns the complete lines before an oversized frame', () => {
      const s = new LineSplitter(10);
      const lines: string[] = [];
      expect(s.push(b(`ok\n${'x'.repeat(20)}\n`), lines)).toBe(true);
      expect(lines).toEqual(['ok']);
    });

    it('accepts a line of exactly maxBytes', () => {
      const s = new LineSplitter(10);
      expect(flat(s, b(`${'x'.repeat(10)}\n`))).toEqual(['x'.repeat(10)]);
    });

    it('refuses a complete line longer than maxBytes', () => {
      const s = new LineSplitter(10);
      expect(flat(s, b(`${'x'.repeat(11)}\n`))).toBe('oversized');
    });

    it('counts bytes, not characters', () => {
      const s = new LineSplitter(10);
      expect(flat(s, b(`${'é'.repeat(6)}\n`))).toBe('oversized'); // 6 characters, 12 bytes
    });

    it('refuses a frame that grows past maxBytes without a newline', () => {
      const s = new LineSplitter(10);
      expect(flat(s, b('x'.repeat(6)))).toEqual([]);
      expect(flat(s, b('x'.repeat(4)))).toEqual([]);
      expect(flat(s, b('x'))).toBe('oversized');
    });

    it('refuses at once a single chunk longer than maxBytes without a newline', () => {
      const s = new LineSplitter(10);
      expect(flat(s, b('x'.repeat(100)))).toBe('oversized');
    });

    it('refuses a line assembled from chunks that passes maxBytes only with its last piece', () => {
      const s = new LineSplitter(10);
      expect(flat(s, b('x'.repeat(8)))).toEqual([]);
      expect(flat(s, b('xxx\n'))).toBe('oversized');
    });

    it('accepts a line assembled from chunks of exactly maxBytes', () => {
      const s = new LineSplitter(10);
      expect(flat(s, b('x'.repeat(8)))).toEqual([]);
      expect(flat(s, b('xx\n'))).toEqual(['x'.repeat(10)]);
    });

    it('measures each line on its own, not the whole chunk', () => {
      const s = new LineSplitter(10);
      const line = 'y'.repeat(10);
      expect(flat(s, b(`${line}\n${line}\n${line}\n`))).toEqual([line, line, line]);
    });
  });

  it('property: any chunking of any lines gives those lines back', () => {
    const line = fc.string({ unit: fc.constantFrom('a', '{', '"', 'é', '€', '😀', ' ', '\r'), maxLength: 20 }).map((s) => s.replace(/\r+$/, ''));
    fc.assert(
      fc.property(fc.array(line, { maxLength: 10 }), fc.array(fc.nat(), { maxLength: 8 }), (lines, cuts) => {
        const bytes = b(lines.map((l) => `${l}\n`).join(''));
        const points = [...new Set(cuts.map((c) => c % (bytes.length + 1)))].sort((x, y) => x - y);
        const s = new LineSplitter(1 << 20);
        const got: string[] = [];
        let prev = 0;
        for (const p of [...points, bytes.length]) {
          const r = flat(s, bytes.subarray(prev, p));
          expect(r).not.toBe('oversized');
          got.push(...(r as string[]));
          prev = p;
        }
        expect(got).toEqual(lines);
      }),
      { numRuns: 400 },
    );
  });
});
