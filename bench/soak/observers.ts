import { BenchClient } from '../lib/client.js';
import { sleep } from '../lib/stats.js';
import { Random } from './random.js';
import { check, Mismatch, same, type Recorder } from './record.js';

/** The observer's own long job: a line every half second for two minutes. */
const TICKS = 240;

interface Common {
  socket: string;
  workdir: string;
  /** The agents' scopes, which observers read. */
  scopes: string[];
  rec: Recorder;
  stopping: () => boolean;
  log: (line: string) => void;
}

/**
 * A dashboard-like client: lists the agents' scopes a page at a time, pages the log of a session
 * it saw there (which may be forgotten meanwhile), and follows a long ticking job of its own with
 * poll, paging back through its log while it runs, checking that every tick comes exactly once
 * and in order while other clients keep the daemon busy.
 */
export async function observe(name: string, seed: number, paceMs: number, o: Common): Promise<void> {
  const client = await BenchClient.connect(o.socket);
  const rand = new Random(seed);
  const scope = name;
  let ticker: string | undefined;
  let ticks = '';
  const startTicker = async () => {
    const r = await client.call('exec', {
      command: `for i in $(seq 1 ${TICKS}); do echo "tick $i"; sleep 0.5; done`,
      background: true,
      stdin: 'null',
      scope,
      workdir: o.workdir,
    });
    ticker = r.sessionId;
    ticks = '';
  };
  const followTicker = async () => {
    if (!ticker) return startTicker();
    const r = await client.call('process', { action: 'poll', sessionId: ticker, scope });
    ticks += r.output ?? '';
    if (r.status === 'running') {
      if (rand.chance(0.3)) await pageTicker(ticker);
      return;
    }
    const id = ticker;
    ticker = undefined;
    same(r.status, 'completed', `ticker ${id} status`);
    let expected = '';
    for (let i = 1; i <= TICKS; i++) expected += `tick ${i}\n`;
    same(ticks, expected, `ticker ${id} output`);
    await client.call('process', { action: 'clear', sessionId: id, scope });
  };
  /** A page from the middle of the running ticker's log: line k is `tick k+1`. */
  const pageTicker = async (id: string) => {
    const seen = ticks.split('\n').length - 1;
    if (seen < 2) return;
    const offset = rand.int(0, seen - 1);
    const page = await client.call('process', { action: 'log', sessionId: id, scope, offset, limit: 10 });
    const want = Array.from({ length: Math.min(10, seen - offset) }, (_, i) => `tick ${offset + i + 1}`);
    const got = String(page.output).split('\n').slice(0, want.length);
    same(got.join('\n'), want.join('\n'), `ticker ${id} log from line ${offset}`);
  };
  const browse = async () => {
    const theirs = rand.pick(o.scopes);
    const page = await client.call('process', { action: 'list', scope: theirs, ...(rand.chance(0.8) ? { limit: 20 } : {}) });
    check(page.total >= page.sessions.length, `list total ${page.total} < ${page.sessions.length} sessions on the page`);
    if (!page.sessions.length) return;
    const s = rand.pick(page.sessions as any[]);
    const range = rand.chance(0.5) ? { limit: 50 } : { offset: 0, limit: 20 };
    try {
      const log = await client.call('process', { action: 'log', sessionId: s.sessionId, scope: theirs, ...range });
      check(typeof log.output === 'string' && log.totalLines >= log.lines, `log answered ${JSON.stringify(log).slice(0, 200)}`);
    } catch (err) {
      // The agent may have cleared it since the list.
      if ((err as { rpc?: any }).rpc?.data?.kind !== 'not_found') throw err;
    }
  };
  try {
    while (!o.stopping()) {
      await o.rec.run(name, 'follow-ticker', followTicker, o.log);
      await o.rec.run(name, 'list-log', browse, o.log);
      await sleep(rand.exponential(paceMs, 3));
    }
  } finally {
    client.close();
  }
}

/**
 * A subscriber to every event of one scope. It checks that each session's output events are
 * contiguous (each chunk's offset is where the previous one ended) and that nothing is dropped.
 */
export async function subscribeAll(scope: string, o: Common): Promise<{ counts: Record<string, number>; done: Promise<void> }> {
  const client = await BenchClient.connect(o.socket);
  const counts: Record<string, number> = {};
  const offsets = new Map<string, number>();
  client.onNotification = (msg) => {
    const ev = msg.params;
    if (msg.method !== 'event') return;
    counts[ev.type] = (counts[ev.type] ?? 0) + 1;
    try {
      if (ev.type === 'dropped') throw new Mismatch(`subscriber of ${scope} was told ${ev.count} events were dropped: ${ev.text}`);
      if (ev.type === 'started') offsets.set(ev.sessionId, 0);
      else if (ev.type === 'output') {
        const at = offsets.get(ev.sessionId);
        // A session started before the subscription (the agents start first) is not followed.
        if (at === undefined) return;
        same(ev.offset, at, `offset of an output event of ${ev.sessionId}`);
        offsets.set(ev.sessionId, at + ev.data.length);
      } else if (ev.type === 'exited') offsets.delete(ev.sessionId);
    } catch (err) {
      const f = o.rec.fail(`subscriber-${scope}`, 'events', err);
      o.log(`! ${f.atS.toFixed(0)} s subscriber-${scope}: ${f.message}`);
      offsets.delete(ev.sessionId);
    }
  };
  await client.call('subscribe', { scope });
  const done = (async () => {
    while (!o.stopping()) await sleep(500);
    client.close();
  })();
  return { counts, done };
}

/** Subscribers that come and go: connect, subscribe, stay a few seconds, then unsubscribe or just leave. */
export async function churnSubscribers(seed: number, o: Common): Promise<void> {
  const rand = new Random(seed);
  while (!o.stopping()) {
    await o.rec.run('churn', 'subscribe-churn', async () => {
      const client = await BenchClient.connect(o.socket);
      try {
        const { subscription } = await client.call('subscribe', { scope: rand.pick(o.scopes), ...(rand.chance(0.5) ? { events: ['exited'] } : {}) });
        await sleep(rand.int(1000, 6000));
        if (rand.chance(0.5)) same(JSON.stringify(await client.call('unsubscribe', { subscription })), '{}', 'unsubscribe');
      } finally {
        client.close();
      }
    }, o.log);
    await sleep(rand.int(3000, 12_000));
  }
}
