import { Command } from 'commander';
import { describe, expect, it } from 'vitest';
import { COMMANDS } from '../../src/cli/commands/index.js';
import { buildProgram, commandWord } from '../../src/cli/main.js';

describe('the command table', () => {
  it("lists each command with the summary its own file gives it, in help's order", async () => {
    const program = await buildProgram();
    expect(program.commands.map((c) => [c.name(), c.summary()])).toEqual(COMMANDS.map((c) => [c.name, c.summary]));
  });

  it('loads only the command being run', async () => {
    const program = await buildProgram(['--socket', '/x', 'ps', '--json']);
    expect(program.commands.map((c) => c.name())).toEqual(['ps']);
    expect(program.commands[0].description()).not.toBe('');
  });

  it('lists every command by name and summary, loading none, when none is named (help, a typo)', async () => {
    for (const argv of [['--help'], ['pss']]) {
      const program = await buildProgram(argv);
      expect(program.commands.map((c) => [c.name(), c.summary(), c.description()])).toEqual(COMMANDS.map((c) => [c.name, c.summary, '']));
    }
  });
});

describe('commandWord', () => {
  const program = () => new Command().option('--socket <path>').option('--scope <name>').option('--json');
  it.each([
    [['ps'], 'ps'],
    [['--socket', 'ps', 'log', 'x'], 'log'],
    [['--socket=ps', 'log'], 'log'],
    [['--json', '--scope', 'a', 'exec', '--', 'ls'], 'exec'],
    [['help', 'poll'], 'poll'],
    [['help'], undefined],
    [['--json'], undefined],
    [['--', 'ps'], undefined],
  ] as [string[], string | undefined][])('%j runs %s', (argv, word) => {
    expect(commandWord(program(), argv)).toBe(word);
  });
});
