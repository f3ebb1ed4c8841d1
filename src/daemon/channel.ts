import { chownSync, rmSync } from 'node:fs';
import { createServer, type Server, type Socket } from 'node:net';
import { join } from 'node:path';
import type { Logger } from 'pino';
import { ALL_SCOPES } from '../config/schema.js';
import { forbidden } from '../errors.js';
import { Connection, type Method } from '../rpc/connection.js';
import type { ChannelHost } from '../runner/start.js';
import { RPC } from '../schema/voice.js';
import { checkpointTool } from '../tools/checkpoint.js';
import type { Daemon } from '../tools/context.js';

/** The longest path a Unix socket can be bound at (sun_path, less its NUL). */
const MAX_SOCKET_PATH = 107;
/** What a daemon's socket serves: named on the channel only to refuse it. */
const REFUSED = ['exec', 'process', 'tool', 'tools.list', 'subscribe', 'unsubscribe', 'approvals.list', 'daemon.status', 'daemon.diagnostics'];

/**
 * A confined job's only line back to the daemon (SPEC §12): a socket of its own in its scratch
 * directory, bound into the sandbox as `$PROCCTL_SOCKET`, that takes `checkpoint` for its own
 * session and refuses everything else. The daemon's socket, state and credentials stay hidden.
 */
export class Channels implements ChannelHost {
  private readonly open_ = new Map<string, { server: Server; sockets: Set<Socket> }>();

  constructor(
    private readonly d: Daemon,
    private readonly log: Logger,
  ) {}

  open(sessionId: string, dir: string, owner?: { uid: number; gid: number }): { path: string; close(): void } | undefined {
    const path = join(dir, 'procctl.sock');
    if (Buffer.byteLength(path) > MAX_SOCKET_PATH) {
      this.log.warn({ sessionId, path }, 'the session channel path is too long for a Unix socket: its checkpoints cannot be reported');
      return undefined;
    }
    const methods = this.methods(sessionId);
    const sockets = new Set<Socket>();
    const server = createServer({ allowHalfOpen: true }, (socket) => {
      sockets.add(socket);
      socket.on('close', () => sockets.delete(socket));
      new Connection(socket, methods, this.d.config().rpc.maxFrameBytes, this.log);
    });
    server.on('error', (err) => this.log.warn({ sessionId, err: err.message }, 'the session channel failed'));
    // Bound at once (a path listen is synchronous), before the job that connects to it starts.
    server.listen(path);
    if (owner) {
      try {
        chownSync(path, owner.uid, owner.gid);
      } catch (err) {
        this.log.warn({ sessionId, err: (err as Error).message }, 'the session channel could not be given to sandbox.user');
      }
    }
    this.open_.set(sessionId, { server, sockets });
    return {
      path,
      close: () => {
        this.open_.delete(sessionId);
        server.close();
        for (const s of sockets) s.destroy();
        rmSync(path, { force: true });
      },
    };
  }

  private methods(sessionId: string): Map<string, Method> {
    const methods = new Map<string, Method>();
    methods.set('checkpoint', (params, rc) => {
      const { sessionId: named, scope: _scope, token: _token, voice: _voice, checkpointKey: _key, ...rest } = params;
      if (named !== undefined && named !== sessionId) {
        throw forbidden(`this channel belongs to session ${sessionId}: a job reports only its own progress`, { path: ['sessionId'] });
      }
      const session = this.d.registry.find(ALL_SCOPES, sessionId);
      if (!session) throw forbidden(`session ${sessionId} is gone`);
      return checkpointTool(this.d, { scope: session.scope, signal: rc.signal, voice: RPC }, { ...rest, sessionId });
    });
    for (const name of REFUSED) {
      methods.set(name, () => {
        throw forbidden(`this is session ${sessionId}'s own channel: it takes checkpoint only; a sandboxed job cannot reach the daemon's controls`);
      });
    }
    return methods;
  }
}
