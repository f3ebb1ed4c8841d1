import fc from 'fast-check';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Spool } from '../../../src/session/spool.js';
import { describe, expect, it } from 'vitest';
import { uncancelled } from '../../helpers/session.js';
import { EventBus } from '../../../src/session/events.js';
import { Registry } from '../../../src/session/registry.js';
import { Session } from '../../../src/session/session.js';
import type { CallContext, Daemon } from '../../../src/tools/context.js';
import { capPage, DEFAULT_LOG_LINES, logAction, pageLines, pageText, splitLines } from '../../../src/tools/process/log.js';
import { RPC } from '../../../src/schema/voice.js';

const numbered = (n: number) => Array.from({ length: n }, (_, i) => `line ${i}`);

describe('splitLines', () => {
  it.each([
    ['', []],
    ['a', ['a']],
    ['a\n', ['a']],
    ['a\nb', ['a', 'b']],
    ['a\nb\n', ['a', 'b']],
    ['\n', ['']],
    ['a\n\n', ['a', '']],
    ['\n\nx', ['', '', 'x']],
  ])('%j → %j', (text, lines) => {
    expect(splitLines(text)).toEqual(lines);
  });

  it('property: joining the lines with newlines gives the text back, less one trailing newline', () => {
    fc.assert(
      fc.property(fc.string({ unit: fc.constantFrom('a', 'b', '\n', '\r', ' ') }), (text) => {
        const joined = splitLines(text).join('\n');
        expect(joined).toBe(text.endsWith('\n') ? text.slice(0, -1) : text);
      }),
    );
  });
});

describe('pageLines', () => {
  it('uses 200 lines by default', () => {
    expect(DEFAULT_LOG_LINES).toBe(200);
  });

  describe('neither offset nor limit: the last 200 lines', () => {
    it('shows every line without a hint when there are at most 200', () => {
      expect(pageLines([], undefined, undefined)).toEqual({ lines: [], from: 0, totalLines: 0, hint: undefined });
      const all = numbered(200);
      expect(pageLines(all, undefined, undefined)).toEqual({ lines: all, from: 0, totalLines: 200, hint: undefined });
    });

    it('shows the last 200 with a hint when it hides lines', () => {
      const all = numbered(201);
      const page = pageLines(all, undefined, undefined);
      expect(page.lines).toEqual(all.slice(1));
      expect(page.from).toBe(1);
      expect(page.totalLines).toBe(201);
      expect(page.hint).toBe('[showing last 200 of 201 lines; pass offset/limit to page]');
    });

    it('names the real total in the hint', () => {
      const page = pageLines(numbered(5000), undefined, undefined);
      expect(page.lines[0]).toBe('line 4800');
      expect(page.lines).toHaveLength(200);
      expect(page.hint).toBe('[showing last 200 of 5000 lines; pass offset/limit to page]');
    });
  });

  describe('limit only: the last L lines', () => {
    it('takes the last L', () => {
      expect(pageLines(numbered(10), undefined, 3)).toEqual({ lines: ['line 7', 'line 8', 'line 9'], from: 7, totalLines: 10, hint: undefined });
    });

    it('takes everything when L is larger than the output', () => {
      expect(pageLines(numbered(3), undefined, 50)).toEqual({ lines: numbered(3), from: 0, totalLines: 3, hint: undefined });
    });

    it('can take more than 200', () => {
      expect(pageLines(numbered(1000), undefined, 500).lines).toEqual(numbered(1000).slice(500));
    });

    it('takes nothing for L = 0', () => {
      expect(pageLines(numbered(10), undefined, 0).lines).toEqual([]);
    });
  });

  describe('offset only: line O to the end', () => {
    it('starts at O (0-based)', () => {
      expect(pageLines(numbered(10), 7, undefined)).toEqual({ lines: ['line 7', 'line 8', 'line 9'], from: 7, totalLines: 10, hint: undefined });
    });

    it('is not limited to 200 lines', () => {
      const page = pageLines(numbered(1000), 0, undefined);
      expect(page.lines).toHaveLength(1000);
      expect(page.hint).toBeUndefined();
    });
  });

  describe('offset and limit: lines [O, O+L)', () => {
    it('takes L lines from O', () => {
      expect(pageLines(numbered(10), 2, 3)).toEqual({ lines: ['line 2', 'line 3', 'line 4'], from: 2, totalLines: 10, hint: undefined });
    });

    it('stops at the end', () => {
      expect(pageLines(numbered(10), 8, 5).lines).toEqual(['line 8', 'line 9']);
    });

    it('takes nothing for L = 0', () => {
      expect(pageLines(numbered(10), 4, 0).lines).toEqual([]);
    });
  });

  describe('offset past the end', () => {
    it('at the end: nothing, no hint', () => {
      expect(pageLines(numbered(10), 10, undefined)).toEqual({ lines: [], from: 10, totalLines: 10, hint: undefined });
    });

    it('beyond the end: nothing, and a hint naming how many lines there are', () => {
      for (const limit of [undefined, 5]) {
        const page = pageLines(numbered(10), 25, limit);
        expect(page.lines).toEqual([]);
        expect(page.from).toBe(10);
        expect(page.totalLines).toBe(10);
        expect(page.hint).toContain('25');
        expect(page.hint).toContain('10 lines');
      }
    });
  });

  it('property: the page is the slice the SPEC names', () => {
    const opt = (max: number) => fc.option(fc.nat({ max }), { nil: undefined });
    fc.assert(
      fc.property(fc.nat({ max: 600 }), opt(700), opt(700), (total, offset, limit) => {
        const all = numbered(total);
        const page = pageLines(all, offset, limit);
        let expected: string[];
        if (offset === undefined && limit === undefined) expected = all.slice(-200);
        else if (offset === undefined) expected = limit === 0 ? [] : all.slice(-limit!);
        else expected = all.slice(offset, limit === undefined ? undefined : offset + limit);
        expect(page.lines).toEqual(expected);
        expect(page.totalLines).toBe(total);
        expect(all.slice(page.from, page.from + page.lines.length)).toEqual(page.lines);
        const defaultHides = offset === undefined && limit === undefined && total > 200;
        expect(page.hint !== undefined).toBe(defaultHides || (offset !== undefined && offset > total));
      }),
      { numRuns: 500 },
    );
  });
});

