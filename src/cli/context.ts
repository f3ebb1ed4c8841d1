import type { Command } from 'commander';
import { constants as osConstants } from 'node:os';
import { DaemonClient, DaemonUnreachableError, RpcCallError, type Notification } from '../rpc/client.js';
import { INVALID_PARAMS } from '../rpc/errors.js';
import { dialFor, hostOf } from '../remote/reach.js';
import { operatorCredentials, operatorFix, operatorParams } from '../rpc/credential.js';
import { hintsReaching, reachWords } from '../schema/voice.js';

/** The options every command accepts (SPEC §11). */
export interface GlobalOptions {
  socket?: string;
  /** `--host ssh://…`: the daemon on another host (else $PROCCTL_HOST, else the local one). */
  host?: string;
  scope?: string;
  token?: string;
  json?: boolean;
}

/** A mistake in how the command was called: exit status 2. */
export class UsageError extends Error {}

/** Exit statuses (SPEC §11). */
export const EXIT = { ok: 0, failed: 1, usage: 2, unreachable: 3 } as const;

/** The global options as seen from inside a subcommand's action. */
export function globalsOf(cmd: Command): GlobalOptions {
  return cmd.optsWithGlobals<GlobalOptions>();
}

/**
 * Params for the scoped methods (exec, process, tool, subscribe): adds scope and token when given,
 * and asks for texts whose hints name procctl commands (`procctl poll ID`) instead of tool calls.
 */
export function scoped(g: GlobalOptions, params: Record<string, unknown>, voice: 'cli' | 'rpc' = 'cli'): Record<string, unknown> {
  if (g.scope === OPERATOR) return { ...params, voice, ...asOperator(g) };
  return { ...params, voice, ...(g.scope !== undefined ? { scope: g.scope } : {}), ...(g.token !== undefined ? { token: g.token } : {}) };
}

/** Scope "*": every scope, the operator's (SPEC §8). */
const OPERATOR = '*';

/** Is the daemon these options reach on another host (`--host`, $PROCCTL_HOST)? */
const remoteOf = (g: Pick<GlobalOptions, 'host'>) => hostOf({ host: g.host }) !== undefined;

/**
 * The params that make a request the operator's, as the console sends them (rpc/credential.ts):
 * scope "*" with the adminToken (`--token`, else $PROCCTL_ADMIN_TOKEN), or where there is none
 * the approver credential ($PROCCTL_APPROVER_TOKEN, else the file beside a local daemon's socket).
 */
export function asOperator(g: GlobalOptions): Record<string, unknown> {
  return operatorParams(operatorCredentials({ socket: g.socket, remote: remoteOf(g), token: g.token }));
}

/** The approver credential a person's answer carries: $PROCCTL_APPROVER_TOKEN, else (a local daemon) the file beside its socket. */
export function approverOf(g: GlobalOptions): { approverToken?: string } {
  const { approverToken } = operatorCredentials({ socket: g.socket, remote: remoteOf(g) });
  return approverToken ? { approverToken } : {};
}

/**
 * Connect to the daemon of `--host`/`--socket`. A daemon from before `voice` (one still running
 * after an upgrade, or another host's) refuses it as an unknown parameter: such a call is made
 * again without it, and that daemon's texts name tool parameters.
 */
export async function connect(g: GlobalOptions, onNotification?: (n: Notification) => void): Promise<DaemonClient> {
  const client = await DaemonClient.over(await dialFor({ host: g.host, socket: g.socket }), onNotification);
  const call = client.call.bind(client);
  client.call = async (method, params, ...rest) => {
    try {
      return await call(method, params, ...rest);
    } catch (err) {
      // The daemon does not take this request as the operator's: say what to set.
      if (params?.scope === OPERATOR && err instanceof RpcCallError && err.kind === 'forbidden') {
        err.message = `${err.message.replace(/\.$/, '')}. To act as the operator, ${operatorFix({ socket: g.socket, remote: remoteOf(g) })}`;
        throw err;
      }
      if (params?.voice === undefined || !(err instanceof RpcCallError) || err.code !== INVALID_PARAMS || (err.data?.path as unknown[] | undefined)?.[0] !== 'voice') throw err;
      const { voice: _voice, ...without } = params;
      return call(method, without, ...rest);
    }
  };
  return client;
}

/**
 * Connect, run `fn`, and always close the connection afterwards. A refusal of kind `restarting`
 * (the daemon hands its sessions to a new image, SPEC §19: nothing was done) is retried on a new
 * connection, answered by the new image once it serves: a person sees a pause, not an error (and
 * a word on stderr if it lasts). With `read` (`fn` changes nothing), a connection that closed
 * before its answer is retried too.
 */
export async function withClient<T>(g: GlobalOptions, fn: (c: DaemonClient) => Promise<T>, opts: { read?: boolean } = {}): Promise<T> {
  const start = Date.now();
  let said = false;
  for (;;) {
    const client = await connect(g);
    try {
      return await fn(client);
    } catch (err) {
      const lost = opts.read && err instanceof DaemonUnreachableError && err.phase === 'lost';
      if (!(lost || (err instanceof RpcCallError && err.kind === 'restarting')) || Date.now() - start > RESTART_RIDE_MS) throw err;
    } finally {
      client.close();
    }
    if (!said && Date.now() - start > RESTART_SAY_MS) {
      note(`procctl: the daemon is restarting; waiting for it, up to ${RESTART_RIDE_MS / 1000} s`);
      said = true;
    }
    await new Promise((r) => setTimeout(r, RESTART_RETRY_MS));
  }
}

