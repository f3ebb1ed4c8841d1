import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { logLines } from '../helpers/state.js';
import type { TestDaemon } from '../helpers/daemon.js';
import type { TestClient } from '../helpers/rpc.js';
import { Scoped, sharedDaemon, within, type Scopes } from '../helpers/session.js';
import { keepChecking, otherClientWorks, sayIfDaemonDies } from './bystander.js';
import { refused, sampleTraffic, serialize } from './frames.js';
import { batchSig, expectStream, INVALID_REQUEST, sig, tallyAnswers, Tally, type StreamExpectation } from './oracle.js';
import { rng, runSeed } from './random.js';
import { Wire } from './wire.js';

/**
 * SPEC §4 under fuzzed traffic: 100,000 generated frames, pipelined over four connections
 * without waiting for answers, then 100 short connections that each end in an over-size frame.
 * Every request with an id gets exactly one well-formed answer with the right code, an
 * over-size frame closes only its own connection, and a client on another connection is served
 * correctly throughout.
 */

const MAX_FRAME = 64 * 1024;
const CONNECTIONS = 4;
const PER_CONNECTION = 25_000;
const OVERSIZE_CONNECTIONS = 100;
/** Frames per over-size connection, the over-size one included (4,000 more in all). */
const PER_OVERSIZE = 40;
const ANSWER_DEADLINE_MS = 300_000;

const seed = runSeed(fc.readConfigureGlobal().seed);
console.log(`protocol fuzz seed ${seed} (PROCCTL_STRESS_SEED=${seed} draws the same frames)`);

let d: TestDaemon;
let c: TestClient;
let scopes: Scopes;

sharedDaemon(
  { env: { PROCCTL_MAX_FRAME_BYTES: String(MAX_FRAME), PROCCTL_INTERRUPT: 'false', PROCCTL_KILL_GRACE_MS: '1000' } },
  (x) => {
    ({ d, c, scopes } = x);
    sayIfDaemonDies(d);
  },
);

let framesSent = 0;
/** Generated frames too large for the limit, kept for the over-size connections. */
let generatedOversize: Buffer[] = [];

/** Write a stream in pieces of random size (frames straddle reads), as one client pipelining everything. */
function send(w: Wire, data: Buffer, pieceSeed: number): void {
  const r = rng(pieceSeed);
  w.writeInPieces(data, () => (r.next() < 0.2 ? r.int(1, 64) : r.int(1, 64 * 1024)));
}

/** Compare what a connection got with what it must get; every difference, named. */
function differences(w: Wire, want: { singles: Tally; batches: Tally }): string[] {
  const got = tallyAnswers(w.answers);
  return [...w.notJson.map((l) => `not JSON: ${l.slice(0, 200)}`), ...want.singles.diff(got.singles), ...want.batches.diff(got.batches)];
}

const sentinel = (id: string) => Buffer.from(`${JSON.stringify({ jsonrpc: '2.0', id, method: 'daemon.status' })}\n`);

