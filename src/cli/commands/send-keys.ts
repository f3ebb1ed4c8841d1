import type { Command } from 'commander';
import { RpcCallError } from '../../rpc/client.js';
import { act, globalsOf, runAction, UsageError } from '../context.js';

interface SendKeysOptions {
  literal?: boolean;
  hex?: string[];
}

export function registerSendKeys(program: Command): void {
  program
    .command('send-keys')
    .summary('type named keys into a terminal (pty) session')
    .description(
      'Send keys to session ID, which must run under a terminal (exec --pty), as tmux send-keys does: names such ' +
        'as Enter, Tab, Escape, Space, BSpace, Up, Down, Left, Right, Home, End, PageUp, PageDown, Insert, Delete, ' +
        'F1-F12, or a single character, with C-, M-, S- modifiers (C-c, C-d, M-x, S-Tab). --literal sends each KEY ' +
        'as text instead. --hex sends raw bytes (e.g. 1b 5b 41) after the keys; it takes the words that follow it, ' +
        'so put it last. If one name is unknown, nothing is sent.',
    )
    .argument('<id>', 'session id')
    .argument('[keys...]', 'key names, or text with --literal')
    .option('--literal', 'send the KEY words as text, not key names')
    .option('--hex <bytes...>', 'raw bytes as hex, sent after the keys')
    .action(
      act(async (id: string, keys: string[], o: SendKeysOptions, cmd: Command) => {
        if (keys.length === 0 && !o.hex?.length) throw new UsageError('send-keys needs at least one KEY (or --hex bytes)');
        const params = { action: 'send-keys', sessionId: id, keys, ...(o.literal ? { literal: true } : {}), ...(o.hex?.length ? { hex: o.hex } : {}) };
        try {
          return await runAction(globalsOf(cmd), params);
        } catch (err) {
          // An unknown key name or a malformed byte came from the command line.
          if (err instanceof RpcCallError && err.kind === 'invalid') throw new UsageError(err.message.replace('pass literal:true', 'pass --literal'));
          throw err;
        }
      }),
    );
}
