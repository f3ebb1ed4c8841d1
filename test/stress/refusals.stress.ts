import { connect, type Socket } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { alive, startDaemon, waitFor, type TestDaemon } from '../helpers/daemon.js';
import { sayIfDaemonDies } from './bystander.js';

/**
 * Connections past rpc.maxConnectionsPerUid (SPEC §4) opened in a tight loop while admitted ones
 * close: each refused client gets its refusal line and then the end of the stream, whatever it
 * does after connecting (writes its request at once, writes it a moment later without reading
 * until then, goes away at once), and none waits without an answer. The daemon logs no error
 * for a client that went away before its refusal was written.
 */

/** The connections one uid may hold: the loop's workers are three times as many. */
const LIMIT = 8;
const WORKERS = 24;
const TRIES_EACH = 25;
/** How long one client may wait for its answer, its refusal or its end: generous, for a loaded machine. */
const DEADLINE_MS = 20_000;

let d: TestDaemon;
const sockets = new Set<Socket>();

beforeAll(async () => {
  d = await startDaemon({ config: { rpc: { maxConnectionsPerUid: LIMIT } } });
  sayIfDaemonDies(d);
});

afterAll(async () => {
  for (const s of sockets) s.destroy();
  await d?.stop();
});

const STATUS = `${JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'daemon.status' })}\n`;
const refusals = () => d.stdout().split('refused a connection').length - 1;

/** How a client behaves after it connects. */
type Behaviour = 'at-once' | 'late' | 'gone';

/** What happened to one client: answered (admitted, still open), refused (the line, then the end), or what went wrong. */
interface Outcome {
  kind: 'answered' | 'refused' | 'closed without a line' | 'refused and never closed' | 'nothing within the deadline';
  text: string;
  socket: Socket;
}

/**
 * One client. `at-once` writes its request before it is even connected and reads all along;
 * `late` reads nothing until it has written, and writes after `ready` (a request sent a moment
 * after connecting); `gone` closes as soon as it is connected and is not waited for.
 */
async function client(behaviour: Behaviour, ready: () => Promise<void> = async () => {}): Promise<Outcome | undefined> {
  const socket = connect(d.socket);
  sockets.add(socket);
  socket.on('error', () => {});
  if (behaviour === 'late') socket.pause();
  let text = '';
  const closed = new Promise<void>((r) => socket.once('close', () => r()));
  let isClosed = false;
  void closed.then(() => (isClosed = true));
  socket.setEncoding('utf8').on('data', (c: string) => (text += c));
  if (behaviour === 'at-once') socket.write(STATUS);
  await Promise.race([new Promise((r) => socket.once('connect', r)), closed]);
  if (behaviour === 'gone') {
    socket.destroy();
    sockets.delete(socket);
    return undefined;
  }
  if (behaviour === 'late') {
    await ready();
    socket.write(STATUS);
    socket.resume();
  }
  const lined = await waitFor(() => text.includes('\n') || isClosed, { timeoutMs: DEADLINE_MS, what: 'a line or the close' }).then(
    () => true,
    () => false,
  );
  if (!lined) return { kind: 'nothing within the deadline', text, socket };
  if (!text.includes('\n')) return { kind: 'closed without a line', text, socket };
  const first = JSON.parse(text.slice(0, text.indexOf('\n')));
  if (first.result) return { kind: 'answered', text, socket };
  expect(first.error?.data?.kind, text).toBe('limit');
  expect(first.error.message).toContain('rpc.maxConnectionsPerUid');
  const ended = await waitFor(() => isClosed, { timeoutMs: DEADLINE_MS, what: 'the close after the refusal' }).then(
    () => true,
    () => false,
  );
  return { kind: ended ? 'refused' : 'refused and never closed', text, socket };
}

/** Close `socket` and wait until it is closed. */
async function close(socket: Socket): Promise<void> {
  sockets.delete(socket);
  if (socket.closed) return;
  const closed = new Promise<void>((r) => socket.once('close', () => r()));
  socket.destroy();
  await closed;
}

/** Hold LIMIT admitted connections: anything more is refused until one of them closes. */
async function fillTheBudget(): Promise<Socket[]> {
  const held: Socket[] = [];
  while (held.length < LIMIT) {
    const o = await client('at-once');
    if (o?.kind === 'answered') held.push(o.socket);
    // A slot still held by a connection the daemon has not yet seen close: refused, tried again.
    else expect(o?.kind, o?.text).toBe('refused');
  }
  return held;
}

describe('refusals past maxConnectionsPerUid', () => {
  it('a client that writes its request only after the refusal was sent still reads the line, then the end', async () => {
    const held = await fillTheBudget();
    try {
      for (let i = 0; i < 20; i++) {
        const before = refusals();
        // It writes once the daemon has logged (and so sent) this connection's refusal.
        const o = await client('late', () => waitFor(() => refusals() > before || undefined, { what: 'the refusal in the log' }).then(() => {}));
        expect(o?.kind, `try ${i}: ${o?.text}`).toBe('refused');
      }
    } finally {
      await Promise.all(held.map(close));
    }
  });

  it('connections opened in a tight loop while admitted ones close: each answered or refused with its line, then closed; none hangs', async () => {
    const tally = new Map<string, number>();
    const failures: string[] = [];
    const behaviours: Behaviour[] = ['at-once', 'late', 'at-once', 'gone'];
    await Promise.all(
      Array.from({ length: WORKERS }, async (_, w) => {
        // The first failure ends the run, so it is told at once rather than after every worker's deadlines.
        for (let t = 0; t < TRIES_EACH && failures.length === 0; t++) {
          const behaviour = behaviours[(w + t) % behaviours.length];
          // A late client writes after a few turns of its loop: often after its refusal was sent.
          const o = await client(behaviour, () => new Promise<void>((r) => setImmediate(() => setImmediate(r))));
          if (o === undefined) {
            tally.set('gone', (tally.get('gone') ?? 0) + 1);
            continue;
          }
          tally.set(o.kind, (tally.get(o.kind) ?? 0) + 1);
          if (o.kind !== 'answered' && o.kind !== 'refused') failures.push(`${behaviour}: ${o.kind} (${JSON.stringify(o.text.slice(0, 200))})`);
          // Admitted ones close again at once: the next connections race the daemon letting go of them.
          await close(o.socket);
        }
      }),
    );
    expect(failures, JSON.stringify(Object.fromEntries(tally))).toEqual([]);
    expect(tally.get('answered') ?? 0).toBeGreaterThan(0);
    expect(tally.get('refused') ?? 0).toBeGreaterThan(0);
    expect(alive(d.proc.pid!)).toBe(true);
    // A client gone before its refusal was written is no error of the daemon's.
    expect(d.stdout()).not.toContain('uncaught exception');
    // And the budget is whole again once they are all closed: LIMIT are admitted.
    await Promise.all((await fillTheBudget()).map(close));
  });
});