describe('pageText', () => {
  it('property: the same page as pageLines over splitLines, found in place', () => {
    const opt = fc.option(fc.nat({ max: 12 }), { nil: undefined });
    fc.assert(
      fc.property(fc.string({ unit: fc.constantFrom('a', 'b', '\n', ' '), maxLength: 40 }), opt, opt, (text, offset, limit) => {
        const all = splitLines(text);
        const want = pageLines(all, offset, limit);
        const got = pageText(text, offset, limit);
        expect(got.output).toBe(want.lines.join('\n'));
        expect([got.from, got.lines, got.totalLines, got.hint]).toEqual([want.from, want.lines.length, want.totalLines, want.hint]);
        // Where the page starts: after its earlier lines and their newlines.
        if (got.lines > 0) expect(got.start).toBe(all.slice(0, got.from).reduce((n, l) => n + l.length + 1, 0));
      }),
    );
  });

  it('pages 200 of many lines from either end', () => {
    const text = numbered(5000).join('\n') + '\n';
    expect(pageText(text, undefined, undefined).output).toBe(numbered(5000).slice(4800).join('\n'));
    expect(pageText(text, 10, 2).output).toBe('line 10\nline 11');
  });
});

describe('capPage', () => {
  it('keeps a page within the cap: the newest characters of a tail page, the first of a page from an offset', () => {
    expect(capPage('abcdef', 10, true)).toEqual({ output: 'abcdef', cut: 0 });
    expect(capPage('abcdef', 4, true)).toEqual({ output: 'cdef', cut: 2 });
    expect(capPage('abcdef', 4, false)).toEqual({ output: 'abcd', cut: 2 });
  });

  it('never splits a surrogate pair', () => {
    expect(capPage('a😀b', 2, true)).toEqual({ output: 'b', cut: 3 });
    expect(capPage('a😀b', 2, false)).toEqual({ output: 'a', cut: 3 });
  });
});

