import { describe, expect, it } from 'vitest';
import { CONFIRM_PHRASES, classifyPrompt, compilePatterns, lastLine, looksLikePrompt, plainText, promptShown } from '../../../src/interrupt/prompt.js';

describe('plainText', () => {
  it('strips CSI and OSC sequences and two-byte escapes', () => {
    expect(plainText('\x1b[1;32mgreen\x1b[0m')).toBe('green');
    expect(plainText('\x1b[?2004hready')).toBe('ready');
    expect(plainText('\x1b]0;title\x07after')).toBe('after');
    expect(plainText('\x1b]0;title\x1b\\after')).toBe('after');
    expect(plainText('a\x1bMb')).toBe('ab');
  });

  it('strips the escapes full-screen programs and tput print around text (keypad mode, charset, cursor save)', () => {
    // `less` starts with ESC = (keypad mode); `tput sgr0` on xterm emits ESC ( B; ESC 7 / ESC 8 save and restore the cursor.
    expect(plainText('a\x1b=b\x1b>c')).toBe('abc');
    expect(plainText('\x1b(B\x1b[mContinue? [y/N] ')).toBe('Continue? [y/N] ');
    expect(plainText('\x1b7saved\x1b8')).toBe('saved');
  });

  it('turns CRLF and lone CR into newlines', () => {
    expect(plainText('one\r\ntwo\rthree')).toBe('one\ntwo\nthree');
  });
});

describe('promptShown', () => {
  it('is false for no output, or output that ends a line (no prompt before the read), and true for text left on the line', () => {
    expect(promptShown('')).toBe(false);
    expect(promptShown('working\n')).toBe(false);
    expect(promptShown('working\r\n  \x1b[0m')).toBe(false);
    expect(promptShown('Name: ')).toBe(true);
    expect(promptShown('done\n\x1b[1mContinue? [y/N] \x1b[0m')).toBe(true);
  });
});

describe('lastLine', () => {
  it('is the last line that is not blank, trimmed at the end only', () => {
    expect(lastLine('first\n  Password: \n\n  \n')).toBe('  Password:');
    expect(lastLine('a\r\nContinue? [y/N] ')).toBe('Continue? [y/N]');
    expect(lastLine('')).toBe('');
    expect(lastLine('\n\n')).toBe('');
  });

  it('ignores colour around the prompt', () => {
    expect(lastLine('\x1b[1m? Overwrite file.txt?\x1b[0m ')).toBe('? Overwrite file.txt?');
  });
});

describe('looksLikePrompt', () => {
  it.each([
    'Continue? [y/N]',
    'Install it? [Y/n]',
    'Delete all (y/n)',
    'Really (yes/no)',
    'Apply [yes/no]',
    'Are you sure you want to delete it',
    'Proceed?',
    'Do you want to continue',
    'Do you want to proceed with the upgrade',
    'Please confirm the removal',
    'Continue?',
    'Overwrite config.json? ',
    'Password:',
    '[sudo] password for ada:',
    'Enter passphrase for key /home/ada/.ssh/id_ed25519:',
    'API key?',
    'Enter PIN:',
  ])('recognises %j', (line) => {
    expect(looksLikePrompt(line, [])).toBe('recognised');
  });

  it.each(['name:', 'ready>', '#?', 'Pick one:', 'mysql>', '$', 'value (default 3)', 'choice [1-3]'])('%j is a generic prompt', (line) => {
    expect(looksLikePrompt(line, [])).toBe('generic');
  });

  it.each(['', 'compiling 3 of 12 files', 'done.', 'Downloading 45%', 'the password was changed'])('%j is not a prompt', (line) => {
    expect(looksLikePrompt(line, [])).toBeUndefined();
  });

  it('extra patterns make a line recognised', () => {
    const extra = compilePatterns(['say the magic word']);
    expect(looksLikePrompt('please say the magic word', [])).toBeUndefined();
    expect(looksLikePrompt('please say the magic word', extra)).toBe('recognised');
    expect(looksLikePrompt('Please SAY THE MAGIC WORD', extra)).toBe('recognised');
  });
});

