/**
 * Answers a person chose to remember (SPEC §8): allow rules for one scope, made from an approved
 * command, kept in the state directory. Pure matching here; the store is daemon/remembered.ts.
 */
export interface RememberedRule {
  scope: string;
  /** `command`: exactly these words; `prefix`: the command's name and its first non-option word. */
  kind: 'command' | 'prefix';
  words: string[];
  /** When it was remembered (ms), and the command line it was made from. */
  at: number;
  from: string;
}

/** The words to remember of an approved simple command, or why it cannot be remembered. */
export function wordsToRemember(kind: RememberedRule['kind'], argv: readonly (string | undefined)[]): string[] | { problem: string } {
  if (argv[0] === undefined) return { problem: 'its command name is not literal' };
  if (kind === 'command') {
    if (argv.some((w) => w === undefined)) return { problem: 'not every word of it is literal, so it cannot be remembered exactly; remember its prefix instead' };
    return argv as string[];
  }
  const first = firstPositional(argv.slice(1));
  return first === undefined ? [argv[0]] : [argv[0], first];
}

function firstPositional(args: readonly (string | undefined)[]): string | undefined {
  for (const a of args) {
    if (a === undefined) return undefined;
    if (a === '--') continue;
    if (!a.startsWith('-')) return a;
  }
  return undefined;
}

/** Does a remembered rule allow this simple command? A word that is not literal never matches. */
export function remembers(rule: RememberedRule, argv: readonly (string | undefined)[]): boolean {
  if (rule.kind === 'command') return argv.length === rule.words.length && rule.words.every((w, i) => argv[i] === w);
  if (argv[0] !== rule.words[0]) return false;
  return rule.words.length === 1 || firstPositional(argv.slice(1)) === rule.words[1];
}
