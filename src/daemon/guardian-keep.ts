import { rmSync } from 'node:fs';
import { loadAddon } from '../base/addon.js';
import { closeQuietly } from '../base/close-quietly.js';

/**
 * The guardian's side of a crash that keeps the sessions (durability.onCrash "keep", SPEC §19):
 * the daemon sends each running session's descriptors to it (fd 4, datagrams with SCM_RIGHTS);
 * they wait in its queue, drained once a second, so a session start wakes nobody. Descriptors of
 * sessions no longer in the table (ended) are closed at each drain. When the daemon dies, the
 * guardian waits on a socket beside the daemon's for the next daemon, and hands everything over.
 */
interface KeepAddon {
  keepReceive(socket: number, timeoutMs: number): { messages: { text: string; fds: number[] }[]; closed: boolean };
  keepSend(socket: number, text: string, fds: number[]): boolean;
  keepListen(path: string): number;
  keepAccept(fd: number, timeoutMs: number): { fd: number; uid: number } | null;
}

export class KeptDescriptors {
  private readonly held = new Map<string, { text: string; fds: number[] }>();

  constructor(
    private readonly socket: number,
    private readonly addon: KeepAddon,
  ) {}

  static open(socket: number): KeptDescriptors | Error {
    const addon = loadAddon<KeepAddon>(['keepReceive', 'keepSend', 'keepListen', 'keepAccept']);
    return addon instanceof Error ? addon : new KeptDescriptors(socket, addon);
  }

  /**
   * Take what waits in the queue; with `live`, let go of the sessions not in it. `live` is asked
   * only after the queue is read: a session's slot is written before its descriptors are sent
   * (often a few ms before, when its first record is written at once), so a table read before the
   * queue could miss the slot of a message the queue already holds, and let a live session go.
   */
  drain(live?: () => ReadonlySet<string>): void {
    let messages: { text: string; fds: number[] }[] = [];
    try {
      messages = this.addon.keepReceive(this.socket, 0).messages;
    } catch {
      // the daemon's end is gone and nothing is queued
    }
    for (const m of messages) {
      let id: string | undefined;
      try {
        id = (JSON.parse(m.text) as { id?: string }).id;
      } catch {
        // not ours
      }
      if (typeof id !== 'string') {
        closeAll(m.fds);
        continue;
      }
      const before = this.held.get(id);
      if (before) closeAll(before.fds);
      this.held.set(id, m);
    }
    if (!live) return;
    const ids = live();
    for (const [id, m] of this.held) if (!ids.has(id)) this.let(id, m);
  }

  has(id: string): boolean {
    return this.held.has(id);
  }

  get size(): number {
    return this.held.size;
  }

  private let(id: string, m: { fds: number[] }): void {
    closeAll(m.fds);
    this.held.delete(id);
  }

  private listening: number | undefined;
  private path: string | undefined;

  /**
   * Listen on `path` from the start, while the daemon lives (nothing is accepted then): a daemon
   * started the moment this one died finds the socket already there, and waits in its backlog
   * until the guardian has taken stock.
   */
  listen(path: string): void {
    try {
      this.listening = this.addon.keepListen(path);
      this.path = path;
    } catch (err) {
      process.stderr.write(`procctl guardian: cannot listen for the next daemon on ${path}: ${(err as Error).message}; a crash kills the sessions\n`);
    }
  }

  /**
   * Stop listening, leaving the path alone: the daemon runs on with a guardian of its own, which
   * may listen there by now (the path is one per state directory; a stale file is unlinked by the next listen).
   */
  stopListening(): void {
    if (this.listening !== undefined) closeAll([this.listening]);
    this.listening = undefined;
    this.path = undefined;
  }

  /** The daemon said goodbye, or everything was killed: nobody is to find this guardian any more. */
  unlisten(): void {
    if (this.listening !== undefined) closeAll([this.listening]);
    if (this.path !== undefined) rmSync(this.path, { force: true });
    this.listening = undefined;
    this.path = undefined;
  }

  /**
   * Wait up to `graceMs` for the next daemon (of our own uid) and hand it every session kept. True
   * when one took them; false when the grace ended first (the caller kills everything).
   */
  handOver(graceMs: number): boolean {
    const listening = this.listening;
    if (listening === undefined) return false;
    const deadline = Date.now() + graceMs;
    const uid = process.getuid?.();
    try {
      for (;;) {
        const left = deadline - Date.now();
        if (left <= 0) return false;
        const conn = this.addon.keepAccept(listening, left);
        if (!conn) return false;
        if (conn.uid !== uid) {
          closeAll([conn.fd]);
          continue;
        }
        for (const m of this.held.values()) {
          // Blocking is fine here: the guardian has nothing else to do. A full queue is waited out.
          while (!this.addon.keepSend(conn.fd, m.text, m.fds)) sleep(5);
        }
        // The path goes before the connection closes: the daemon's own new guardian listens there next.
        this.unlisten();
        closeAll([conn.fd]);
        return true;
      }
    } finally {
      this.unlisten();
    }
  }
}

function closeAll(fds: readonly number[]): void {
  for (const fd of fds) closeQuietly(fd);
}

function sleep(ms: number): void {
  Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, ms);
}
