import { readSync } from 'node:fs';
import type { Socket } from 'node:net';
import type { Logger } from 'pino';
import type { Cancellation } from '../base/cancellation.js';
import { answered } from '../base/yield-cpu.js';
import { INVALID_PARAMS, INVALID_REQUEST, METHOD_NOT_FOUND, PARSE_ERROR, toRpcError, type RpcError } from './errors.js';
import { LineSplitter } from './lines.js';
import { refuseConnection } from './refuse.js';
import { MAX_BATCH, MAX_PARAMS_DEPTH, nestsDeeper, type ClientBudget, type Slot } from './limits.js';
import { JsonText } from '../tools/json-text.js';
import { peerOf } from '../transport/peer.js';
import { loadAddon } from '../base/addon.js';
import { trace } from '../base/trace.js';

type Id = string | number | null;

export interface RequestContext {
  connection: Connection;
  /** Aborts when the request is cancelled or its connection closes; made when first read. */
  readonly signal: AbortSignal;
  /** The same cancel without an AbortSignal made for it: whether it came, and who waits for it. */
  readonly cancellation: Cancellation;
}

/**
 * A request being handled. Its signal is made only when a method reads it: most requests never
 * do (a poll, a list, a status), and in Node 20 every AbortSignal made outlives the young
 * generation's collections until a full one (docs/benchmarks.md, "Tails at 1,000 sessions, the
 * second pass"), so a signal per request was most of what each request left behind. A cancel
 * that comes before the signal is read is kept, and the signal is made already aborted.
 */
class InFlight implements RequestContext, Cancellation {
  private controller: AbortController | undefined;
  private cancelled = false;
  /** Told once at the cancel (the cancellation's listeners: each is told once). */
  private listeners: Set<() => void> | undefined;

  constructor(
    readonly connection: Connection,
    /** Its method: a restart answers every request in flight but its own (abandon). */
    readonly method: string,
  ) {}

  get signal(): AbortSignal {
    if (this.controller === undefined) {
      this.controller = new AbortController();
      if (this.cancelled) this.controller.abort();
    }
    return this.controller.signal;
  }

  get cancellation(): Cancellation {
    return this;
  }

  get aborted(): boolean {
    return this.cancelled;
  }

  addEventListener(_type: 'abort', listener: () => void): void {
    if (this.cancelled) return;
    (this.listeners ??= new Set()).add(listener);
  }

  removeEventListener(_type: 'abort', listener: () => void): void {
    this.listeners?.delete(listener);
  }

  cancel(): void {
    if (this.cancelled) return;
    this.cancelled = true;
    this.controller?.abort();
    const told = this.listeners;
    this.listeners = undefined;
    if (!told) return;
    // Each is told, as an AbortSignal tells each: one that throws keeps no other from hearing it.
    for (const listener of told) {
      try {
        listener();
      } catch (err) {
        this.connection.log.error({ err, method: this.method }, 'a listener of a cancelled request failed');
      }
    }
  }
}

export type Method = (params: Record<string, unknown>, ctx: RequestContext) => Promise<unknown> | unknown;

interface Response {
  jsonrpc: '2.0';
  id: Id;
  result?: unknown;
  error?: RpcError;
}

/** Buffered bytes to a client that is not reading, past which its event notifications are dropped (and counted). */
const MAX_BUFFERED_EVENTS = 16 * 1024 * 1024;
/**
 * Unsent bytes to a client past which its requests are no longer read or started (answers are
 * never dropped, so this is what bounds them); reading resumes once fewer than RESUME_BELOW are
 * unsent. Both are above MAX_BUFFERED_EVENTS, so an event backlog alone never holds up requests.
 */
const HOLD_ABOVE = 32 * 1024 * 1024;
const RESUME_BELOW = 24 * 1024 * 1024;
/** Requests started in one turn of the event loop, so quick answers are written, and counted, before more start. */
const STARTS_PER_TURN = 32;
/** Where an oversized frame stood among the lines read. */
const OVERSIZED = Symbol('oversized frame');

const errorResponse = (id: Id, code: number, message: string, data?: Record<string, unknown>): Response => ({
  jsonrpc: '2.0',
  id,
  error: data ? { code, message, data } : { code, message },
});

const isThenable = (v: unknown): v is PromiseLike<unknown> => typeof (v as PromiseLike<unknown> | null)?.then === 'function';

