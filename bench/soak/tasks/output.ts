import { call, exec, forget, pollToEnd, proc, type Agent } from '../agent.js';
import { check, same } from '../record.js';

const lines = (from: number, to: number, fmt: (i: number) => string) => {
  let s = '';
  for (let i = from; i <= to; i++) s += `${fmt(i)}\n`;
  return s;
};

/** A short foreground command with known output, sometimes through the `tool` method. */
export async function execOutput(a: Agent): Promise<void> {
  const n = a.rand.int(1, 300);
  const params = { command: `printf 'line %d\\n' $(seq 1 ${n})`, stdin: a.rand.pick(['pipe', 'null']) };
  const r = a.rand.chance(0.3) ? await call(a, 'tool', { tool: 'exec', workdir: a.workdir, ...params }) : await exec(a, params);
  a.started.add(r.sessionId);
  same(r.status, 'completed', 'status');
  same(r.exitCode, 0, 'exit code');
  same(r.output, lines(1, n, (i) => `line ${i}`), `output of ${n} lines`);
  same(r.truncated, false, 'truncated');
  await forget(a, r.sessionId);
}

/** Both streams and an exit code. */
export async function execExitCode(a: Agent): Promise<void> {
  const k = ++a.n;
  const code = a.rand.int(0, 5);
  const r = await exec(a, { command: `echo out-${k}; echo err-${k} >&2; exit ${code}` });
  same(r.status, 'completed', 'status');
  same(r.exitCode, code, 'exit code');
  // Two pipes: their order of arrival is not fixed, their content is.
  same(String(r.output).split('\n').sort().join('\n'), `\nerr-${k}\nout-${k}`, 'output lines');
  check(code === 0 || String(r.text).endsWith(`(Command exited with code ${code})`), `text does not name exit code ${code}: ${r.text}`);
  await forget(a, r.sessionId);
}

export async function execNotFound(a: Agent): Promise<void> {
  const r = await exec(a, { command: `soak-no-such-command-${++a.n}` });
  same(r.status, 'failed', 'status');
  same(r.exitCode, 127, 'exit code');
  same(r.reason, 'command_not_found', 'reason');
  await forget(a, r.sessionId);
}

/** A backgrounded job polled until it is done; every line must come exactly once. */
export async function backgroundPolled(a: Agent): Promise<void> {
  const k = a.rand.int(3, 20);
  const r = await exec(a, {
    command: `for i in $(seq 1 ${k}); do echo "step $i"; sleep 0.1; done`,
    ...(a.rand.chance(0.5) ? { background: true } : { yieldMs: 200 }),
  });
  same(r.status, 'running', 'status at the yield');
  const { output, last } = await pollToEnd(a, r.sessionId);
  same(last.status, 'completed', 'final status');
  same(last.exitCode, 0, 'exit code');
  same(output, lines(1, k, (i) => `step ${i}`), 'polled output');
  await forget(a, r.sessionId);
}

/** Output far past every cap: the pending cap drops, the retained cap truncates, the spool rotates. */
export async function bigOutput(a: Agent): Promise<void> {
  // Both are over 1 MiB, so the spool (maxLogBytes = 1 MiB) rotates.
  const m = a.rand.pick([200_000, 300_000]);
  const total = seqChars(m);
  const r = await exec(a, { command: `seq 1 ${m}`, background: true, stdin: 'null' });
  same(r.status, 'running', 'status');
  const ev = await a.events.next('exited', r.sessionId, 30_000);
  same(ev.status, 'completed', 'exited event status');
  const p = await proc(a, 'poll', { sessionId: r.sessionId });
  same(p.exitCode, 0, 'exit code');
  check(String(p.output).endsWith(`\n${m - 1}\n${m}\n`), `poll output does not end with ${m}: ${JSON.stringify(String(p.output).slice(-40))}`);
  check(p.droppedChars?.stdout > 0, `poll of ${total} chars dropped nothing: ${JSON.stringify(p.droppedChars)}`);
  const tail = await proc(a, 'log', { sessionId: r.sessionId, limit: 5 });
  same(tail.output, [m - 4, m - 3, m - 2, m - 1, m].join('\n'), 'last 5 lines of log');
  same(tail.source, 'spool', 'log source');
  same(tail.truncated, true, 'truncated');
  same(tail.totalChars + tail.droppedChars, total, 'log chars held + dropped');
  // The oldest kept line may be partial; every one after it follows the one before.
  const head = await proc(a, 'log', { sessionId: r.sessionId, offset: 0, limit: 20 });
  const nums = String(head.output).split('\n').slice(1).map(Number);
  check(nums.length === 19 && nums.every((x, i) => i === 0 || x === nums[i - 1] + 1), `log lines 1-19 are not consecutive: ${head.output}`);
  const mid = Math.floor(tail.totalLines / 2);
  const middle = await proc(a, 'log', { sessionId: r.sessionId, offset: mid, limit: 10 });
  const midNums = String(middle.output).split('\n').map(Number);
  check(midNums.length === 10 && midNums.every((x, i) => i === 0 || x === midNums[i - 1] + 1), `log lines ${mid}.. are not consecutive: ${middle.output}`);
  same(midNums[9], m - (tail.totalLines - mid - 10), `log line ${mid + 9}`);
  await forget(a, r.sessionId);
}

/** Characters `seq 1 m` prints. */
function seqChars(m: number): number {
  let n = 0;
  for (let digits = 1, lo = 1; lo <= m; digits++, lo *= 10) n += (Math.min(m, lo * 10 - 1) - lo + 1) * (digits + 1);
  return n;
}

/** A short command on a terminal: its size and a computed line, with the terminal's line ends. */
export async function ptyOutput(a: Agent): Promise<void> {
  const x = a.rand.int(2, 99);
  const r = await exec(a, { command: `stty size; echo pty-$((${x}*7))`, pty: true });
  same(r.status, 'completed', 'status');
  same(r.exitCode, 0, 'exit code');
  same(r.output, `30 120\r\npty-${x * 7}\r\n`, 'terminal output');
  await forget(a, r.sessionId);
}
