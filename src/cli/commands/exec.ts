import { Option, type Command } from 'commander';
import { act, EXIT, globalsOf, hasEnded, note, out, outcomeExit, printJson, scoped, withClient } from '../context.js';
import { envPair, nonNegative, wholeNumber } from '../options.js';
import { aroundOutput } from '../render.js';

interface ExecOptions {
  bg?: boolean;
  yield?: number;
  timeout?: number;
  pty?: boolean;
  cwd?: string;
  env?: Record<string, string>;
  key?: string;
  ifRunning?: 'replace' | 'reject' | 'keep';
  name?: string;
  stdinNull?: boolean;
}

/** The ExecParams for these flags; only what the user set is sent, so the daemon's defaults apply. */
function execParams(words: string[], o: ExecOptions): Record<string, unknown> {
  const p: Record<string, unknown> = { command: words.join(' ') };
  if (o.bg) p.background = true;
  if (o.yield !== undefined) p.yieldMs = o.yield;
  if (o.timeout !== undefined) p.timeout = o.timeout;
  if (o.pty) p.pty = true;
  if (o.cwd !== undefined) p.workdir = o.cwd;
  if (o.env) p.env = o.env;
  if (o.key !== undefined) p.key = o.key;
  if (o.ifRunning !== undefined) p.ifRunning = o.ifRunning;
  if (o.name !== undefined) p.name = o.name;
  if (o.stdinNull) p.stdin = 'null';
  return p;
}

/** Print an exec result for a person: output to stdout, notes to stderr; returns the exit status. */
function showExecResult(r: Record<string, any>): number {
  for (const w of (r.warnings as string[] | undefined) ?? []) note(`procctl: warning: ${w}`);
  if (hasEnded(r.status) && typeof r.output === 'string') {
    const text = String(r.text ?? '').replace(/^(\[warning: .*\]\n)+/, '');
    const { before, after } = aroundOutput(text, r.output);
    note(before);
    process.stdout.write(r.output);
    if (r.output && !r.output.endsWith('\n')) process.stdout.write('\n');
    note(after.replace(/^\(no output\)\s*/, ''));
    return outcomeExit(r);
  }
  if (r.status === 'running' || r.status === 'waiting_input') {
    if (r.tail) out(r.tail);
    const prompt = r.interrupt ? ` and waiting for input (${r.interrupt.kind}): "${r.interrupt.reason}"` : '';
    out(`Session ${r.sessionId} is still running (pid ${r.pid ?? '-'})${prompt}: ${r.name}`);
    note(`Follow it with \`procctl log ${r.sessionId} -f\`, feed it with \`procctl write ${r.sessionId} DATA\`, stop it with \`procctl kill ${r.sessionId}\`.`);
    return EXIT.ok;
  }
  out(String(r.text ?? ''));
  return outcomeExit(r);
}

export function registerExec(program: Command): void {
  program
    .command('exec')
    .summary('run a command; print its output, or its session id if it is still running')
    .description(
      "Run CMD with the daemon's shell. If it finishes within the yield, its combined output goes to stdout " +
        'and notes (caps, exit code) to stderr; otherwise it keeps running in the background and its session id ' +
        'is printed. The words after -- are joined with spaces and run by the shell, as ssh does.\n' +
        'Interrupting procctl before it returns stops the command too; use --bg to leave it running.\n' +
        'Exit status: 0 if the command exited 0 or is still running, 1 if it failed or exited non-zero.',
    )
    .argument('<cmd...>', 'the command (put it after --)')
    .option('--bg', 'return at once and keep the command running')
    .option('--yield <ms>', 'wait this long for it to finish before backgrounding it (10..120000)', wholeNumber())
    .option('--timeout <s>', 'stop the whole process group after this many seconds; 0 = none', nonNegative)
    .option('--pty', 'run under a pseudo-terminal')
    .option('--cwd <dir>', 'working directory (must exist)')
    .option('--env <name=value>', 'set an environment variable (repeatable)', envPair)
    .option('--key <key>', 'thread key: at most one running session per key')
    .addOption(new Option('--if-running <mode>', 'with --key, when one is running').choices(['replace', 'reject', 'keep']))
    .option('--name <label>', 'a label for the session')
    .option('--stdin-null', 'give the command no stdin (it reads end-of-input at once)')
    .action(
      act(async (words: string[], o: ExecOptions, cmd: Command) => {
        const g = globalsOf(cmd);
        const r = await withClient(g, (c) => c.call('exec', scoped(g, execParams(words, o))));
        if (g.json) {
          printJson(r);
          return outcomeExit(r);
        }
        return showExecResult(r);
      }),
    );
}
