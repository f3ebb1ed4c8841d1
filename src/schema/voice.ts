/**
 * Who reads a result's text, and so how its hints name the next step (SPEC §11): a model calling
 * the tools (`process {action:"poll", sessionId:"ab12"}`) or a person at the command line
 * (`procctl poll ab12`). Texts are rendered once, in tools/, with the hints taken from here; the
 * front door chooses (the CLI sends `voice: "cli"`, everything else gets the tools' own words).
 * Nothing here may import more than it needs: the CLI loads this file at every start.
 */

import { shellQuote } from '../base/shell-quote.js';

export type ResumeAnswer = { confirm: boolean } | { text: string } | { eof: true };

/** What the reader is told to do next, in the process tool's own terms. */
export type Call =
  | { action: 'list' }
  | { action: 'poll'; sessionId: string; timeout?: number }
  | { action: 'log' | 'kill' | 'remove' | 'clear' | 'pause' | 'continue' | 'changes' | 'apply' | 'discard' | 'undo'; sessionId: string }
  | { action: 'remove' | 'clear'; sessionId: string; discard: true }
  | { action: 'write'; sessionId: string; eof?: boolean }
  | { action: 'signal'; sessionId: string; signal?: string }
  | { action: 'resume'; sessionId: string; input: ResumeAnswer }
  | { action: 'wait'; sessionIds: string[]; mode?: 'all' };

/** A placeholder the reader fills in: `input:{text:"<number>"}`, `--text NUMBER`. */
export const NUMBER = '<number>';
export const SECRET = '<secret>';
export const ANSWER = '...';

export interface Voice {
  readonly name: 'rpc' | 'cli';
  /** The call that does `c`, written as this reader makes it. */
  call(c: Call): string;
  /** An exec option: `ifRunning:"replace"`, `--if-running replace`; `pty:true`, `--pty`; `workdir "/x"`, `--cwd /x`. */
  execOption(name: 'ifRunning' | 'pty' | 'workdir', value: string | boolean): string;
  /** How to page a log: `pass offset/limit to page`. */
  paging(sessionId: string): string;
}

/** A value as the tool descriptions write params: `{confirm:true}`, `"ab12"`. */
function literal(v: unknown): string {
  // Written by concatenation, not entries, map and join: every poll's text has a few of these.
  if (Array.isArray(v)) {
    let out = '[';
    for (let i = 0; i < v.length; i++) out += `${i > 0 ? ', ' : ''}${literal(v[i])}`;
    return `${out}]`;
  }
  if (v !== null && typeof v === 'object') {
    let out = '{';
    for (const k in v) {
      if (!Object.hasOwn(v, k)) continue;
      out += `${out.length > 1 ? ', ' : ''}${k}:${literal((v as Record<string, unknown>)[k])}`;
    }
    return `${out}}`;
  }
  return JSON.stringify(v);
}

/** The tools' own words, for models (and anything else that is not the CLI). */
export const RPC: Voice = {
  name: 'rpc',
  // A call is written whole, a placeholder where the reader decides (what to write, which signal).
  call: (c) => `process ${literal(c.action === 'write' && !c.eof ? { ...c, data: ANSWER } : c.action === 'signal' && !c.signal ? { ...c, signal: ANSWER } : c)}`,
  execOption: (name, value) => (name === 'workdir' ? `workdir ${JSON.stringify(value)}` : `${name}:${JSON.stringify(value)}`),
  paging: () => 'pass offset/limit to page',
};

const PLACEHOLDERS: Record<string, string> = { [NUMBER]: 'NUMBER', [SECRET]: 'SECRET', [ANSWER]: 'TEXT' };

/** The words after `procctl resume ID` for an answer. */
function resumeFlags(input: ResumeAnswer): string {
  if ('confirm' in input) return input.confirm ? '--yes' : '--no';
  if ('eof' in input) return '--eof';
  return `--text ${PLACEHOLDERS[input.text] ?? shellQuote(input.text)}`;
}

/** `--host H` and `--socket S` as given (undefined: not given), as words for hints. */
export function reachWords(reach: { host?: string; socket?: string }): string[] {
  return [...(reach.host !== undefined ? ['--host', shellQuote(reach.host)] : []), ...(reach.socket !== undefined ? ['--socket', shellQuote(reach.socket)] : [])];
}

/** Text with every `procctl …` hint in backquotes made to reach the daemon these words reach (the daemon writes only the scope). */
export function hintsReaching(text: string, words: readonly string[]): string {
  return words.length === 0 ? text : text.replaceAll('`procctl ', `\`procctl ${words.join(' ')} `);
}

/** A `procctl` command in backquotes, naming `--scope` when it is not the default one (the CLI adds `--host` and `--socket`). */
export function procctlCommand(scope: string | undefined, ...words: string[]): string {
  return `\`procctl ${scope === undefined || scope === 'default' ? '' : `--scope ${shellQuote(scope)} `}${words.join(' ')}\``;
}

/** `procctl` commands, in backquotes; `--scope` is named when the session is not in the default scope. */
export function cliVoice(scope = 'default'): Voice {
  const procctl = (...words: string[]) => procctlCommand(scope, ...words);
  return {
    name: 'cli',
    call(c) {
      switch (c.action) {
        case 'list':
          return procctl('ps');
        case 'poll':
          return procctl('poll', c.sessionId, ...(c.timeout === undefined ? [] : ['--wait', String(c.timeout)]));
        case 'remove':
          return procctl('rm', c.sessionId, ...('discard' in c ? ['--discard'] : []));
        case 'clear':
          return procctl('clear', c.sessionId, ...('discard' in c ? ['--discard'] : []));
        case 'write':
          return procctl('write', c.sessionId, c.eof ? '--eof' : 'DATA');
        case 'signal':
          return procctl('signal', c.sessionId, c.signal ?? 'SIGNAL');
        case 'resume':
          return procctl('resume', c.sessionId, resumeFlags(c.input));
        case 'wait':
          return procctl('wait', ...c.sessionIds, ...(c.mode === 'all' ? ['--all'] : []));
        default:
          return procctl(c.action, c.sessionId);
      }
    },
    execOption(name, value) {
      if (name === 'pty') return '`--pty`';
      if (name === 'workdir') return `\`--cwd ${shellQuote(String(value))}\``;
      return `\`--if-running ${String(value)}\``;
    },
    paging: (sessionId) => `page it with ${procctl('log', sessionId, '--offset N', '--limit N')}`,
  };
}

/** The voice a request asked for (`voice: "cli"` beside scope and token); RPC when it asked none. */
export function voiceFor(name: unknown, scope: string): Voice | undefined {
  if (name === undefined || name === 'rpc') return RPC;
  if (name === 'cli') return cliVoice(scope);
  return undefined;
}
