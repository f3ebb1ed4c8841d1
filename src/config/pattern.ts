import { RE2JS } from 're2js';

/**
 * Compile a pattern with RE2 (linear-time matching: no pattern can make a match hang). Throws
 * the engine's syntax error, whose message names what is wrong.
 */
export function compilePattern(source: string): RE2JS {
  return RE2JS.compile(source);
}

/** Why a pattern does not compile, or undefined when it does (checked as the config loads). */
export function patternError(source: string): string | undefined {
  try {
    compilePattern(source);
    return undefined;
  } catch (err) {
    return (err as Error).message;
  }
}