const isId = (v: unknown): v is Id => typeof v === 'string' || (typeof v === 'number' && Number.isFinite(v)) || v === null;

/** The id and result of a response whose result's JSON is made (JsonText), else undefined. */
const made = (message: unknown): { id: Id; result: JsonText } | undefined => {
  const r = message as Response | null;
  return r !== null && typeof r === 'object' && r.result instanceof JsonText ? { id: r.id, result: r.result } : undefined;
};

/** A message as JSON text; a made result is put in as it is, not serialized again. */
function serialize(message: unknown): string {
  if (Array.isArray(message)) return `[${message.map(serialize).join(',')}]`;
  const m = made(message);
  if (m) return `{"jsonrpc":"2.0","id":${JSON.stringify(m.id)},"result":${typeof m.result.bytes === 'string' ? m.result.bytes : m.result.bytes.toString('utf8')}}`;
  return JSON.stringify(message);
}

const RESULT_END = Buffer.from('}\n');

/**
 * One client connection: NDJSON framing, JSON-RPC 2.0 requests, batches and notifications,
 * per-request cancellation. Whatever a client sends, only this connection is affected.
 */
export class Connection {
  private readonly splitter: LineSplitter;
  /** Requests being handled, by id (a Map tells 1 from "1", as JSON-RPC does). */
  private readonly pending = new Map<Id, InFlight>();
  private readonly closeHooks = new Set<() => void>();
  private droppedEvents = 0;
  /** Lines being handled; an oversized frame ends the connection once they are answered. */
  private inFlight = 0;
  /** Lines read and not yet started (while too much is unsent, or past one turn's starts). */
  private readonly queue: (string | typeof OVERSIZED)[] = [];
  /** The lines of the chunk just read (one array, used again for every chunk). */
  private readonly lines: string[] = [];
  /** Too much is unsent: nothing is read or started until the client reads some of it. */
  private waitingForRoom = false;
  private pumpScheduled = false;
  private reading = true;
  private ending = false;
  closed = false;
  /** With the bench's trace on (base/trace.ts): this connection's number, and when its last bytes were read. */
  private readonly traced = trace?.connection();
  private readAt = 0;

  constructor(
    readonly socket: Socket,
    private readonly methods: Map<string, Method>,
    private readonly maxFrameBytes: number,
    readonly log: Logger,
    /** The user's shared budget of incomplete frames, and this connection's slot in it (the daemon's socket; a session's own channel has none). */
    private readonly budget?: { of: ClientBudget; uid: number; slot?: Slot },
  ) {
    this.splitter = new LineSplitter(maxFrameBytes);
    socket.on('data', (chunk: Buffer) => this.onData(chunk));
    socket.on('error', (err) => this.log.debug({ err }, 'client socket error'));
    socket.on('close', () => this.onClose());
    // End of input may be a half-close (`socat`, `nc -N`): answer what was asked, then close.
    // A blank line (which NDJSON readers skip) tells the two apart: to a client that is gone
    // entirely it fails with EPIPE, and that closes the connection and cancels its requests.
    socket.on('end', () => {
      this.ending = true;
      if ((this.inFlight > 0 || this.queue.length > 0) && !socket.destroyed) socket.write('\n');
      this.endIfDone();
    });
    socket.on('drain', () => {
      this.flushDropNotice();
      this.onWritten();
    });
  }

  /** Who is on the other end (pid, uid, gid), for the log of a refused request. */
  peer(): ReturnType<typeof peerOf> {
    return peerOf(this.socket);
  }

  /** Run `fn` when the connection closes (subscriptions use it). */
  onClosed(fn: () => void): () => void {
    this.closeHooks.add(fn);
    return () => this.closeHooks.delete(fn);
  }

  private onData(chunk: Buffer): void {
    if (this.closed || this.ending) return;
    if (trace) this.readAt = performance.now();
    const before = this.splitter.partialBytes;
    const lines = this.lines;
    const oversized = this.splitter.push(chunk, lines);
    const held = this.budget === undefined || this.holdPartial(before);
    if (held) for (let i = 0; i < lines.length; i++) if (lines[i].trim()) this.queue.push(lines[i]);
    // Emptied by pops: a length set to 0 lets go of the array's storage, made again at the next chunk.
    while (lines.length > 0) lines.pop();
    if (!held) return;
    if (oversized) {
      // Nothing after it is read; the lines before it are still answered.
      this.queue.push(OVERSIZED);
      this.ending = true;
    }
    this.pump();
  }

