import { InvalidArgumentError, Option, type Command } from 'commander';
import { RpcCallError } from '../../rpc/client.js';
import { hostOf } from '../../remote/reach.js';
import { act, commandExit, EXIT, globalsOf, hasEnded, note, out, printJson, scoped, UsageError, withClient, type GlobalOptions } from '../context.js';
import { runForeground, stillRunning } from '../foreground.js';
import { byteSize, envPair, nonNegative, wholeNumber } from '../options.js';
import { aroundOutput } from '../render.js';
import { commandLine } from '../argv.js';
import { shellQuote } from '../../base/shell-quote.js';

interface ExecOptions {
  bg?: boolean;
  yield?: number;
  yieldOnQuiet?: number;
  timeout?: number;
  pty?: boolean;
  cwd?: string;
  env?: Record<string, string>;
  key?: string;
  ifRunning?: 'replace' | 'reject' | 'keep';
  name?: string;
  stdinNull?: boolean;
  elevated?: boolean;
  review?: boolean;
  memory?: number;
  processes?: number;
  cpuPercent?: number;
  waitPort?: string;
  waitOutput?: string;
  waitHttp?: string;
  waitFile?: string;
  notify?: string;
  shell?: string;
}

/** yieldOnQuietMs's bounds, as schema/exec.ts's QUIET_MS_RANGE (not imported: that would load zod with every command). */
const QUIET_MS_RANGE = [10, 120_000] as const;

/** `--yield-on-quiet MS`: a whole number of ms within the daemon's bounds for yieldOnQuietMs. */
function quietMs(value: string): number {
  const n = wholeNumber(QUIET_MS_RANGE[0])(value);
  if (n > QUIET_MS_RANGE[1]) throw new InvalidArgumentError(`expected at most ${QUIET_MS_RANGE[1]}, got ${n}`);
  return n;
}

/** `exec --wait-*` ran out of its yield before the command was ready (it keeps running): as `procctl wait` says it. */
const NOT_READY = 4;

/** The one `waitFor` the --wait-* flags ask for, or undefined; more than one is a usage error. */
function waitForOf(o: ExecOptions): Record<string, unknown> | undefined {
  const given: Record<string, unknown>[] = [];
  if (o.waitPort !== undefined) {
    const m = /^(?:(.+):)?(\d+)$/.exec(o.waitPort);
    const port = Number(m?.[2]);
    if (!m || !(port >= 1 && port <= 65535)) throw new UsageError(`--wait-port takes a port (1-65535) or HOST:PORT, not "${o.waitPort}"`);
    given.push(m[1] ? { port, host: m[1].replace(/^\[(.*)\]$/, '$1') } : { port });
  }
  if (o.waitOutput !== undefined) given.push({ output: o.waitOutput });
  if (o.waitHttp !== undefined) given.push({ http: o.waitHttp });
  if (o.waitFile !== undefined) given.push({ file: o.waitFile });
  if (given.length > 1) throw new UsageError('give one of --wait-port, --wait-output, --wait-http and --wait-file');
  return given[0];
}

/** `--notify exit|failure|never|RE`: a word, or else a pattern for output_match events. */
function notifyOf(o: ExecOptions): unknown {
  if (o.notify === undefined) return undefined;
  return ['exit', 'failure', 'never'].includes(o.notify) ? o.notify : { match: o.notify };
}

/**
 * The directory a command runs in when --cwd is not given (SPEC §11): the caller's, as a local
 * command would run, for a daemon on this host; nothing over --host, where the daemon's own
 * (the remote user's home, under systemd) applies, since this host's path means nothing there.
 */
function defaultWorkdir(g: GlobalOptions): string | undefined {
  if (hostOf({ host: g.host }) !== undefined) return undefined;
  try {
    return process.cwd();
  } catch {
    throw new UsageError('the current directory no longer exists; cd to one that does, or pass --cwd DIR');
  }
}

/**
 * The ExecParams for these flags; only what the user set is sent, so the daemon's defaults apply,
 * except the directory (see defaultWorkdir). The yield is not among them: the CLI waits itself
 * (see foreground.ts).
 */
function execParams(words: string[], o: ExecOptions, workdir: string | undefined): Record<string, unknown> {
  const p: Record<string, unknown> = { command: commandLine(words) };
  if (workdir !== undefined) p.workdir = workdir;
  if (o.bg) p.background = true;
  if (o.timeout !== undefined) p.timeout = o.timeout;
  if (o.pty) p.pty = true;
  if (o.env) p.env = o.env;
  if (o.key !== undefined) p.key = o.key;
  if (o.ifRunning !== undefined) p.ifRunning = o.ifRunning;
  if (o.name !== undefined) p.name = o.name;
  if (o.stdinNull) p.stdin = 'null';
  if (o.elevated) p.elevated = true;
  if (o.review) p.changes = 'review';
  const limits = { memoryBytes: o.memory, processes: o.processes, cpuPercent: o.cpuPercent };
  if (Object.values(limits).some((v) => v !== undefined)) p.limits = JSON.parse(JSON.stringify(limits));
  const notify = notifyOf(o);
  if (notify !== undefined) p.notify = notify;
  if (o.shell !== undefined) p.shell = o.shell;
  return p;
}

