import { closeSync } from 'node:fs';
import { createServer, Socket, type Server } from 'node:net';
import type { Logger } from 'pino';
import { addonFix, loadAddon } from '../base/addon.js';
import { holdReading } from '../base/hold-reading.js';
import { closeQuietly } from '../base/close-quietly.js';
import { ALL_SCOPES } from '../config/schema.js';
import { forbidden } from '../base/errors.js';
import { Connection, type Method } from '../rpc/connection.js';
import type { CarriedChannel, Channel, ChannelHost, ProxyCredentials } from '../runner/start.js';
import type { ProxyCa } from '../netproxy/ca.js';
import { RPC } from '../schema/voice.js';
import { NetProxy } from '../netproxy/proxy.js';
import type { ByName } from '../netproxy/policy.js';
import type { Held } from '../netproxy/splice.js';
import { checkpointTool } from '../tools/checkpoint.js';
import type { Daemon } from '../tools/context.js';

/** What a daemon's socket serves: named on the channel only to refuse it. */
const REFUSED = ['exec', 'process', 'tool', 'tools.list', 'subscribe', 'unsubscribe', 'approvals.list', 'daemon.status', 'daemon.diagnostics'];
/** Connections one session's channel keeps open at once; asks beyond them are closed unanswered. */
const MAX_CONNECTIONS = 32;
/** Streams one session's proxy channel keeps open at once (a package manager opens dozens). */
const MAX_PROXY_STREAMS = 256;
/** Listening sockets a session's proxy port has: 127.0.0.1 and ::1. */
const PROXY_LISTENERS = 2;

interface ChannelAddon {
  socketPair(): [number, number];
  dupDescriptor(fd: number): number;
  sendDescriptor(socket: number, fd: number): boolean;
  watchDescriptors(socket: number, onDescriptor: (fd: number) => void): { close(): void };
}

/**
 * A confined job's only line back to the daemon (SPEC §12). The job inherits one end of a
 * socket pair (it can make no Unix socket of its own: sandbox/seccomp.ts); each byte it writes
 * there asks for a connection, and the daemon answers with a fresh connected socket
 * (native/channel.c) on which it serves `checkpoint` for this session and refuses everything
 * else. The daemon's socket, state and credentials stay hidden (sandbox/bwrap.ts).
 */
export class Channels implements ChannelHost {
  private addon: ChannelAddon | Error | undefined;

  constructor(
    private readonly d: Daemon,
    private readonly log: Logger,
    private readonly ca: () => ProxyCa | undefined = () => undefined,
  ) {}

  /** `carried`: a session a planned restart handed over, its channel's end already made (SPEC §19). */
  open(sessionId: string, carried?: CarriedChannel): Channel | Error {
    let methods: Map<string, Method> | undefined;
    return this.serve(
      sessionId,
      'procctl checkpoint cannot report from inside this session: its channel needs',
      (socket) => {
        methods ??= this.methods(sessionId);
        new Connection(socket, methods, this.d.config().rpc.maxFrameBytes, this.log);
      },
      carried?.control,
    );
  }

  /**
   * A network-by-name session's channel to the daemon's proxy (netproxy/): the sandbox's helper
   * (sandbox/inside-net.ts) makes the listening sockets of the proxy's port inside the session's
   * network namespace and hands them over here before the job starts, so the daemon accepts the
   * job's connections itself and serves them directly: one relay, the daemon's, between the job
   * and where it goes, and no process in between.
   */
  openProxy(sessionId: string, policy: ByName, denied: (host: string, reason: string) => void, carried?: CarriedChannel, credentials?: ProxyCredentials): Channel | Error {
    const addon = this.loadAddon();
    if (addon instanceof Error) return new Error(`this session's network proxy needs procctl's addon (${addon.message}); ${addonFix()}`);
    // The job's streams, and the tunnels the kernel relays for it: closed at the session's end, and counted.
    const open = new Set<Held>();
    const hold = (held: Held) => {
      if (closed) {
        held.close();
        return () => undefined;
      }
      open.add(held);
      return () => void open.delete(held);
    };
    const client = { policy, denied, hold, ...credentials };
    const listeners = new Map<Server, number>();
    // A carried channel: the helper's end is in the job already (or gone, once it sent its sockets).
    const [ours, theirs] = carried ? [carried.control ?? -1, -1] : addon.socketPair();
    let refused = 0;
    let closed = false;
    const accept = (socket: Socket) => {
      if (closed || open.size >= MAX_PROXY_STREAMS) {
        socket.destroy();
        if (!closed && refused++ === 0) this.log.warn({ sessionId, max: MAX_PROXY_STREAMS }, 'a session opened more proxy connections than it may hold at once: the rest are closed');
        return;
      }
      socket.on('close', hold({ close: () => socket.destroy() }));
      this.proxy.serve(socket, client);
    };
    /**
     * A listening socket of the job's port. The server listens on a copy: a restart closes the
     * server (nothing is accepted meanwhile; connections wait in the backlog) and hands the copy on.
     */
    const take = (fd: number) => {
      if (closed || listeners.size >= PROXY_LISTENERS) return closeSync(fd);
      const server = createServer(accept);
      listeners.set(server, fd);
      server.on('error', (err) => {
        this.log.warn({ sessionId, err: err.message }, 'the session sent its proxy something that is not a listening socket: closed');
        server.close();
      });
      server.listen({ fd: addon.dupDescriptor(fd) });
    };
    // The helper sends its port's listening sockets once, one per loopback address, then closes its end.
    let ended = false;
    let settle: () => void = () => undefined;
    const settled = new Promise<void>((r) => (settle = r));
    const watching = ours >= 0;
    const watch = watching
      ? addon.watchDescriptors(ours, (fd) => {
          if (fd < 0) {
            ended = true;
            settle();
          } else take(fd);
        })
      : { close: () => undefined };
    for (const fd of carried?.listeners ?? []) take(fd);
    const shut = () => {
      for (const server of listeners.keys()) server.close();
    };
    return {
      fd: theirs,
      handedOver: () => {
        if (theirs >= 0) closeSync(theirs);
      },
      close: () => {
        if (closed) return;
        closed = true;
        settle();
        watch.close();
        if (watching) closeSync(ours);
        shut();
        for (const fd of listeners.values()) closeSync(fd);
        for (const held of open) held.close();
      },
      hold: () => {
        // Streams already open are this image's and end with it: only the port is handed on.
        shut();
        return () => {
          const again = [...listeners.values()];
          listeners.clear();
          for (const fd of again) take(fd);
        };
      },
      carry: () => ({ ...(watching && !ended ? { control: ours } : {}), listeners: [...listeners.values()] }),
      settled: () => (watching && !ended && !closed ? settled : undefined),
    };
  }