describe('logAction', () => {
  function setup(maxOutputChars = 1_000_000) {
    const registry = new Registry();
    const s = new Session({
      id: 'sess',
      scope: 'default',
      command: 'x',
      name: 'x',
      cwd: '/',
      stdin: 'pipe',
      maxOutputChars,
      pendingMaxOutputChars: 1000,
      events: new EventBus(),
      now: () => 0,
    });
    registry.add(s);
    const d = { registry } as unknown as Daemon;
    const ctx: CallContext = { scope: 'default', ...uncancelled(), voice: RPC };
    return { s, log: (p: { offset?: number; limit?: number }) => logAction(d, ctx, { action: 'log', sessionId: 'sess', ...p }) };
  }

  it('puts the paging hint in text only, never in output', async () => {
    const { s, log } = setup();
    s.onOutput('stdout', Buffer.from(numbered(250).join('\n') + '\n'));
    const r = await log({});
    expect(r.output).toBe(numbered(250).slice(50).join('\n'));
    expect(r.output).not.toContain('showing last');
    expect(r.text).toContain('[showing last 200 of 250 lines; pass offset/limit to page]');
    expect(r.totalLines).toBe(250);
    expect(r.totalChars).toBe(s.output.totalChars);
    expect(r.truncated).toBe(false);
  });

  it('never drains what poll has not returned', async () => {
    const { s, log } = setup();
    s.onOutput('stdout', Buffer.from('a\nb\n'));
    log({});
    log({ offset: 0 });
    expect(s.output.drain().text).toBe('a\nb\n');
  });

  it('says when the cap dropped output and that lines count from the oldest retained', async () => {
    const { s, log } = setup(8);
    s.onOutput('stdout', Buffer.from('one\ntwo\nsix\n'));
    const r = await log({ offset: 0 });
    expect(r.output).toBe('two\nsix');
    expect(r.truncated).toBe(true);
    expect(r.droppedChars).toBe(4);
    expect(r.text).toMatch(/first 4 characters were dropped/);
  });

  it('holds a page from the spool within the cap when one line is longer, and counts what it cut', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'procctl-log-'));
    try {
      const registry = new Registry();
      const spool = new Spool(join(dir, 'out.log'), 1 << 20);
      const s = new Session({ id: 'sess', scope: 'default', command: 'x', name: 'x', cwd: '/', stdin: 'pipe', maxOutputChars: 100, pendingMaxOutputChars: 10, events: new EventBus(), now: () => 0, spool });
      registry.add(s);
      const d = { registry } as unknown as Daemon;
      const ctx: CallContext = { scope: 'default', ...uncancelled(), voice: RPC };
      // One line of 1,000 characters, no newline: the spool has it all, memory the newest 100.
      const line = Array.from({ length: 100 }, (_, i) => String(i % 10).repeat(10)).join('');
      for (let i = 0; i < 1000; i += 100) s.onOutput('stdout', Buffer.from(line.slice(i, i + 100)));
      const tail = await logAction(d, ctx, { action: 'log', sessionId: 'sess' });
      expect(tail.source).toBe('spool');
      expect(tail.output).toBe(line.slice(900));
      expect(tail.cutChars).toBe(900);
      expect(tail.totalChars).toBe(1000);
      expect(tail.text).toContain('[the first 900 characters of this page were cut');
      // A page asked for by offset or limit is given whole.
      const head = await logAction(d, ctx, { action: 'log', sessionId: 'sess', offset: 0 });
      expect(head.output).toBe(line);
      expect(head.cutChars).toBeUndefined();
      await spool.close();
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('says so when there is no output yet', async () => {
    const { log } = setup();
    const r = await log({});
    expect(r.output).toBe('');
    expect(r.totalLines).toBe(0);
    expect(r.text).toBe('(no output yet)');
  });
});
