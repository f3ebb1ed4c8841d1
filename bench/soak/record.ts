import { now } from '../lib/stats.js';

/** A deterministic command's answer was not what it must be. */
export class Mismatch extends Error {}
/** Something the daemon should have done in time did not happen. */
export class SoakTimeout extends Error {}

export interface Failure {
  /** Seconds since the load started. */
  atS: number;
  who: string;
  task: string;
  /** `error`: a request answered an error it should not have; `mismatch`: wrong output or status. */
  kind: 'error' | 'mismatch' | 'timeout';
  message: string;
}

interface TaskStats {
  runs: number;
  failed: number;
  totalMs: number;
  maxMs: number;
}

/** Failures beyond this many are counted, not kept. */
const KEEP_FAILURES = 200;

export function check(cond: unknown, message: string): asserts cond {
  if (!cond) throw new Mismatch(message);
}

export function show(v: unknown): string {
  const s = JSON.stringify(v) ?? String(v);
  return s.length > 300 ? `${s.slice(0, 300)}…` : s;
}

export function same(actual: unknown, expected: unknown, what: string): void {
  if (actual !== expected) throw new Mismatch(`${what}: expected ${show(expected)}, got ${show(actual)}`);
}

/** The request must fail with this error kind; the error is returned for further checks. */
export async function expectError(request: Promise<unknown>, kind: string, what: string): Promise<any> {
  let result: unknown;
  try {
    result = await request;
  } catch (err) {
    const rpc = (err as { rpc?: any }).rpc;
    if (rpc?.data?.kind === kind) return rpc;
    throw new Mismatch(`${what}: expected a ${kind} error, got ${rpc ? show(rpc) : (err as Error).message}`);
  }
  throw new Mismatch(`${what}: expected a ${kind} error, got ${show(result)}`);
}

export function withTimeout<T>(p: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new SoakTimeout(`${what} took over ${ms} ms`)), ms);
  });
  return Promise.race([p, late]).finally(() => clearTimeout(timer));
}

/** What every agent did and what went wrong, with the time into the run. */
export class Recorder {
  startedAt = Date.now();
  readonly failures: Failure[] = [];
  failureCount = 0;
  readonly tasks = new Map<string, TaskStats>();

  elapsedS(): number {
    return (Date.now() - this.startedAt) / 1000;
  }

  /** Run one task; a throw is a failure, recorded and logged, never fatal to the run. */
  async run(who: string, task: string, fn: () => Promise<void>, log: (line: string) => void): Promise<void> {
    const stats = this.tasks.get(task) ?? { runs: 0, failed: 0, totalMs: 0, maxMs: 0 };
    this.tasks.set(task, stats);
    const t0 = now();
    try {
      await fn();
    } catch (err) {
      stats.failed++;
      const f = this.fail(who, task, err);
      log(`! ${f.atS.toFixed(0)} s ${who} ${task}: ${f.kind}: ${f.message}`);
    } finally {
      const ms = now() - t0;
      stats.runs++;
      stats.totalMs += ms;
      stats.maxMs = Math.max(stats.maxMs, ms);
    }
  }

  fail(who: string, task: string, err: unknown): Failure {
    const rpc = (err as { rpc?: any }).rpc;
    const kind: Failure['kind'] = err instanceof Mismatch ? 'mismatch' : err instanceof SoakTimeout ? 'timeout' : 'error';
    const message = rpc ? `${(err as Error).message} (code ${rpc.code}, kind ${rpc.data?.kind ?? 'none'})` : (err as Error).message ?? String(err);
    const f: Failure = { atS: Math.round(this.elapsedS() * 10) / 10, who, task, kind, message };
    this.failureCount++;
    if (this.failures.length < KEEP_FAILURES) this.failures.push(f);
    return f;
  }

  taskTable(): { task: string; runs: number; failed: number; meanMs: number; maxMs: number }[] {
    return [...this.tasks]
      .map(([task, s]) => ({ task, runs: s.runs, failed: s.failed, meanMs: Math.round(s.totalMs / Math.max(1, s.runs)), maxMs: Math.round(s.maxMs) }))
      .sort((a, b) => b.runs - a.runs);
  }
}