  /**
   * Start the lines read, unless too much is unsent to this client: then they wait, and so does
   * reading, until it has read some (a client that never reads cannot make the daemon grow).
   */
  private pump(): void {
    let started = 0;
    while (this.queue.length > 0 && !this.closed) {
      if (this.waitingForRoom || this.socket.writableLength > HOLD_ABOVE) {
        this.waitingForRoom = true;
        break;
      }
      if (started === STARTS_PER_TURN) {
        if (!this.pumpScheduled) {
          this.pumpScheduled = true;
          setImmediate(() => {
            this.pumpScheduled = false;
            this.pump();
          });
        }
        break;
      }
      started++;
      this.start(this.queue.shift()!);
    }
    if (!this.waitingForRoom && this.socket.writableLength > HOLD_ABOVE) this.waitingForRoom = true;
    this.setReading(this.queue.length === 0 && !this.waitingForRoom);
    this.endIfDone();
  }

  private start(line: string | typeof OVERSIZED): void {
    if (line === OVERSIZED) {
      this.send(errorResponse(null, INVALID_REQUEST, `frame too large: a message may be at most ${this.maxFrameBytes} bytes (PROCCTL_MAX_FRAME_BYTES); closing the connection`));
      return;
    }
    this.inFlight++;
    let answered: Promise<void> | undefined;
    try {
      answered = this.answer(line, this.readAt);
    } catch (err) {
      // This line only: the lines read with it are still answered.
      this.log.error({ err }, 'answering a request failed');
    }
    if (answered === undefined) this.done();
    else void answered.finally(this.done);
  }

  /** A line is answered (start counted it in flight). */
  private readonly done = (): void => {
    this.inFlight--;
    this.endIfDone();
  };

  private setReading(on: boolean): void {
    if (on === this.reading || this.closed) return;
    this.reading = on;
    if (on) this.socket.resume();
    else this.socket.pause();
  }

  /** Some of what was unsent went out: carry on once enough has. */
  private readonly onWritten = (): void => {
    if (!this.waitingForRoom || this.closed || this.socket.writableLength >= RESUME_BELOW) return;
    this.waitingForRoom = false;
    this.pump();
  };

  /** After an oversized frame: close once the requests before it are answered. */
  private endIfDone(): void {
    if (this.ending && this.inFlight === 0 && this.queue.length === 0 && !this.closed) {
      this.socket.end();
      this.closed = true;
    }
  }

  /**
   * Answer one line: at once when it is a single request answered at once (a poll, a list, a
   * status: written in the turn it was read), else a promise that settles once it is (a batch is
   * always answered together, a microtask later). Not async:
   * an async chain made three promises per request and answered it microtasks later, work a
   * thousand-session client's every poll paid for (docs/benchmarks.md).
   */
  private answer(line: string, readAt: number): Promise<void> | undefined {
    let message: unknown;
    try {
      message = JSON.parse(line);
    } catch (err) {
      this.send(errorResponse(null, PARSE_ERROR, `parse error: ${(err as Error).message}; send one JSON-RPC message per line`));
      return undefined;
    }
    if (Array.isArray(message)) {
      if (message.length === 0) {
        this.send(errorResponse(null, INVALID_REQUEST, 'invalid request: an empty batch'));
        return undefined;
      }
      if (message.length > MAX_BATCH) {
        this.send(errorResponse(null, INVALID_REQUEST, `invalid request: a batch holds at most ${MAX_BATCH} requests, this one ${message.length}; send the rest as lines of their own (they are pipelined)`));
        return undefined;
      }
      return Promise.all(message.map((m) => this.handle(m))).then((all) => {
        const responses = all.filter((r): r is Response => r !== undefined);
        if (responses.length) this.send(responses, true);
      });
    }
    const parsedAt = trace ? performance.now() : 0;
    const response = this.handle(message);
    if (!isThenable(response)) {
      this.reply(message, response, readAt, parsedAt);
      return undefined;
    }
    return response.then((r) => this.reply(message, r, readAt, parsedAt));
  }

  /** Send a single request's response (none for a notification). */
  private reply(message: unknown, response: Response | undefined, readAt: number, parsedAt: number): void {
    if (!response) return;
    this.send(response, true);
    if (trace) trace.request(this.traced!, response.id, (message as { method?: string }).method ?? '', readAt, parsedAt, performance.now());
  }

