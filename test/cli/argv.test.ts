import { execFileSync } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import fc from 'fast-check';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { commandLine } from '../../src/cli/argv.js';
import { shellQuote } from '../../src/base/shell-quote.js';
import { startDaemon, stopAllDaemons, type TestDaemon } from '../helpers/daemon.js';
import { cliOn, killChildren } from './run.js';

/** A tiny program that prints the words it was given as JSON. */
const dir = mkdtempSync(join(tmpdir(), 'procctl-argv-'));
const PRINT_ARGV = join(dir, 'print-argv.cjs');
writeFileSync(PRINT_ARGV, 'process.stdout.write(JSON.stringify(process.argv.slice(2)));\n');

/** Words that are hard for a shell: quotes, `$`, backslashes, newlines, globs, empty, non-ASCII. */
const tricky = fc.constantFrom("'", '"', '$', '$HOME', '\\', '\\n', '\n', '`id`', '$(id)', ' ', '\t', '*', '?', '~', '#', ';', '&&', '|', '!', '{}', '', 'é', '日本', '😀', '=', 'A=1', '--x', '-');
const word = fc.oneof(
  tricky,
  fc.string({ unit: 'binary', maxLength: 12 }).map((s) => s.replaceAll('\0', '')),
  fc.array(tricky, { maxLength: 4 }).map((parts) => parts.join('')),
);
const words = fc.array(word, { minLength: 1, maxLength: 6 });

/**
 * What a command sees when `shell` runs the command line of `[sh, -c, PRINT, argv0, ...args]`:
 * the inner sh prints each of its arguments ended by a NUL (no argument can hold one).
 */
function seenBy(shell: string, args: string[]): string[] {
  const line = commandLine(['sh', '-c', 'printf "%s\\0" "$@"', 'argv0', ...args]);
  return execFileSync(shell, ['-c', line], { encoding: 'utf8' }).split('\0').slice(0, -1);
}

describe('the words after -- (SPEC §11)', () => {
  it('keep one word as a shell command line', () => {
    expect(commandLine(['make && ./run | tee log'])).toBe('make && ./run | tee log');
  });

  it('quote each word of a vector, plain words as they are', () => {
    expect(commandLine(['sh', '-c', 'exit 4'])).toBe("sh -c 'exit 4'");
    expect(commandLine(['printf', '%s\n', '$HOME'])).toBe("printf '%s\n' '$HOME'");
    expect(commandLine(['echo', ''])).toBe("echo ''");
    expect(shellQuote("it's")).toBe("'it'\\''s'");
  });

  it('quote a first word the shell would read as an assignment or a reserved word', () => {
    expect(commandLine(['A=1', 'x'])).toBe("'A=1' x");
    expect(commandLine(['time', 'ls'])).toBe("'time' ls");
    expect(commandLine(['ls', 'A=1'])).toBe('ls A=1');
  });

  for (const shell of ['/bin/sh', '/bin/bash']) {
    it(`hand the command exactly the words given, under ${shell} (property)`, () => {
      fc.assert(
        fc.property(words, (args) => {
          expect(seenBy(shell, args)).toEqual(args);
        }),
        { numRuns: 200 },
      );
    });
  }
});

describe('procctl exec -- WORDS', () => {
  let d: TestDaemon;
  let run: ReturnType<typeof cliOn>;
  beforeAll(async () => {
    d = await startDaemon();
    run = cliOn(d.socket);
  });
  afterEach(killChildren);
  afterAll(stopAllDaemons);

  it("runs an argument vector as given: sh -c 'exit 4' exits 4 and names code 4", async () => {
    const r = await run(['exec', '--', 'sh', '-c', 'exit 4']);
    expect(r.code).toBe(4);
    expect(r.stderr).toContain('code 4');
  });

  it("passes '$HOME' to printf untouched", async () => {
    const r = await run(['exec', '--', 'printf', '%s\\n', '$HOME']);
    expect(r.code).toBe(0);
    expect(r.stdout).toBe('$HOME\n');
  });

  it('runs one word as a shell command line', async () => {
    const r = await run(['exec', '--', 'echo a && echo b']);
    expect(r.stdout).toBe('a\nb\n');
  });

  it('hands the command exactly the words given, through the daemon (property)', async () => {
    await fc.assert(
      fc.asyncProperty(words, async (args) => {
        const r = await run(['--json', 'exec', '--', process.execPath, PRINT_ARGV, ...args]);
        expect(r.code, r.stderr).toBe(0);
        expect(JSON.parse(JSON.parse(r.stdout).output)).toEqual(args);
      }),
      { numRuns: 12 },
    );
  });
});
