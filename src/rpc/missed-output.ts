/** An `output` event as a subscription sends it (SPEC §6): `offset` is where `data` starts in the session's whole output. */
export interface OutputEvent {
  [key: string]: unknown;
  type: 'output';
  sessionId: string;
  stream: 'stdout' | 'stderr';
  data: string;
  offset: number;
}

/** `process {action: "log", sessionId, limit}` as the caller is allowed to ask it (its scope and credentials). */
export type LogCall = (limit: number) => Promise<Record<string, any>>;

/**
 * The output of session `id` past offset `from`, as output events by stream, read with `log`
 * (its last lines, more until they reach back to `from`); and the session's status. `from`
 * Infinity: only the status. What a client that lost its connection (a restart) missed, for the
 * CLI's feed (cli/feed.ts) and the console (console/live.ts).
 */
export async function missedOutput(log: LogCall, id: string, from: number): Promise<{ events: OutputEvent[]; status: unknown }> {
  for (let limit = from === Infinity ? 0 : 200; ; limit *= 4) {
    const page = await log(limit);
    const start = Number(page.startChar);
    const end = Number(page.droppedChars) + Number(page.totalChars);
    if (!Number.isFinite(start) || !Number.isFinite(end)) return { events: [], status: page.status }; // a daemon from before startChar
    let text = String(page.output ?? '');
    const stderr = ((page.stderr as [number, number][] | undefined) ?? []).map(([a, b]): [number, number] => [a, b]);
    // A page leaves out the newline that ends its last line: the whole output ended with it (on the last character's stream).
    if (start + text.length === end - 1) {
      for (const run of stderr) if (run[1] === text.length) run[1]++;
      text += '\n';
    }
    if (from === Infinity) return { events: [], status: page.status };
    if (start > from && Number(page.offset) > 0 && limit < Number(page.totalLines)) continue;
    const events: OutputEvent[] = [];
    let i = Math.max(0, from - start);
    while (i < text.length) {
      const run = stderr.find(([a, b]) => i >= a && i < b);
      const next = run ? run[1] : Math.min(text.length, ...stderr.map(([a]) => a).filter((a) => a > i));
      const to = Math.max(next, i + 1);
      events.push({ type: 'output', sessionId: id, stream: run ? 'stderr' : 'stdout', data: text.slice(i, to), offset: start + i });
      i = to;
    }
    return { events, status: page.status };
  }
}