  /** Handle one request object: its response (undefined for a notification), at once when its method answered at once. */
  private handle(req: unknown): Response | undefined | Promise<Response | undefined> {
    if (typeof req !== 'object' || req === null || Array.isArray(req)) {
      return errorResponse(null, INVALID_REQUEST, 'invalid request: expected a JSON-RPC 2.0 request object');
    }
    const r = req as Record<string, unknown>;
    const hasId = 'id' in r;
    const id: Id = hasId && isId(r.id) ? r.id : null;
    if (r.jsonrpc !== '2.0') return errorResponse(id, INVALID_REQUEST, 'invalid request: "jsonrpc" must be "2.0"');
    if (typeof r.method !== 'string') return errorResponse(id, INVALID_REQUEST, 'invalid request: "method" must be a string');
    if (hasId && !isId(r.id)) return errorResponse(null, INVALID_REQUEST, 'invalid request: "id" must be a string, a number or null');
    if (r.params !== undefined && (typeof r.params !== 'object' || r.params === null)) {
      return errorResponse(id, INVALID_REQUEST, 'invalid request: "params" must be an object');
    }
    if (r.method === '$/cancelRequest') {
      const target = (r.params as { id?: unknown } | undefined)?.id;
      if (isId(target)) this.pending.get(target)?.cancel();
      return hasId ? { jsonrpc: '2.0', id, result: {} } : undefined;
    }
    const method = this.methods.get(r.method);
    if (!method) {
      if (!hasId) return undefined;
      return errorResponse(id, METHOD_NOT_FOUND, `method not found: "${r.method}"; methods are ${[...this.methods.keys()].join(', ')}`);
    }
    if (Array.isArray(r.params)) {
      return hasId ? errorResponse(id, INVALID_PARAMS, 'invalid params: pass params as an object of named fields', { kind: 'invalid', path: [] }) : undefined;
    }
    const params = (r.params ?? {}) as Record<string, unknown>;
    if (nestsDeeper(params, MAX_PARAMS_DEPTH)) {
      return hasId ? errorResponse(id, INVALID_PARAMS, `invalid params: nested deeper than ${MAX_PARAMS_DEPTH} levels; flatten the data`, { kind: 'invalid', path: [] }) : undefined;
    }
    const request = new InFlight(this, r.method);
    let answer: unknown;
    try {
      answer = method(params, request);
    } catch (err) {
      return this.failed(id, hasId, r.method, err);
    }
    // Answered at once (a list, a poll with output): never in flight, so never in `pending`. A set
    // and a delete per request made the map's table anew every few requests, a table the
    // long-lived map holds and so moves out of the young generation: most of what a list left
    // for the full collections (docs/benchmarks.md, a list page of 50 every round).
    if (!isThenable(answer)) return hasId ? { jsonrpc: '2.0', id, result: answer ?? {} } : undefined;
    return this.settle(id, hasId, r.method, request, answer);
  }

  /** A request its method answers later: in flight (cancellable by id) until then. */
  private async settle(id: Id, hasId: boolean, method: string, request: InFlight, answer: PromiseLike<unknown>): Promise<Response | undefined> {
    if (hasId) this.pending.set(id, request);
    try {
      const result = await answer;
      if (this.abandoned?.has(request)) return undefined;
      return hasId ? { jsonrpc: '2.0', id, result: result ?? {} } : undefined;
    } catch (err) {
      if (this.abandoned?.has(request)) return undefined;
      return this.failed(id, hasId, method, err);
    } finally {
      if (hasId && this.pending.get(id) === request) this.pending.delete(id);
    }
  }

  private failed(id: Id, hasId: boolean, method: string, err: unknown): Response | undefined {
    const error = toRpcError(err);
    if (error.code === -32603) this.log.error({ err, method }, 'request failed');
    return hasId ? { jsonrpc: '2.0', id, error } : undefined;
  }

