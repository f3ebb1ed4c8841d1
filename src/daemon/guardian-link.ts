import { spawn, type ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import type { Logger } from 'pino';
import { bridgeSignals } from '../signal-bridge.js';

/** The daemon's side of the guardian: start it, tell it of every session, say goodbye on a clean exit. */
export class GuardianLink {
  private child: ChildProcess | undefined;

  constructor(private readonly log: Logger) {}

  start(): void {
    const script = fileURLToPath(new URL('./guardian.js', import.meta.url));
    const child = spawn(process.execPath, [script], { stdio: ['pipe', 'ignore', 'inherit'], detached: true });
    child.stdin!.on('error', () => undefined);
    child.on('exit', (code, signal) => {
      if (this.child === child) {
        this.child = undefined;
        this.log.error({ code, signal }, 'the guardian exited; sessions are no longer protected against a daemon crash');
      }
    });
    child.on('error', (err) => this.log.error({ err }, 'cannot start the guardian'));
    bridgeSignals(child);
    this.child = child;
  }

  private send(msg: object): void {
    this.child?.stdin?.write(`${JSON.stringify(msg)}\n`);
  }

  add(sessionId: string, pgid: number): void {
    this.send({ op: 'add', id: sessionId, pgid });
  }

  remove(sessionId: string): void {
    this.send({ op: 'remove', id: sessionId });
  }

  /** A clean shutdown: every session is already stopped, so the guardian just leaves. */
  stop(): void {
    const child = this.child;
    if (!child) return;
    this.send({ op: 'bye' });
    this.child = undefined;
    child.stdin?.end();
  }
}
