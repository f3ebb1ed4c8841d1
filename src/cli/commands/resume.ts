import type { Command } from 'commander';
import { act, approverOf, commandExit, EXIT, globalsOf, out, printJson, scoped, UsageError, withClient } from '../context.js';
import { showExecResult } from './exec.js';

interface ResumeOptions {
  yes?: boolean;
  no?: boolean;
  text?: string;
  eof?: boolean;
  remember?: string;
}

/** The one answer the flags give; a usage error for none or several. */
function answerOf(o: ResumeOptions): Record<string, unknown> {
  const given: Record<string, unknown>[] = [];
  if (o.yes) given.push({ confirm: true });
  if (o.no) given.push({ confirm: false });
  if (o.text !== undefined) given.push({ text: o.text });
  if (o.eof) given.push({ eof: true });
  if (given.length !== 1) throw new UsageError(`resume takes exactly one of --yes, --no, --text T or --eof${given.length ? ` (got ${given.length})` : ''}`);
  if (o.remember !== undefined) {
    if (!o.yes) throw new UsageError('--remember goes with --yes');
    if (o.remember !== 'command' && o.remember !== 'prefix') throw new UsageError(`--remember takes command or prefix, not "${o.remember}"`);
    return { ...given[0], remember: o.remember };
  }
  return given[0];
}

export function registerResume(program: Command): void {
  program
    .command('resume')
    .summary('answer the question a session is waiting on, or its approval (of a command, or of its held changes)')
    .description(
      'Answer the pending interrupt of session ID (see its status waiting_input in ps or poll), once: --yes or ' +
        '--no sends y or n and Enter, --text sends T and Enter (for a choice, its number or its label), --eof ' +
        "closes the session's input.\n" +
        'A session waiting for approval (status approval_required) takes --yes, which starts its command and ' +
        'prints what exec would have (exit status as for exec), or --no, which denies it.\n' +
        'An ended session whose changes wait for approval (an approval rule said review; procctl approvals lists ' +
        'it with its summary, procctl changes ID shows the diff) takes --yes, which applies them to the workspace, ' +
        'or --no, which discards them.',
    )
    .argument('<id>', 'session id')
    .option('--yes', 'confirm')
    .option('--no', 'refuse')
    .option('--text <text>', 'the text to send (a secret is not echoed back)')
    .option('--eof', 'close its input instead of answering')
    .option('--remember <what>', 'with --yes on an approval: keep the answer as an allow rule for the scope, for this exact command (command) or its name and first word (prefix)')
    .action(
      act(async (id: string, o: ResumeOptions, cmd: Command) => {
        const input = answerOf(o);
        const g = globalsOf(cmd);
        // A person at the command line answers approvals: the credential goes with the answer (SPEC §8).
        const r = await withClient(g, (c) => c.call('process', scoped(g, { action: 'resume', sessionId: id, input, ...approverOf(g) })));
        // An approval is answered with the result of the exec it started (or its denial), which has a name.
        const approval = typeof r.name === 'string';
        // Refusing is a successful answer; a started command's exit status is that of exec.
        const started = approval && input.confirm === true;
        if (g.json) {
          printJson(r);
          return started ? commandExit(r) : EXIT.ok;
        }
        if (!approval) {
          out(String(r.text ?? ''));
          return EXIT.ok;
        }
        const code = showExecResult(r, false, g.scope);
        return started ? code : EXIT.ok;
      }),
    );
}
