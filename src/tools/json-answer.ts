import { JsonText } from './json-text.js';

/**
 * An answer that carries a large text (a poll's output) written as JSON bytes into a buffer the
 * socket has finished with, instead of JSON.stringify and an encode of the whole.
 *
 * Why: JSON escapes a control character in six bytes, so 30,000 NULs of a poll's output (and the
 * same again in its `text`) are a string of 360 kB. A string that large is made in V8's
 * large-object space, which only a full collection frees, and its encoding for the socket is a
 * new buffer outside the heap, whose growth also asks for full collections: a job printing zeros
 * made the daemon collect its whole heap every few polls (the capture-shapes bench). Here the
 * text is escaped a slice at a time (each slice's JSON a small young string) straight into a
 * buffer that is used again once written.
 */

/** Characters of text escaped at a time: at most 48 kB of JSON, well under V8's large-object size. */
const SLICE = 8192;
/** Spare buffers kept for the next answers (each at least the largest answer of late). */
const MAX_SPARE = 2;
const spare: Buffer[] = [];

/** Whether a text is large enough to be answered this way rather than by JSON.stringify. */
export const LARGE_TEXT = 16 * 1024;

/**
 * `fields` as JSON (small values, in their order), then each of `texts` as a JSON string made of
 * its parts in order: `{...fields, [key]: parts.join('')}` as bytes, without joining the parts.
 */
export function jsonAnswer(fields: Record<string, unknown>, texts: [key: string, parts: string[]][]): JsonText {
  const head = JSON.stringify(fields);
  let bound = Buffer.byteLength(head) + 2;
  // At most six bytes of JSON per UTF-16 unit (\u0000; a character of three UTF-8 bytes is one unit).
  for (const [key, parts] of texts) bound += key.length + 6 + 6 * parts.reduce((n, p) => n + p.length, 0);
  const i = spare.findIndex((b) => b.length >= bound);
  const buf = i >= 0 ? spare.splice(i, 1)[0] : Buffer.allocUnsafeSlow(Math.max(bound, 256 * 1024));
  let pos = buf.write(head, 0, 'utf8') - 1; // over the closing brace
  for (const [key, parts] of texts) {
    pos += buf.write(`${pos > 1 ? ',' : ''}${JSON.stringify(key)}:""`, pos, 'utf8');
    // Each slice's JSON string goes over the last two bytes, the byte before the closing quote
    // put back: its opening quote and the closing quote before it fall away.
    for (const text of parts) {
      for (let at = 0; at < text.length; ) {
        let end = Math.min(at + SLICE, text.length);
        // Never between the halves of a surrogate pair: each half alone would be written as an escape.
        if (end < text.length && isHigh(text.charCodeAt(end - 1))) end--;
        const from = pos - 2;
        const before = buf[from];
        pos = from + buf.write(JSON.stringify(text.slice(at, end)), from, 'utf8');
        buf[from] = before;
        at = end;
      }
    }
  }
  pos += buf.write('}', pos, 'latin1');
  return new JsonText(buf.subarray(0, pos), () => {
    if (spare.length < MAX_SPARE) spare.push(buf);
  });
}

const isHigh = (c: number) => c >= 0xd800 && c <= 0xdbff;