  /**
   * Write a message. `answer`: a request's answer, whose reader, woken on this CPU, runs first
   * when the turn has work behind it (a session's end; base/yield-cpu.ts). A notification does
   * not yield: an exec's `exited` event goes out before its answer, in the same turn.
   */
  send(message: unknown, answer = false): void {
    if (this.closed || this.socket.destroyed) return;
    const m = made(message);
    const written = m?.result.written;
    const then = written ? this.onWrittenThen(written) : this.whenWritten();
    if (!m || typeof m.result.bytes === 'string') {
      this.socket.write(`${serialize(message)}\n`, then);
      if (answer) answered();
      return;
    }
    // A made result goes out as it is, framed, in one writev: its bytes neither copied nor encoded.
    this.socket.cork();
    this.socket.write(`{"jsonrpc":"2.0","id":${JSON.stringify(m.id)},"result":`);
    this.socket.write(m.result.bytes);
    this.socket.write(RESULT_END, then);
    this.socket.uncork();
    if (answer) answered();
  }

  /**
   * What a write calls once its bytes are out: onWritten, only behind bytes still unsent. A write
   * given a callback costs Node a tick and an object for it (~200 bytes of a quiet poll's 3.5 kB),
   * and onWritten only ever resumes a connection held for room, which needs more than
   * HOLD_ABOVE unsent: a write to an empty buffer that leaves that much unsent has gone past the
   * socket's high-water mark, so its `drain` comes, and every write behind it carries onWritten.
   */
  private whenWritten(): (() => void) | undefined {
    return this.socket.writableLength > 0 ? this.onWritten : undefined;
  }

  /** onWritten, then `written` (a made result's owner told its bytes are out). */
  private onWrittenThen(written: () => void): (err?: Error | null) => void {
    return (err) => {
      this.onWritten();
      // Out: the bytes may be used again. Not after a failed write: whether the socket is still
      // holding them is not known then, so they are left to the collector.
      if (!err) written();
    };
  }

  /** Send a notification that may be dropped (and counted) if the client stopped reading. */
  notify(method: string, params: Record<string, unknown>): void {
    if (this.closed || this.socket.destroyed) return;
    if (this.socket.writableLength > MAX_BUFFERED_EVENTS) {
      this.droppedEvents++;
      return;
    }
    this.send({ jsonrpc: '2.0', method, params });
  }

  private flushDropNotice(): void {
    if (this.droppedEvents === 0) return;
    const dropped = this.droppedEvents;
    this.droppedEvents = 0;
    this.send({
      jsonrpc: '2.0',
      method: 'event',
      params: { type: 'dropped', count: dropped, at: new Date().toISOString(), text: `${dropped} events were dropped because this client read too slowly` },
    });
  }

  /** Account for the incomplete frame now held; close a connection that puts its user over budget, or sits on one too long. */
  private holdPartial(before: number): boolean {
    const { of, uid } = this.budget!;
    const now = this.splitter.partialBytes;
    const within = of.holdPartial(uid, now - before);
    clearTimeout(this.partialTimer);
    if (!within) {
      this.refuse(`the incomplete frames of uid ${uid}'s connections hold more than ${of.limits.partialBytesPerUid} bytes (rpc.maxPartialBytesPerUid); end each message with a newline`);
      return false;
    }
    if (now > 0) {
      this.partialTimer = setTimeout(
        () => this.refuse(`an incomplete frame sat for ${of.limits.partialFrameTimeoutMs} ms without a byte more (rpc.partialFrameTimeoutMs); end each message with a newline`),
        of.limits.partialFrameTimeoutMs,
      );
      this.partialTimer.unref();
    }
    return true;
  }

  private partialTimer: NodeJS.Timeout | undefined;

  /**
   * Say why, and close this connection at once (what it held is let go). Its slot among its
   * user's connections is given back now, not when its client closes: nothing it sends is read
   * any more, so it is no live connection, while its refusal lingers up to REFUSED_LINGER_MS.
   */
  private refuse(message: string): void {
    if (this.closed) return;
    this.log.warn({ peer: this.peer() }, message);
    this.ending = true;
    this.releasePartial();
    this.budget?.slot?.release();
    refuseConnection(this.socket, `${JSON.stringify(errorResponse(null, INVALID_REQUEST, message))}\n`);
  }

  /**
   * Drop the incomplete frame and give its bytes back to the user's budget at once: a connection
   * being refused no longer counts against its user's other connections while its refusal drains.
   */
  private releasePartial(): void {
    clearTimeout(this.partialTimer);
    const had = this.splitter.discard();
    if (this.budget) this.budget.of.holdPartial(this.budget.uid, -had);
  }

