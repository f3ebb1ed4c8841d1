import { readdirSync } from 'node:fs';
import { Socket } from 'node:net';
import { queryObjects } from 'node:v8';
import { Session } from '../session/session.js';
import { SessionOutput } from '../session/output.js';
import { Spool } from '../session/spool.js';

/** The classes whose live instances say whether a forgotten session left anything behind. */
const TRACKED = { Session, SessionOutput, Spool, Socket } as const;

export interface Diagnostics {
  rss: number;
  heapUsed: number;
  external: number;
  arrayBuffers: number;
  /** Open descriptors of the daemon process. */
  fds: number;
  /** Live handles and requests of the event loop, by kind (Timeout, PipeWrap, FSReqCallback, …). */
  resources: Record<string, number>;
  /** Live instances of the tracked classes, counted after a full garbage collection. */
  objects: Record<keyof typeof TRACKED, number>;
}

function openDescriptors(): number {
  try {
    return readdirSync('/proc/self/fd').length - 1; // less the one readdir itself opened
  } catch {
    return -1;
  }
}

function countBy(names: string[]): Record<string, number> {
  const out: Record<string, number> = {};
  for (const n of names) out[n] = (out[n] ?? 0) + 1;
  return out;
}

let warned = false;

/**
 * What the daemon holds now, for operators and the leak tests: counting objects runs a full
 * garbage collection first, so this is a diagnostic to call now and then, not to poll.
 */
export function diagnostics(): Diagnostics {
  if (!warned) {
    warned = true;
    // queryObjects is marked experimental; its one-time warning would land on the daemon's stderr.
    const emit = process.emitWarning;
    process.emitWarning = () => undefined;
    try {
      queryObjects(Session, { format: 'count' });
    } finally {
      process.emitWarning = emit;
    }
  }
  const objects = {} as Diagnostics['objects'];
  for (const [name, ctor] of Object.entries(TRACKED)) objects[name as keyof typeof TRACKED] = queryObjects(ctor, { format: 'count' }) as number;
  const mem = process.memoryUsage();
  return {
    rss: mem.rss,
    heapUsed: mem.heapUsed,
    external: mem.external,
    arrayBuffers: mem.arrayBuffers,
    fds: openDescriptors(),
    resources: countBy(process.getActiveResourcesInfo()),
    objects,
  };
}
