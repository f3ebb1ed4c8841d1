/**
 * The command after `--` (SPEC §11): one word is a shell command line, as typed; several words
 * are an argument vector, each quoted so the daemon's shell hands the command exactly those words.
 */

import { shellQuote, singleQuoted } from '../base/shell-quote.js';

/** Plain words the shell still reads as syntax when they come first. */
const RESERVED = new Set(['case', 'coproc', 'do', 'done', 'elif', 'else', 'esac', 'fi', 'for', 'function', 'if', 'in', 'select', 'then', 'time', 'until', 'while']);

/**
 * The shell command line for the words after `--`. The first word of a vector is quoted whenever
 * the shell could take it for something else than a program name: an assignment (`A=1`) or a
 * reserved word (`time`, `if`).
 */
export function commandLine(words: readonly string[]): string {
  if (words.length === 1) return words[0];
  return words
    .map((w, i) => (i === 0 && (w.includes('=') || RESERVED.has(w)) ? singleQuoted(w) : shellQuote(w)))
    .join(' ');
}