/** Print an exec result for a person: output to stdout, notes to stderr; returns the exit status. */
export function showExecResult(r: Record<string, any>, pty: boolean, scope?: string): number {
  for (const w of (r.warnings as string[] | undefined) ?? []) note(`procctl: warning: ${w}`);
  if (hasEnded(r.status) && typeof r.output === 'string') {
    const text = String(r.text ?? '').replace(/^(\[warning: .*\]\n)+/, '');
    const { before, after } = aroundOutput(text, r.output);
    note(before);
    process.stdout.write(r.output);
    if (r.output && !r.output.endsWith('\n')) process.stdout.write('\n');
    note(after.replace(/^\(no output\)\s*/, ''));
    return commandExit(r);
  }
  if (r.status === 'running' || r.status === 'waiting_input') {
    if (r.tail) out(r.tail);
    stillRunning({ ...r, pty }, scope);
    return EXIT.ok;
  }
  if (r.status === 'approval_required') {
    out(String(r.text ?? ''));
    return EXIT.failed;
  }
  if (r.status === 'denied') {
    note(`procctl: ${String(r.text ?? 'denied')}`);
    return EXIT.failed;
  }
  out(String(r.text ?? ''));
  return commandExit(r);
}

/** `exec --wait-*`: one call that answers once the command is ready, ends, asks, or the yield passes. */
async function untilReady(g: GlobalOptions, params: Record<string, unknown>, pty: boolean): Promise<number> {
  const r = await withClient(g, (c) => c.call('exec', scoped(g, params)));
  if (g.json) {
    printJson(r);
    return r.status === 'running' && r.ready === false ? NOT_READY : commandExit(r);
  }
  if (r.status !== 'running' || r.interrupt) return showExecResult(r, pty, g.scope);
  const first = String(r.text ?? '').split('\n')[0];
  note(`procctl: ${first.charAt(0).toLowerCase()}${first.slice(1)}`);
  if (r.tail) out(r.tail);
  stillRunning({ ...r, pty }, g.scope);
  return r.ready ? EXIT.ok : NOT_READY;
}

/**
 * For `procctl exec ls -la`: the command's own option was read as procctl's. When an unknown
 * option follows the command's first word, the same line with `--` before the command, procctl's
 * own exec options kept in front; else undefined.
 */
export function withDashes(exec: Command, words: readonly string[]): string | undefined {
  const flags = new Map(exec.options.flatMap((o) => [o.long, o.short].filter(Boolean).map((f) => [f as string, o.required || o.optional] as const)));
  const ours: string[] = [];
  const theirs: string[] = [];
  for (let i = 0; i < words.length; i++) {
    const w = words[i];
    if (w === '--') return undefined;
    const flag = w.split('=')[0];
    if (theirs.length === 0 && flags.has(flag)) {
      ours.push(w);
      if (flags.get(flag) && !w.includes('=') && i + 1 < words.length) ours.push(words[++i]);
    } else if (theirs.length === 0 && w.startsWith('-')) return undefined;
    else theirs.push(w);
  }
  if (!theirs.slice(1).some((w) => w.startsWith('-'))) return undefined;
  return ['procctl', 'exec', ...ours, '--', ...theirs].map(shellQuote).join(' ');
}