describe('protocol fuzz', () => {
  it(`answers ${CONNECTIONS} × ${PER_CONNECTION} pipelined frames exactly, while another client is served`, async () => {
    const oversizePool: Buffer[] = [];
    const t0 = Date.now();
    const traffic = Array.from({ length: CONNECTIONS }, (_, i) => sampleTraffic(PER_CONNECTION, seed + i * 1_000_003, MAX_FRAME, oversizePool));
    const bytes = traffic.reduce((n, t) => n + t.frames.reduce((m, f) => m + f.length, 0), 0);
    console.log(`fuzz: generated ${CONNECTIONS * PER_CONNECTION} frames (${(bytes / 1e6).toFixed(1)} MB) in ${Date.now() - t0} ms; ${refused.runnable} left out as possibly runnable`);
    const t1 = Date.now();

    let done = false;
    const probe = keepChecking(scopes.next('probe'), () => done);
    const wires = await Promise.all(traffic.map(() => Wire.connect(d.socket)));
    try {
      await Promise.all(
        wires.map(async (w, i) => {
          const t = traffic[i];
          // Two sentinels answered last make it likely that a stray extra answer would have arrived.
          t.singles.add(sig('sentinel-1', 'ok:status'), 'sentinel');
          t.singles.add(sig('sentinel-2', 'ok:status'), 'sentinel');
          const data = Buffer.concat([...t.frames, sentinel('sentinel-1')]);
          framesSent += t.frames.length;
          send(w, data, seed + i);
          const want = t.singles.total + t.batches.total - 1;
          await w.until(() => w.answers.length >= want || w.closed, ANSWER_DEADLINE_MS);
          w.socket.write(sentinel('sentinel-2'));
          await w.until(() => w.answers.some((a: any) => a?.id === 'sentinel-2') || w.closed, 30_000);
          expect(w.closed, `connection ${i} was closed`).toBe(false);
          const diff = differences(w, t);
          expect(diff.slice(0, 25), `connection ${i}: ${diff.length} differences`).toEqual([]);
        }),
      );
    } finally {
      done = true;
      for (const w of wires) w.close();
    }
    const rounds = await within(probe, 60_000, 'the other client to finish its round');
    console.log(`fuzz: all answered in ${Date.now() - t1} ms; the other client did ${rounds} exec/list/clear rounds meanwhile`);
    expect(rounds).toBeGreaterThan(0);
    console.log(`fuzz: ${oversizePool.length} generated frames were over ${MAX_FRAME} bytes; used on the over-size connections`);
    generatedOversize = oversizePool;
  }, 400_000);

  it(`closes each of ${OVERSIZE_CONNECTIONS} connections after its over-size frame, having answered what came before`, async () => {
    const pool = generatedOversize;
    const r = rng(seed ^ 0x5eed);
    /** The over-size tail of connection i, and what follows it (never read). */
    const tail = (i: number): Buffer[] => {
      const after = [sentinel('after-oversize')];
      switch (i % 4) {
        case 0: {
          const big = pool.length ? pool[i % pool.length] : Buffer.from(`${serialize({ jsonrpc: '2.0', id: 'big', method: 'daemon.status', params: { x: 'y'.repeat(MAX_FRAME) } })}\n`);
          return [big, ...after];
        }
        case 1: {
          // A frame that never ends: no newline at all.
          const endless = Buffer.alloc(MAX_FRAME + r.int(1, MAX_FRAME));
          for (let k = 0; k < endless.length; k++) endless[k] = 32 + r.int(0, 94);
          return [endless];
        }
        case 2: {
          // A line of exactly MAX_FRAME bytes is a request; one byte more is not.
          const exact = (id: string, size: number) => {
            const head = JSON.stringify({ jsonrpc: '2.0', id, method: 'daemon.status', params: { pad: '' } });
            return Buffer.from(`${head.replace('"pad":""', `"pad":"${'p'.repeat(size - head.length)}"`)}\n`);
          };
          return [exact('at-limit', MAX_FRAME), exact('over-limit', MAX_FRAME + 1), ...after];
        }
        default: {
          // Valid JSON, just too long.
          return [Buffer.from(`${JSON.stringify({ jsonrpc: '2.0', id: 'long', method: 'process', params: { action: 'poll', sessionId: 's'.repeat(MAX_FRAME) } })}\n`), ...after];
        }
      }
    };
    const run = async (i: number) => {
      const prefix = sampleTraffic(PER_OVERSIZE - 1, seed + 7_000_000 + i * 7_919, MAX_FRAME);
      const data = Buffer.concat([...prefix.frames, ...tail(i)]);
      framesSent += prefix.frames.length + 1;
      const want: StreamExpectation = expectStream(data, MAX_FRAME);
      expect(want.closes).toBe(true);
      const w = await Wire.connect(d.socket);
      try {
        send(w, data, seed + 100 + i);
        const all = want.singles.total + want.batches.total;
        await w.until(() => w.closed && w.answers.length >= all, 30_000);
        expect(w.closed, `connection ${i} was not closed after its over-size frame`).toBe(true);
        const diff = differences(w, want);
        expect(diff.slice(0, 25), `over-size connection ${i}: ${diff.length} differences`).toEqual([]);
        // The answer to the over-size frame itself: -32600, id null.
        expect(tallyAnswers(w.answers).singles.counts.get(sig(null, INVALID_REQUEST))).toBeGreaterThan(0);
      } finally {
        w.close();
      }
    };
    let done = false;
    const probe = keepChecking(scopes.next('probe-oversize'), () => done);
    try {
      for (let i = 0; i < OVERSIZE_CONNECTIONS; i += 10) await Promise.all(Array.from({ length: 10 }, (_, k) => run(i + k)));
    } finally {
      done = true;
    }
    expect(await within(probe, 60_000, 'the other client to finish its round')).toBeGreaterThan(0);
    console.log(`fuzz: ${framesSent} frames sent in all`);
    expect(framesSent).toBe(CONNECTIONS * PER_CONNECTION + OVERSIZE_CONNECTIONS * PER_OVERSIZE);
    expect(CONNECTIONS * PER_CONNECTION).toBeGreaterThanOrEqual(100_000);
  });

  it('serves a fresh client correctly afterwards, and logged no internal error', async () => {
    const fresh = await d.client();
    try {
      const status = await fresh.call('daemon.status');
      expect(status.pid).toBe(d.proc.pid);
      const tools = await fresh.call('tools.list');
      expect(tools.map((t: any) => t.name).sort()).toEqual(['exec', 'process']);
      await otherClientWorks(new Scoped(fresh, `fresh-${process.pid}`));
      const batch = (await fresh.rawResponse(`${JSON.stringify([{ jsonrpc: '2.0', id: 'x1', method: 'daemon.status' }, { jsonrpc: '2.0', id: 'x2', method: 'nope' }])}\n`)) as unknown as any[];
      expect(batchSig(batch.map((a) => `${JSON.stringify(a.id)}|${a.error ? a.error.code : 'ok:status'}`))).toBe(batchSig([sig('x1', 'ok:status'), sig('x2', -32601)]));
    } finally {
      fresh.close();
    }
    expect(d.proc.exitCode).toBeNull();
    const errors = logLines(d.stdout()).filter((l) => l.level >= 50);
    expect(errors.map((l) => l.msg)).toEqual([]);
  });

  // Once refused as forbidden (the token table was read without an own-property check).
  it('treats scope names like "constructor" and "__proto__" as ordinary scopes', async () => {
    for (const scope of ['constructor', 'toString', '__proto__', 'hasOwnProperty']) {
      const r = await c.request('process', { action: 'list', scope });
      expect(r.error, `scope ${scope}`).toBeUndefined();
      expect(r.result.sessions).toEqual([]);
      const t = await c.request('process', { action: 'list', scope, token: 'x' });
      expect(t.error?.code ?? 0, `scope ${scope} with a token`).not.toBe(-32603);
    }
  });
});