describe('the confirmation phrases', () => {
  const lines: [string, string][] = [
    ['please confirm', 'Deleting 3 branches. Please confirm'],
    ['do you confirm', 'Drop table users — do you confirm'],
    ['are you sure', 'ARE YOU SURE you want to reset the cluster'],
    ['shall i proceed', 'The migration is ready. Shall I proceed'],
    ['would you like me to proceed', 'Would you like me to proceed with the upgrade'],
    ['do you want to proceed', 'Do you want to proceed'],
    ['do you want me to', 'Do you want me to push these commits'],
    ['should i go ahead', 'Should I go ahead and delete them'],
    ['confirm before', 'Confirm before I overwrite the file'],
    ['confirmation required', 'Confirmation required to continue'],
    ['waiting for your confirmation', 'Waiting for your confirmation...'],
    ['need your approval', 'I need your approval to deploy'],
  ];
  it('covers the twelve phrases of SPEC §7', () => {
    expect(CONFIRM_PHRASES).toEqual(lines.map(([p]) => p));
  });
  it.each(lines)('"%s" makes a confirm, recognised at once: %s', (_phrase, line) => {
    expect(looksLikePrompt(line, [])).toBe('recognised');
    expect(classifyPrompt(`some output\n${line}`)).toMatchObject({ kind: 'confirm', reason: line, recognised: true });
  });
  it.each([
    ['a word that only contains a phrase', 'unsurely, shall idle proceedings'],
    ['a phrase broken across words', 'do you want mentoring'],
    ['no phrase at all', 'building 3 targets'],
  ])('%s is not a confirm: %s', (_why, line) => {
    expect(classifyPrompt(line).kind).not.toBe('confirm');
  });
});

describe('classifyPrompt', () => {
  it('a yes/no question is a confirm', () => {
    expect(classifyPrompt('Reading package lists...\nDo you want to continue? [Y/n] ')).toEqual({
      kind: 'confirm',
      reason: 'Do you want to continue? [Y/n]',
      recognised: true,
    });
  });

  it('a password prompt is a secret, even when it also asks to confirm', () => {
    expect(classifyPrompt('Password: ')).toMatchObject({ kind: 'secret', reason: 'Password:', recognised: true });
    expect(classifyPrompt('Please confirm the password: ')).toMatchObject({ kind: 'secret' });
    expect(classifyPrompt('Enter passphrase (empty for no passphrase): ')).toMatchObject({ kind: 'secret' });
  });

  it('"password" in a message that does not ask for one is not a secret', () => {
    expect(classifyPrompt('your password was changed\n')).toMatchObject({ kind: 'text', recognised: false });
  });

  it('numbered options above the prompt make a select, with values and labels', () => {
    const info = classifyPrompt('Deploy where?\n1) staging\n2) production\n3) local dev\n#? ');
    expect(info).toEqual({
      kind: 'select',
      reason: '#?',
      recognised: true,
      options: [
        { value: '1', label: 'staging' },
        { value: '2', label: 'production' },
        { value: '3', label: 'local dev' },
      ],
    });
  });

  it('reads menus in the other common forms, and through terminal line endings', () => {
    expect(classifyPrompt('1. alpha\n2. beta\nChoice: ').options).toEqual([
      { value: '1', label: 'alpha' },
      { value: '2', label: 'beta' },
    ]);
    expect(classifyPrompt('(1) red\r\n(2) blue\r\n\r\nPick: ').options).toEqual([
      { value: '1', label: 'red' },
      { value: '2', label: 'blue' },
    ]);
  });

  it('one numbered line is not a menu', () => {
    expect(classifyPrompt('1) only\nPick: ')).toMatchObject({ kind: 'text', reason: 'Pick:' });
  });

  it('a menu must sit right above the prompt', () => {
    expect(classifyPrompt('1) a\n2) b\nsomething else\nPick: ')).toMatchObject({ kind: 'text' });
  });

  it('anything else is text, with the last line as the reason', () => {
    expect(classifyPrompt('Welcome\nname: ')).toEqual({ kind: 'text', reason: 'name:', recognised: false });
    expect(classifyPrompt('ready> ')).toMatchObject({ kind: 'text', reason: 'ready>' });
  });

  it('no output at all is text with an empty reason', () => {
    expect(classifyPrompt('')).toEqual({ kind: 'text', reason: '', recognised: false });
    expect(classifyPrompt('\n\n')).toEqual({ kind: 'text', reason: '', recognised: false });
  });

  it('strips colour and trailing blank lines before classifying', () => {
    expect(classifyPrompt('\x1b[33mProceed?\x1b[0m \r\n\r\n')).toMatchObject({ kind: 'confirm', reason: 'Proceed?' });
  });

  it('an extra pattern makes a text prompt recognised without changing its kind', () => {
    const extra = compilePatterns(['^magic>']);
    expect(classifyPrompt('magic> ', extra)).toEqual({ kind: 'text', reason: 'magic>', recognised: true });
  });
});

describe('compilePatterns', () => {
  it('compiles case-insensitive expressions and skips invalid ones', () => {
    const out = compilePatterns(['^deploy now', '([', 'ok\\?$']);
    expect(out).toHaveLength(2);
    expect(out[0].test('DEPLOY NOW please')).toBe(true);
    expect(out[1].test('is it ok?')).toBe(true);
  });
});
