import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { jsonAnswer } from '../../../src/tools/json-answer.js';

const NULS = '\0'.repeat(30_000);

describe('jsonAnswer: an answer with a large text written as JSON bytes', () => {
  it('is the same answer JSON.stringify gives, field for field', () => {
    const fields = { status: 'running', sessionId: 'abc', droppedChars: { stdout: 3, stderr: 0 } };
    const a = jsonAnswer(fields, [
      ['output', [NULS]],
      ['text', ['[3 characters were dropped]\n', NULS, '\nSession abc is still running.']],
    ]);
    expect(JSON.parse(a.bytes.toString('utf8'))).toEqual({ ...fields, output: NULS, text: `[3 characters were dropped]\n${NULS}\nSession abc is still running.` });
    expect(jsonAnswer({}, [['output', ['']]]).bytes.toString()).toBe('{"output":""}');
    expect(jsonAnswer({ a: 1 }, []).bytes.toString()).toBe('{"a":1}');
  });

  it('property: any text, cut anywhere into parts, reads back whole (escapes, any character, pairs across slices)', () => {
    const unit = fc.oneof(fc.constantFrom('\0', '\n', '"', '\\', '\u001f', 'x', 'é', '✓', '😀', '\ud800', '\udc00'), fc.string());
    fc.assert(
      fc.property(fc.array(fc.array(unit, { maxLength: 40 }).map((u) => u.join('')), { maxLength: 4 }), fc.integer({ min: 0, max: 9000 }), (parts, pad) => {
        // Padding moves where the 8,192-character slices fall.
        const texts = ['x'.repeat(pad), ...parts];
        const answer = jsonAnswer({ n: pad }, [['text', texts]]);
        expect(JSON.parse(answer.bytes.toString('utf8'))).toEqual({ n: pad, text: texts.join('') });
        answer.written?.();
      }),
      { numRuns: 200 },
    );
  });

  it('writes over a buffer the transport is done with, never over one still on its way out', () => {
    const first = jsonAnswer({ n: 1 }, [['output', [NULS]]]);
    const second = jsonAnswer({ n: 2 }, [['output', [NULS]]]);
    expect(second.bytes.buffer).not.toBe(first.bytes.buffer);
    first.written!();
    const third = jsonAnswer({ n: 3 }, [['output', [NULS]]]);
    expect(third.bytes.buffer).toBe(first.bytes.buffer);
    // The second is untouched by the third written over the first's buffer.
    expect(JSON.parse(second.bytes.toString())).toEqual({ n: 2, output: NULS });
    expect(JSON.parse(third.bytes.toString())).toEqual({ n: 3, output: NULS });
  });
});
