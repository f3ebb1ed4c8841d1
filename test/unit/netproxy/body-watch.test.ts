import { describe, expect, it } from 'vitest';
import { PlaceholderWatch } from '../../../src/netproxy/body-watch.js';

const A = { name: 'A', placeholder: 'procctl-placeholder-A-abcdefghijklmnopqrstuvwx' };
const B = { name: 'B', placeholder: 'procctl-placeholder-B-0123456789abcdefghijklmn' };

/** Feed `chunks` through a watch: what it let through, and the credential it found (if any). */
function feed(chunks: string[]): { passed: string; found?: string } {
  const w = new PlaceholderWatch([A, B]);
  let passed = '';
  for (const c of chunks) {
    const out = w.write(Buffer.from(c));
    if (!Buffer.isBuffer(out)) return { passed, found: out.found.name };
    passed += out.toString();
  }
  return { passed: passed + w.end().toString() };
}

describe('PlaceholderWatch: placeholders in a request body as it passes', () => {
  it('finds a placeholder whole in one chunk, and lets nothing of that chunk through', () => {
    expect(feed(['x=1&', `token=${B.placeholder}&y=2`])).toEqual({ passed: 'x=1&', found: 'B' });
  });

  it('finds one split across chunks, having held its start back: the start never passes', () => {
    const cut = 9;
    const r = feed(['aaaa', `bbbb${A.placeholder.slice(0, cut)}`, A.placeholder.slice(cut, 30), `${A.placeholder.slice(30)}cccc`]);
    expect(r).toEqual({ passed: 'aaaabbbb', found: 'A' });
  });

  it('lets a body without one through whole, holding back only what could start one, until the next chunk or the end', () => {
    const w = new PlaceholderWatch([A]);
    expect(w.write(Buffer.from('data procctl-pl')).toString()).toBe('data ');
    expect(w.write(Buffer.from('ain text')).toString()).toBe('procctl-plain text');
    expect(w.write(Buffer.from('ends with p')).toString()).toBe('ends with ');
    expect(w.end().toString()).toBe('p');
    expect(feed(['no placeholder here', ' nor here'])).toEqual({ passed: 'no placeholder here nor here' });
  });

  it('with nothing to watch, passes every chunk as it is', () => {
    const w = new PlaceholderWatch([]);
    const chunk = Buffer.from(A.placeholder);
    expect(w.empty).toBe(true);
    expect(w.write(chunk)).toBe(chunk);
  });
});
