import { afterEach, describe, expect, it, vi } from 'vitest';
import { TerminalCuts } from '../../../src/shells/cuts.js';

/**
 * A terminal shell's output cut into commands (docs/shells.md "On a terminal", "A crash"), fed the
 * terminal's bytes and the end records as a real shell can deliver them: split across reads, the
 * terminal ahead of the status FIFO or behind it, the next command's output in the same read as
 * the cut before it.
 */
function harness() {
  const sent: string[] = [];
  const out = new Map<string, string>();
  const ended: string[] = [];
  let running = '';
  /** Records bash wrote that the daemon has not read yet (what readEndsNow finds). */
  const fifo: (() => void)[] = [];
  const cuts = new TerminalCuts({
    deliver: (_stream, text) => {
      if (running) out.set(running, (out.get(running) ?? '') + text);
    },
    send: (line, done) => {
      sent.push(line.trimEnd());
      done?.();
    },
    readEndsNow: () => {
      for (const r of fifo.splice(0)) r();
    },
  });
  const end = (id: string) => () => {
    ended.push(id);
    if (running === id) running = '';
  };
  const record = (id: string, probe?: { took: boolean }) => cuts.ended(end(id), [id, '0'], probe);
  return {
    cuts,
    sent,
    out,
    ended,
    run: (id: string) => (running = id),
    /** The daemon crashed while `id` ran: the next one sends the spare cut first; returns its text. */
    crashedWhile: (id: string) => {
      running = id;
      cuts.sendSpare(() => undefined);
      return sent[sent.length - 1];
    },
    /** `id` ended, then the crash probe did (its line did not read the spare): both records read at once. */
    endedThenProbe: (id: string) => {
      record(id);
      record('probe', { took: false });
    },
    /** The end record of command `id` (or the probe's, `took` saying whether its line read the spare). */
    record,
    /** Written by bash, not read yet: readEndsNow finds it. */
    recordLater: (id: string, probe?: { took: boolean }) => fifo.push(() => record(id, probe)),
    term: (text: string) => cuts.output('stdout', text),
  };
}

afterEach(() => {
  vi.useRealTimers();
});

describe('TerminalCuts', () => {
  it('ends a command at its cut, exactly, with the cut and the output split across reads', () => {
    const h = harness();
    h.run('a');
    h.term('hel');
    h.record('a');
    const cut = h.sent[0];
    h.term(`lo\r\n${cut.slice(0, 5)}`);
    h.term(cut.slice(5, 20));
    expect(h.ended).toEqual([]);
    h.term(cut.slice(20));
    expect(h.ended).toEqual(['a']);
    expect(h.out.get('a')).toBe('hello\r\n');
  });

  it('gives the command sent behind the crash probe what follows the probe\'s cut in the same read', () => {
    // Crashed while `c` ran: the spare, then the probe line queued behind `c`. `c` ends, the spare
    // closes it, the probe's answer comes with a fresh cut; the next command was sent before that
    // cut came back, and bash printed its output right after it.
    const h = harness();
    const spare = h.crashedWhile('c');
    h.endedThenProbe('c');
    const probeCut = h.sent[1];
    h.term(`50\r\n51\r\n${spare}`);
    expect(h.ended).toEqual(['c']);
    expect(h.out.get('c')).toBe('50\r\n51\r\n');
    h.run('again');
    h.term(`${probeCut}1 /work\r\n`);
    expect(h.ended).toEqual(['c', 'probe']);
    h.record('again');
    h.term(h.sent[2]);
    expect(h.ended).toEqual(['c', 'probe', 'again']);
    expect(h.out.get('again')).toBe('1 /work\r\n');
  });

  it('takes the spare for the end record bash wrote before printing it, though the terminal is read first', () => {
    const h = harness();
    const spare = h.crashedWhile('c');
    h.recordLater('c');
    h.term(`7\r\n${spare}`);
    expect(h.ended).toEqual(['c']);
    expect(h.out.get('c')).toBe('7\r\n');
    expect(h.sent).toHaveLength(1);
  });

  it('a spare printed for an end the dead daemon had read is not the probe\'s, though the probe\'s record is read at once', () => {
    // bash was waiting for the cut of an end the dead daemon read: it prints the spare, runs the
    // probe, writes its record and waits for the probe's own cut, which must be sent.
    const h = harness();
    const spare = h.crashedWhile('c');
    h.recordLater('probe', { took: false });
    h.term(`last\r\n${spare}`);
    expect(h.out.get('c')).toBe('last\r\n');
    expect(h.ended).toEqual([]);
    expect(h.sent).toHaveLength(2);
    h.term(h.sent[1]);
    expect(h.ended).toEqual(['probe']);
  });

  it('a spare the probe line read itself is never looked for: the probe gets its own cut, nothing is held', () => {
    const h = harness();
    h.crashedWhile('bg');
    h.term('procctl-');
    h.record('probe', { took: true });
    expect(h.out.get('bg')).toBe('procctl-');
    h.term(h.sent[1]);
    expect(h.ended).toEqual(['probe']);
    expect(h.sent).toHaveLength(2);
  });

  it('a cut that does not come ends its command with what came, after the loop had a turn to read it', () => {
    vi.useFakeTimers();
    const h = harness();
    h.run('a');
    h.record('a');
    h.term('^S stopped');
    vi.advanceTimersByTime(3000);
    expect(h.ended).toEqual([]);
    vi.runOnlyPendingTimers();
    expect(h.ended).toEqual(['a']);
    expect(h.out.get('a')).toBe('^S stopped');
  });

  it('hands on the cuts under way, in order, and takes them back', () => {
    const h = harness();
    h.crashedWhile('c');
    h.endedThenProbe('c');
    h.term('partial');
    const carried = h.cuts.carry();
    expect(carried.map((c) => c.text)).toEqual([h.sent[0], h.sent[1]]);
    h.cuts.clear();
    const next = harness();
    next.run('c');
    for (const c of carried) next.cuts.resume(c, () => next.ended.push(c.status[0]));
    next.term(`${carried[0].text}${carried[1].text}`);
    expect(next.ended).toEqual(['c', 'probe']);
    expect(next.out.get('c')).toBe('partial');
  });
});