/** How long a client rides through a restart: 30 s, in steps of a quarter second; a pause past 3 s is explained. */
const RESTART_RIDE_MS = 30_000;
const RESTART_RETRY_MS = 250;
const RESTART_SAY_MS = 3_000;

/** Write text to stdout, ending it with a newline. */
export function out(text: string): void {
  if (text === '') return;
  text = reached(text);
  process.stdout.write(text.endsWith('\n') ? text : `${text}\n`);
}

/** Write text to stderr, ending it with a newline. */
export function note(text: string): void {
  if (text === '') return;
  text = reached(text);
  process.stderr.write(text.endsWith('\n') ? text : `${text}\n`);
}

/** The options that reach this command's daemon (`--host H`, `--socket S`), as words for hints. */
let reach: string[] = [];

/**
 * Hints name commands that must reach the same daemon: the daemon writes `procctl [--scope S] …`,
 * knowing the scope; the CLI adds the `--host` and `--socket` it was given, which only it knows.
 */
export function hintsReach(g: Pick<GlobalOptions, 'host' | 'socket'>): void {
  // `procctl ui` takes --host more than once (the fleet view): no one host to name then.
  reach = reachWords(typeof g.host === 'string' || g.host === undefined ? g : { socket: g.socket });
}

/** Text with every `procctl …` hint in backquotes made to reach this daemon. */
export function reached(text: string): string {
  return hintsReaching(text, reach);
}

/** The raw result for `--json`. */
export function printJson(value: unknown): void {
  process.stdout.write(`${JSON.stringify(value, null, 2)}\n`);
}

/** One compact JSON object per line, for streams (`events`, `log -f`). */
export function printJsonLine(value: unknown): void {
  process.stdout.write(`${JSON.stringify(value)}\n`);
}

const ENDED = new Set(['completed', 'failed', 'denied']);

/** Has a session with this status ended? */
export const hasEnded = (status: unknown): boolean => typeof status === 'string' && ENDED.has(status);

/** Exit status for a result that reports a session's end: 1 unless it completed with code 0. */
export function outcomeExit(r: { status?: unknown; exitCode?: unknown }): number {
  if (r.status === 'failed' || r.status === 'denied') return EXIT.failed;
  if (r.status === 'completed' && r.exitCode !== 0) return EXIT.failed;
  return EXIT.ok;
}

/**
 * Exit status of `procctl exec` (and `resume --yes`, which answers as exec would): the command's
 * own, as ssh and docker exec give it (SPEC §11: `procctl exec -- sh -c 'exit 4'` exits 4); 128 +
 * the signal's number when a signal ended it, as a shell says; else as outcomeExit (0 while it
 * runs, 1 when it never ran).
 */
export function commandExit(r: { status?: unknown; exitCode?: unknown; signal?: unknown }): number {
  if (r.status !== 'completed' && r.status !== 'failed') return outcomeExit(r);
  if (typeof r.exitCode === 'number' && r.exitCode > 0) return r.exitCode;
  const signal = typeof r.signal === 'string' ? osConstants.signals[r.signal as NodeJS.Signals] : undefined;
  if (signal !== undefined) return 128 + signal;
  return outcomeExit(r);
}

/**
 * Is `err` one of these, or by its name a copy of one? A command's own imports (the MCP server,
 * loaded from dist/ by the one-file CLI) bring their own copy of the client's classes.
 */
function isA<T extends abstract new (...args: never[]) => Error>(err: unknown, type: T, name: string): err is InstanceType<T> {
  return err instanceof type || (err instanceof Error && err.name === name);
}

/** Report an error on stderr and return the exit status it maps to. */
export function reportError(err: unknown): number {
  if (isA(err, DaemonUnreachableError, 'DaemonUnreachableError')) {
    note(`procctl: ${err.message}${err.phase === 'connect' ? `; ${err.hint}` : ''}`);
    return EXIT.unreachable;
  }
  if (err instanceof UsageError) {
    note(`procctl: ${err.message}`);
    return EXIT.usage;
  }
  if (isA(err, RpcCallError, 'RpcCallError')) {
    note(`procctl: ${err.message}`);
    // Params the daemon's schema refused came from the command line: a usage error.
    return err.code === INVALID_PARAMS ? EXIT.usage : EXIT.failed;
  }
  note(`procctl: ${err instanceof Error ? err.message : String(err)}`);
  return EXIT.failed;
}

/** Wrap a command's action: its returned status (or its error's) becomes the exit status. */
export function act<A extends unknown[]>(fn: (...args: A) => Promise<number>): (...args: A) => Promise<void> {
  return async (...args: A) => {
    const cmd = args.at(-1) as Command | undefined;
    if (typeof cmd?.optsWithGlobals === 'function') hintsReach(globalsOf(cmd));
    try {
      process.exitCode = await fn(...args);
    } catch (err) {
      process.exitCode = reportError(err);
    }
  };
}

/** Call one method (a process action by default) and print its `text` (the raw result with --json); exit 0. */
export async function runAction(g: GlobalOptions, params: Record<string, unknown>, method = 'process'): Promise<number> {
  const r = await withClient(g, (c) => c.call(method, scoped(g, params)));
  if (g.json) printJson(r);
  else out(String(r.text ?? ''));
  return EXIT.ok;
}
