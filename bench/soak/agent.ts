import { BenchClient } from '../lib/client.js';
import { sleep } from '../lib/stats.js';
import { SessionEvents } from './events.js';
import { Random } from './random.js';
import { check, SoakTimeout, type Recorder } from './record.js';

/** One simulated agent: its own connection, scope and event subscription; it does one task at a time. */
export interface Agent {
  name: string;
  scope: string;
  client: BenchClient;
  events: SessionEvents;
  /** Where its commands run (a temp dir, never the repository). */
  workdir: string;
  socket: string;
  rand: Random;
  /** Sessions the current task started: removed if the task fails, so a failure leaves nothing running. */
  started: Set<string>;
  /** The running session of its thread key, if any. */
  keyed?: string;
  /** A counter for unique names and values. */
  n: number;
}

export type Task = (a: Agent) => Promise<void>;

export function call(a: Agent, method: string, params: Record<string, unknown> = {}): Promise<any> {
  return a.client.call(method, { ...params, scope: a.scope });
}

export function proc(a: Agent, action: string, params: Record<string, unknown> = {}): Promise<any> {
  return call(a, 'process', { action, ...params });
}

/** `exec` in the agent's scope and workdir; the session is noted as started by the current task. */
export async function exec(a: Agent, params: Record<string, unknown>): Promise<any> {
  const r = await call(a, 'exec', { workdir: a.workdir, ...params });
  if (typeof r.sessionId === 'string') a.started.add(r.sessionId);
  return r;
}

const LIVE = new Set(['running', 'waiting_input', 'approval_required']);
export const isLive = (status: string) => LIVE.has(status);

/** Poll (waiting up to a second each time) until the session has ended; the output of every poll, joined. */
export async function pollToEnd(a: Agent, sessionId: string, withinMs = 30_000): Promise<{ output: string; last: any }> {
  const deadline = Date.now() + withinMs;
  let output = '';
  for (;;) {
    const r = await proc(a, 'poll', { sessionId, timeout: 1000 });
    output += r.output ?? '';
    if (!isLive(r.status)) return { output, last: r };
    if (Date.now() > deadline) throw new SoakTimeout(`session ${sessionId} still ${r.status} after ${withinMs} ms of polling`);
  }
}

/** Poll until the output so far contains `text` (the job is ready); the output so far. */
export async function pollUntil(a: Agent, sessionId: string, text: string, withinMs = 10_000): Promise<string> {
  const deadline = Date.now() + withinMs;
  let output = '';
  for (;;) {
    const r = await proc(a, 'poll', { sessionId, timeout: 500 });
    output += r.output ?? '';
    if (output.includes(text)) return output;
    check(isLive(r.status), `session ${sessionId} ended (${r.status}) before printing ${JSON.stringify(text)}: ${JSON.stringify(output.slice(-200))}`);
    if (Date.now() > deadline) throw new SoakTimeout(`session ${sessionId} did not print ${JSON.stringify(text)} within ${withinMs} ms`);
  }
}

/** What an agent does with a finished session: mostly clear it, sometimes remove it, else leave it to the TTL. */
export async function forget(a: Agent, sessionId: string): Promise<void> {
  a.started.delete(sessionId);
  a.events.forget(sessionId);
  const r = a.rand.next();
  if (r < 0.6) {
    const rec = await proc(a, 'clear', { sessionId });
    check(rec.sessionId === sessionId && !isLive(rec.status), `clear answered ${JSON.stringify(rec).slice(0, 200)}`);
  } else if (r < 0.7) {
    const rec = await proc(a, 'remove', { sessionId });
    check(rec.sessionId === sessionId && !isLive(rec.status), `remove answered ${JSON.stringify(rec).slice(0, 200)}`);
  }
}

export interface AgentLoop {
  agent: Agent;
  done: Promise<void>;
}

export async function startAgent(
  name: string,
  opts: { socket: string; workdir: string; seed: number; paceMs: number; mix: [string, number, Task][] },
  rec: Recorder,
  stopping: () => boolean,
  log: (line: string) => void,
): Promise<AgentLoop> {
  const client = await BenchClient.connect(opts.socket);
  const scope = name;
  const events = await SessionEvents.subscribe(client, scope);
  const agent: Agent = { name, scope, client, events, workdir: opts.workdir, socket: opts.socket, rand: new Random(opts.seed), started: new Set(), n: 0 };
  const total = opts.mix.reduce((s, [, w]) => s + w, 0);
  const pick = () => {
    let x = agent.rand.next() * total;
    for (const entry of opts.mix) if ((x -= entry[1]) < 0) return entry;
    return opts.mix[opts.mix.length - 1];
  };
  const done = (async () => {
    // Agents start a little apart, as they would.
    await sleep(agent.rand.int(0, opts.paceMs));
    while (!stopping()) {
      const [task, , fn] = pick();
      agent.started.clear();
      const before = rec.failureCount;
      await rec.run(name, task, () => fn(agent), log);
      if (rec.failureCount > before) await cleanUp(agent);
      await sleep(agent.rand.exponential(opts.paceMs, 4));
    }
  })();
  return { agent, done };
}

/** After a failed task: remove whatever it started that may still run. */
async function cleanUp(a: Agent): Promise<void> {
  for (const sessionId of a.started) {
    try {
      await proc(a, 'remove', { sessionId });
    } catch {
      // already gone
    }
  }
  a.started.clear();
}