  /**
   * A restart's last moment (SPEC §19): nothing more is read, and every request still in flight
   * is answered with `err` (kind restarting: the client retries on the next image), and so is
   * every request the client sent that is not read yet: its socket is shut for reading (the
   * client's further writes fail, so it never sends one that no image reads) and what it holds is
   * read now and answered, not run. The answers are written at once, before the image goes.
   * Undone (the restart failed after all), a connection shut so is closed: the client reconnects.
   */
  abandon(err: Error): () => void {
    this.socket.pause();
    const error = toRpcError(err);
    // Answered now: should the restart fail after all, their own answers are not sent twice.
    this.abandoned ??= new WeakSet();
    for (const [id, request] of this.pending) {
      // The restart's own request is answered by the restart.
      if (request.method === RESTART) continue;
      this.send({ jsonrpc: '2.0', id, error });
      this.abandoned.add(request);
      this.pending.delete(id);
    }
    const shut = !this.closed && shutReading(this.socket);
    // Nothing more is started: what is read now (socket.read() emits it as data too) is only answered.
    if (shut) this.ending = true;
    const unread = this.queue.splice(0).filter((l): l is string => l !== OVERSIZED);
    if (shut) this.splitter.push(readNow(this.socket), unread);
    for (const line of unread) {
      const answers = refusals(line, error);
      if (answers.length > 0) this.send(answers.length === 1 ? answers[0] : answers);
    }
    if (!shut) return () => this.socket.resume();
    return () => this.endIfDone();
  }

  /** Resolves once every answer written so far has gone to the client (or the connection closed). */
  flushed(): Promise<void> {
    if (this.closed || this.socket.destroyed || this.socket.writableLength === 0) return Promise.resolve();
    return new Promise((resolve) => {
      const done = () => {
        this.socket.off('drain', done);
        this.socket.off('close', done);
        resolve();
      };
      this.socket.on('drain', done);
      this.socket.on('close', done);
    });
  }

  /** Requests a restart answered already (abandon). */
  private abandoned: WeakSet<InFlight> | undefined;

  private onClose(): void {
    this.releasePartial();
    this.closed = true;
    this.queue.length = 0;
    for (const r of this.pending.values()) r.cancel();
    this.pending.clear();
    for (const fn of this.closeHooks) fn();
    this.closeHooks.clear();
  }
}

/** The method that asks for a restart: abandon leaves it to be answered by the restart. */
const RESTART = 'daemon.restart';

interface ShutAddon {
  shutdownRead(fd: number): void;
}

/** The socket's descriptor, while it has one. */
const fdOf = (socket: Socket): number | undefined => (socket as unknown as { _handle?: { fd?: number } })._handle?.fd;

/** Shut `socket` for reading (shutdownRead): false when it cannot be (no addon, no descriptor). */
function shutReading(socket: Socket): boolean {
  const addon = loadAddon<ShutAddon>(['shutdownRead']);
  const fd = fdOf(socket);
  if (addon instanceof Error || fd === undefined || fd < 0) return false;
  try {
    addon.shutdownRead(fd);
    return true;
  } catch {
    return false;
  }
}

/** Every byte a socket shut for reading still holds: what Node buffered, then what the kernel has. */
function readNow(socket: Socket): Buffer {
  const parts: Buffer[] = [];
  for (let chunk: Buffer | null; (chunk = socket.read() as Buffer | null) !== null; ) parts.push(chunk);
  const fd = fdOf(socket);
  const buf = Buffer.allocUnsafe(64 * 1024);
  for (;;) {
    let n: number;
    try {
      n = fd === undefined ? 0 : readSync(fd, buf, 0, buf.length, null);
    } catch {
      break; // EAGAIN: nothing more
    }
    if (n === 0) break;
    parts.push(Buffer.from(buf.subarray(0, n)));
  }
  return Buffer.concat(parts);
}

/** A restart's answers to the requests of one line, not run: each with an id gets `error`. */
function refusals(line: string, error: RpcError): Response[] {
  let message: unknown;
  try {
    message = JSON.parse(line);
  } catch {
    return [];
  }
  const answers: Response[] = [];
  for (const m of Array.isArray(message) ? message : [message]) {
    if (typeof m === 'object' && m !== null && 'id' in m && isId((m as { id: unknown }).id)) answers.push(errorResponse((m as { id: Id }).id, error.code, error.message, error.data as Record<string, unknown> | undefined));
  }
  return answers;
}
