import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { missedOutput, type LogCall } from '../../../src/rpc/missed-output.js';
import { pageText } from '../../../src/tools/process/log.js';

/**
 * `log {limit}` as the daemon answers it for a session whose whole output is `text` (nothing
 * dropped, a page asked by limit is never cut): the page's lines and where it starts (logAction).
 */
function logOf(text: string, stderr: [number, number][] = []): LogCall & { calls: number[] } {
  const calls: number[] = [];
  const call = async (limit: number) => {
    calls.push(limit);
    const page = pageText(text, undefined, limit);
    const runs = stderr.map(([a, b]): [number, number] => [Math.max(a, page.start) - page.start, Math.min(b, page.start + page.output.length) - page.start]).filter(([a, b]) => a < b);
    return { status: 'running', output: page.output, offset: page.from, totalLines: page.totalLines, totalChars: text.length, droppedChars: 0, startChar: page.start, ...(runs.length > 0 ? { stderr: runs } : {}) };
  };
  return Object.assign(call, { calls });
}

const joined = (events: { data: string }[]) => events.map((e) => e.data).join('');

describe('missedOutput: what a session printed past an offset', () => {
  it('is every character past the offset, each once, where the whole output has it', async () => {
    const lines = fc.array(fc.stringMatching(/^[a-z ]{0,12}$/), { maxLength: 1200 });
    await fc.assert(
      fc.asyncProperty(lines, fc.boolean(), fc.double({ min: 0, max: 1, noNaN: true }), async (ls, endsWithNewline, where) => {
        const text = ls.join('\n') + (endsWithNewline && ls.length > 0 ? '\n' : '');
        const from = Math.floor(where * text.length);
        const { events, status } = await missedOutput(logOf(text), 's1', from);
        expect(status).toBe('running');
        expect(joined(events)).toBe(text.slice(from));
        let at = from;
        for (const e of events) {
          expect(e.offset).toBe(at);
          at += e.data.length;
        }
      }),
      { numRuns: 200 },
    );
  });

  it('reads further back only as far as the offset needs: the last 200 lines, then four times more', async () => {
    const text = Array.from({ length: 1000 }, (_, i) => `line ${i}`).join('\n') + '\n';
    const near = logOf(text);
    await missedOutput(near, 's1', text.indexOf('line 990'));
    expect(near.calls).toEqual([200]);
    const far = logOf(text);
    expect(joined((await missedOutput(far, 's1', text.indexOf('line 10\n'))).events)).toBe(text.slice(text.indexOf('line 10\n')));
    expect(far.calls).toEqual([200, 800, 3200]);
  });

  it('says which stream each part came on', async () => {
    const text = 'out 1\nerr 1\nout 2\n';
    const { events } = await missedOutput(logOf(text, [[6, 12]]), 's1', 3);
    expect(events.map((e) => [e.stream, e.data])).toEqual([
      ['stdout', ' 1\n'],
      ['stderr', 'err 1\n'],
      ['stdout', 'out 2\n'],
    ]);
  });

  it('with the offset Infinity, only the status', async () => {
    const r = await missedOutput(logOf('a\nb\n'), 's1', Infinity);
    expect(r).toEqual({ events: [], status: 'running' });
  });
});