export function registerExec(program: Command): void {
  const exec = program
    .command('exec')
    .summary('run a command as if locally (output, stdin, Ctrl-C), or leave it running (--bg, --yield)')
    .description(
      "Run CMD with the daemon's shell and wait for it, like a local command: its stdout and stderr stream to " +
        "procctl's stdout and stderr as they come, and a note on how it ended (if not cleanly) goes to stderr. " +
        "One word after -- is a shell command line (`procctl exec -- 'make && ./run | tee log'`); several words " +
        "are an argument vector, run exactly as given, each quoted for the shell (`procctl exec -- sh -c 'exit 4'` exits 4).\n" +
        "procctl's stdin is forwarded to the command (end of input included) unless it is a terminal or " +
        '--stdin-null is given; when the command waits for input and stdin is a terminal, procctl asks the ' +
        'question on stderr and sends the line you type.\n' +
        'SIGINT (Ctrl-C), SIGTERM, SIGHUP and SIGQUIT sent to procctl are delivered to the command\'s process ' +
        'group, and procctl waits for it to end. If procctl is killed outright, the session keeps running.\n' +
        '--yield MS returns after MS if it is still running, leaving it running and printing its session id; ' +
        '--bg returns at once. --yield-on-quiet MS also returns once it has printed nothing for MS (a prompt, a server up), leaving it running.\n' +
        'When an approval rule asks for approval, the session waits unstarted: procctl prints its id and how to ' +
        'answer it (`procctl resume ID --yes|--no`) and exits 1, as it does when a rule denies the command.\n' +
        "Exit status: the command's own, as ssh gives it (128+N when signal N ended it); 0 while it is still " +
        'running; 1 when it was denied or waits for approval.\n' +
        '--wait-port, --wait-output, --wait-http and --wait-file start it and return as soon as it is ready, ' +
        'leaving it running (exit 0), or when it ends first (its own status); after --yield MS (default and ' +
        'at most 120000) without it being ready, exit 4, still running.',
    )
    .argument('<cmd...>', 'the command (put it after --)')
    .option('--bg', 'return at once and keep the command running')
    .option('--yield <ms>', 'wait this long for it to finish, then leave it running and return', wholeNumber())
    .option('--yield-on-quiet <ms>', 'also leave it running and return once it has printed nothing for this long (10-120000)', quietMs)
    .option('--timeout <s>', 'stop the whole process group after this many seconds; 0 = none', nonNegative)
    .option('--pty', 'run under a pseudo-terminal')
    .option('--cwd <dir>', 'working directory (must exist; default: the current one, or the remote home with --host)')
    .option('--env <name=value>', 'set an environment variable (repeatable)', envPair)
    .option('--key <key>', 'thread key: at most one running session per key')
    .addOption(new Option('--if-running <mode>', 'with --key, when one is running').choices(['replace', 'reject', 'keep']))
    .option('--name <label>', 'a label for the session')
    .option('--stdin-null', 'give the command no stdin (it reads end-of-input at once)')
    .option('--elevated', "run outside the sandbox and limits, as the scope's policy allows (deny by default; ask waits for an approval)")
    .option('--review', 'hold what it writes in the workspaces for review: `procctl changes ID`, then apply or discard')
    .option('--memory <size>', "the session's memory limit as a whole (512M, 2G), within its scope's", byteSize)
    .option('--processes <n>', 'how many processes and threads the session may have at once, within its scope\'s limit', wholeNumber(1))
    .option('--cpu-percent <n>', 'CPU time for the session as a percent of one CPU (200 = two), within its scope\'s limit', wholeNumber(1))
    .option('--wait-port <[host:]port>', 'return once a TCP connection to the port succeeds, leaving it running')
    .option('--wait-output <re>', 'return once a line of its output matches the RE2 pattern, leaving it running')
    .option('--wait-http <url>', 'return once a GET of the URL answers 2xx or 3xx, leaving it running')
    .option('--wait-file <path>', 'return once the path (relative to --cwd) exists, leaving it running')
    .option('--shell <name>', "run in the scope's persistent shell NAME: cd, exports, functions and aliases last between commands (made on first use; --cwd only then)")
    .option('--notify <when>', 'which ends are notifications once it runs on: exit (default), failure, never, or an RE2 pattern (an output_match event per matching line)');
  exec.configureOutput({
    outputError: (text, write) => {
      write(text.replace(/^error: /, 'procctl: '));
      // The words after `exec` as typed (after procctl's global options).
      const argv = process.argv.slice(2);
      const fixed = /unknown option/.test(text) ? withDashes(exec, argv.slice(argv.indexOf('exec') + 1)) : undefined;
      if (fixed) write(`(to pass options to the command, put the command after --: ${fixed})\n`);
    },
  });
  exec
    .action(
      act(async (words: string[], o: ExecOptions, cmd: Command) => {
        const g = globalsOf(cmd);
        // A shell keeps its own directory: the caller's is sent only when the shell is made (--cwd), never implied.
        const implied = o.cwd === undefined && o.shell === undefined ? defaultWorkdir(g) : undefined;
        const params = execParams(words, o, o.cwd ?? implied);
        const shown = (r: Record<string, any>) => {
          if (!g.json) return showExecResult(r, Boolean(o.pty), g.scope);
          printJson(r);
          return commandExit(r);
        };
        const waitFor = waitForOf(o);
        if (o.bg && o.yieldOnQuiet !== undefined) throw new UsageError('--yield-on-quiet waits until the command goes quiet, but --bg returns at once: give one of them');
        try {
          if (waitFor) {
            const quiet = o.yieldOnQuiet === undefined ? {} : { yieldOnQuietMs: o.yieldOnQuiet };
            return await untilReady(g, { ...params, waitFor, yieldMs: o.yield ?? 120_000, ...quiet }, Boolean(o.pty));
          }
          if (!o.bg) return await runForeground(g, params, { yieldMs: o.yield, quietMs: o.yieldOnQuiet, stdinNull: o.stdinNull }, shown);
          return shown(await withClient(g, (c) => c.call('exec', scoped(g, params))));
        } catch (err) {
          // The daemon cannot use the caller's directory: it runs as another user, or in other mounts.
          if (implied === undefined || !(err instanceof RpcCallError) || (err.data?.path as unknown[] | undefined)?.[0] !== 'workdir') throw err;
          throw new UsageError(`the daemon cannot run the command in the current directory ${implied}: it does not exist where the daemon runs, or the daemon may not enter it (another user, other mounts); pass --cwd with a directory it can use`);
        }
      }),
    );
}
