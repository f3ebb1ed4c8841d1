import type { Command } from 'commander';
import { act, globalsOf, runAction } from '../context.js';

/** All of stdin as text. */
async function readStdin(): Promise<string> {
  let text = '';
  process.stdin.setEncoding('utf8');
  for await (const chunk of process.stdin as AsyncIterable<string>) text += chunk;
  return text;
}

export function registerPaste(program: Command): void {
  program
    .command('paste')
    .summary('paste text into a terminal (pty) session')
    .description(
      "Paste TEXT ('-' for this command's stdin) into session ID, which must run under a terminal (exec --pty). " +
        'It is wrapped in bracketed-paste markers when the application asked for them (or with --bracketed), so ' +
        'an editor or shell takes it as one paste rather than typed keys. Nothing is pressed after it: add ' +
        '`procctl submit ID` to press Enter.',
    )
    .argument('<id>', 'session id')
    .argument('<text>', "the text, or '-' for stdin")
    .option('--bracketed', 'always wrap in bracketed-paste markers')
    .option('--no-bracketed', 'never wrap in bracketed-paste markers')
    .action(
      act(async (id: string, text: string, o: { bracketed?: boolean }, cmd: Command) => {
        const body = text === '-' ? await readStdin() : text;
        return runAction(globalsOf(cmd), { action: 'paste', sessionId: id, text: body, ...(o.bracketed !== undefined ? { bracketed: o.bracketed } : {}) });
      }),
    );
}
