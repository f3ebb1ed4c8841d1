import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { deriveName } from '../../../src/session/name.js';
import { wellFormed } from '../support/text.js';

describe('deriveName', () => {
  it.each([
    ['npm run build', 'npm run'],
    ['make', 'make'],
    ['ls -la /tmp', 'ls /tmp'],
    ['git --no-pager log --oneline', 'git log'],
    ['python3 -u -m http.server 8000', 'python3 http.server'],
    ['  cargo   test  ', 'cargo test'],
  ])('%j → %j (verb plus first non-flag argument)', (command, name) => {
    expect(deriveName(command)).toBe(name);
  });

  it.each([
    ['FOO=1 npm test', 'npm test'],
    ['FOO=1 BAR="a b" make all', 'make all'],
    ['sudo apt-get update', 'apt-get update'],
    ['env FOO=1 node server.js', 'node server.js'],
    ['nohup ./serve.sh &', 'serve.sh'],
    ['time make -j8', 'make'],
    ['exec sleep 5', 'sleep 5'],
    ['sudo nice FOO=bar make check', 'make check'],
  ])('skips env assignments and wrappers: %j → %j', (command, name) => {
    expect(deriveName(command)).toBe(name);
  });

  it.each([
    ['./scripts/test.sh', 'test.sh'],
    ['/usr/bin/python3 app.py', 'python3 app.py'],
    ['FOO=1 ./scripts/test.sh --fast x', 'test.sh x'],
    ['../bin/run', 'run'],
  ])('reduces the program path to its basename: %j → %j', (command, name) => {
    expect(deriveName(command)).toBe(name);
  });

  it.each([
    ['ls | grep x', 'ls'],
    ['make && make install', 'make'],
    ['make&&make install', 'make'],
    ['false || echo failed', 'false'],
    ['sleep 1; echo done', 'sleep 1'],
    ['sleep 1;echo done', 'sleep 1'],
    ['echo hi > out.txt', 'echo hi'],
    ['cat < input.txt', 'cat'],
    ['(cd sub && make)', 'cd sub'],
    ['server &', 'server'],
  ])('ends the first command at an operator: %j → %j', (command, name) => {
    expect(deriveName(command)).toBe(name);
  });

  it('ends the first command at a newline', () => {
    expect(deriveName('make\nmake install')).toBe('make');
  });

  it('does not take a redirection for an argument', () => {
    expect(deriveName('make 2>&1 | tee build.log')).toBe('make');
    expect(deriveName('make 2>/dev/null')).toBe('make');
  });

  it('skips the flags of a wrapper', () => {
    expect(deriveName('sudo -E npm test')).toBe('npm test');
    expect(deriveName('env -i HOME=/tmp bash script.sh')).toBe('bash script.sh');
  });

  it.each([
    ['"my tool" --x arg', 'my tool arg'],
    ["echo 'hello world'", 'echo hello world'],
    ['grep "a|b" file', 'grep a|b'],
  ])('honours quotes: %j → %j', (command, name) => {
    expect(deriveName(command)).toBe(name);
  });

  it('falls back for commands with no verb', () => {
    expect(deriveName('')).toBe('sh');
    expect(deriveName('   ')).toBe('sh');
    expect(deriveName('FOO=1')).toBe('FOO=1');
    expect(deriveName('|||')).toBe('|||');
  });

  it('cuts long names to 60 characters, ending in an ellipsis', () => {
    const long = `run ${'x'.repeat(100)}`;
    const name = deriveName(long);
    expect(name).toHaveLength(60);
    expect(name).toBe(`run ${'x'.repeat(55)}…`);
    expect(deriveName(`run ${'y'.repeat(56)}`)).toBe(`run ${'y'.repeat(56)}`); // exactly 60: kept whole
  });

  it('caps the fallback for a verb-less command at 40 characters', () => {
    expect(deriveName(`A=${'1'.repeat(100)}`)).toBe(`A=${'1'.repeat(38)}`);
  });

  it('does not cut a long name inside a surrogate pair', () => {
    const name = deriveName(`echo ${'x'.repeat(53)}${'😀'.repeat(10)}`);
    expect(wellFormed(name)).toBe(true);
    expect(name.endsWith('…')).toBe(true);
  });

  it('never gives an empty label for an empty quoted word', () => {
    expect(deriveName('""')).not.toBe('');
    expect(deriveName("''")).not.toBe('');
    expect(deriveName("'' x").trim()).toBe(deriveName("'' x"));
  });

  it('property: any command gets a non-empty label of at most 60 characters', () => {
    const shellish = fc.string({
      unit: fc.constantFrom('a', 'b', ' ', '"', "'", '\\', '-', '=', '/', '|', '&', ';', '\n', '>', '<', '(', '2', '😀'),
      maxLength: 80,
    });
    fc.assert(
      fc.property(fc.oneof(fc.string({ maxLength: 200 }), shellish), (command) => {
        const name = deriveName(command);
        expect(name.trim().length).toBeGreaterThan(0);
        expect(name.length).toBeLessThanOrEqual(60);
      }),
      { numRuns: 500 },
    );
  });
});