  private readonly proxy = new NetProxy(() => this.ca());

  /** The addon, loaded once with every function either kind of channel calls. */
  private loadAddon(): ChannelAddon | Error {
    this.addon ??= loadAddon<ChannelAddon>(['socketPair', 'sendDescriptor', 'watchDescriptors', 'dupDescriptor']);
    return this.addon;
  }

  /**
   * A socket pair whose far end the job inherits. Reading ours starts in the turn after this one
   * (after the spawn, which is in this turn): what the job asks before then waits in the pair, and
   * the start of a sandboxed job does not wait for the socket's wiring (~80 µs of a round trip).
   */
  private serve(sessionId: string, needs: string, serve: (socket: Socket) => void, carried?: number): Channel | Error {
    const addon = this.loadAddon();
    if (addon instanceof Error) return new Error(`${needs} procctl's addon (${addon.message}); ${addonFix()}`);
    const [ours, theirs] = carried === undefined ? addon.socketPair() : [carried, -1];
    const open = new Set<Socket>();
    let refused = 0;
    let control: Socket | undefined;
    let closed = false;
    let held = false;
    const watch = (): Socket | undefined => {
      if (control !== undefined || closed || held) return control;
      control = new Socket({ fd: ours, readable: true, writable: false });
      control.on('error', (err) => this.log.warn({ sessionId, err: err.message }, 'the session channel failed'));
      control.on('data', (asks: Buffer) => {
        for (let i = 0; i < asks.length; i++) {
          if (open.size >= MAX_CONNECTIONS) {
            if (refused++ === 0) this.log.warn({ sessionId, max: MAX_CONNECTIONS }, 'a session asked its channel for more connections than it may hold at once: the rest are refused');
            continue;
          }
          const [mine, job] = addon.socketPair();
          const sent = addon.sendDescriptor(ours, job);
          closeSync(job);
          if (!sent) {
            closeSync(mine);
            continue;
          }
          const socket = new Socket({ fd: mine, readable: true, writable: true });
          open.add(socket);
          socket.on('close', () => open.delete(socket));
          serve(socket);
        }
      });
      return control;
    };
    setImmediate(watch);
    return {
      fd: theirs,
      handedOver: () => {
        if (theirs >= 0) closeSync(theirs);
      },
      close: () => {
        if (closed) return;
        closed = true;
        if (control) control.destroy();
        else closeQuietly(ours);
        for (const s of open) s.destroy();
      },
      // Asks wait in the socket pair for the next image; connections open now end with this one.
      hold: () => {
        if (control) return holdReading(control);
        // Not read yet: it is not, until resumed.
        held = true;
        return () => {
          held = false;
          watch();
        };
      },
      carry: () => ({ control: ours }),
    };
  }

  private methods(sessionId: string): Map<string, Method> {
    const methods = new Map<string, Method>();
    methods.set('checkpoint', (params, rc) => {
      const { sessionId: named, scope: _scope, token: _token, voice: _voice, checkpointKey: _key, ...rest } = params;
      // A persistent shell's channel is its bash's (SPEC §20): what reports on it is the command running there.
      const session = this.d.registry.find(ALL_SCOPES, sessionId) ?? this.d.shells.commandIn(sessionId);
      const own = session?.id ?? sessionId;
      if (named !== undefined && named !== own) {
        throw forbidden(`this channel belongs to session ${own}: a job reports only its own progress`, { path: ['sessionId'] });
      }
      if (!session) throw forbidden(`session ${sessionId} is gone`);
      return checkpointTool(this.d, { scope: session.scope, signal: rc.signal, cancellation: rc.cancellation, voice: RPC }, { ...rest, sessionId: own });
    });
    for (const name of REFUSED) {
      methods.set(name, () => {
        throw forbidden(`this is session ${sessionId}'s own channel: it takes checkpoint only; a sandboxed job cannot reach the daemon's controls`);
      });
    }
    return methods;
  }
}

