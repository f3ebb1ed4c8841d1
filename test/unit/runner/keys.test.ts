import { describe, expect, it } from 'vitest';
import { ProcctlError } from '../../../src/base/errors.js';
import { hexBytes, keySequence } from '../../../src/runner/keys.js';
import { updateModes } from '../../../src/session/modes.js';

const normal = { applicationCursor: false };
const app = { applicationCursor: true };
const key = (name: string, modes = normal) => keySequence(name, modes);

/** The error a call throws (fails the test if it does not throw). */
function thrown(fn: () => unknown): ProcctlError {
  try {
    fn();
  } catch (err) {
    expect(err).toBeInstanceOf(ProcctlError);
    return err as ProcctlError;
  }
  throw new Error('expected a throw');
}

describe('keySequence: named keys', () => {
  it.each([
    ['Enter', '\r'],
    ['Tab', '\t'],
    ['BTab', '\x1b[Z'],
    ['Escape', '\x1b'],
    ['Esc', '\x1b'],
    ['Space', ' '],
    ['BSpace', '\x7f'],
    ['Backspace', '\x7f'],
  ])('%s', (name, bytes) => {
    expect(key(name)).toBe(bytes);
  });

  it('is case-insensitive in the key name', () => {
    expect(key('enter')).toBe('\r');
    expect(key('ENTER')).toBe('\r');
    expect(key('pageup')).toBe(key('PageUp'));
  });

  it.each([
    ['Up', 'A'],
    ['Down', 'B'],
    ['Right', 'C'],
    ['Left', 'D'],
    ['Home', 'H'],
    ['End', 'F'],
  ])('%s is CSI in normal mode and SS3 in application cursor mode', (name, final) => {
    expect(key(name, normal)).toBe(`\x1b[${final}`);
    expect(key(name, app)).toBe(`\x1bO${final}`);
  });

  it.each([
    ['Insert', '\x1b[2~'],
    ['IC', '\x1b[2~'],
    ['Delete', '\x1b[3~'],
    ['DC', '\x1b[3~'],
    ['PageUp', '\x1b[5~'],
    ['PgUp', '\x1b[5~'],
    ['PPage', '\x1b[5~'],
    ['PageDown', '\x1b[6~'],
    ['PgDn', '\x1b[6~'],
    ['NPage', '\x1b[6~'],
  ])('%s', (name, bytes) => {
    expect(key(name)).toBe(bytes);
    // Application cursor mode changes only the cursor keys.
    expect(key(name, app)).toBe(bytes);
  });

  it('F1-F4 are SS3 P..S and F5-F12 are CSI n ~ (xterm numbering, with the gaps)', () => {
    expect(['F1', 'F2', 'F3', 'F4'].map((k) => key(k))).toEqual(['\x1bOP', '\x1bOQ', '\x1bOR', '\x1bOS']);
    expect(['F5', 'F6', 'F7', 'F8', 'F9', 'F10', 'F11', 'F12'].map((k) => key(k))).toEqual([
      '\x1b[15~',
      '\x1b[17~',
      '\x1b[18~',
      '\x1b[19~',
      '\x1b[20~',
      '\x1b[21~',
      '\x1b[23~',
      '\x1b[24~',
    ]);
  });
});

describe('keySequence: modifiers', () => {
  it('C-<letter> is the control character, whatever the case', () => {
    expect(key('C-c')).toBe('\x03');
    expect(key('C-C')).toBe('\x03');
    expect(key('C-a')).toBe('\x01');
    expect(key('C-d')).toBe('\x04');
    expect(key('C-z')).toBe('\x1a');
  });

  it('C- with the punctuation that has a control character', () => {
    expect(key('C-@')).toBe('\0');
    expect(key('C-Space')).toBe('\0');
    expect(key('C-[')).toBe('\x1b');
    expect(key('C-\\')).toBe('\x1c');
    expect(key('C-]')).toBe('\x1d');
    expect(key('C-^')).toBe('\x1e');
    expect(key('C-_')).toBe('\x1f');
    expect(key('C-?')).toBe('\x7f');
  });

  it('C- with a character that has no control character is invalid', () => {
    const err = thrown(() => key('C-1'));
    expect(err.kind).toBe('invalid');
    expect(err.message).toContain('C-1');
  });

  it('M- prefixes ESC', () => {
    expect(key('M-x')).toBe('\x1bx');
    expect(key('M-Enter')).toBe('\x1b\r');
    expect(key('M-C-c')).toBe('\x1b\x03');
    expect(key('C-M-c')).toBe('\x1b\x03');
  });

  it('S- upper-cases a character and makes Tab a back-tab', () => {
    expect(key('S-a')).toBe('A');
    expect(key('S-Tab')).toBe('\x1b[Z');
  });

  it('modified cursor, tilde and F1-F4 keys carry the xterm modifier parameter (1 + shift + 2 alt + 4 ctrl)', () => {
    expect(key('S-Up')).toBe('\x1b[1;2A');
    expect(key('M-Left')).toBe('\x1b[1;3D');
    expect(key('C-Right')).toBe('\x1b[1;5C');
    expect(key('C-S-Down')).toBe('\x1b[1;6B');
    // A modified cursor key does not depend on application cursor mode.
    expect(key('C-Up', app)).toBe('\x1b[1;5A');
    expect(key('C-Delete')).toBe('\x1b[3;5~');
    expect(key('S-F5')).toBe('\x1b[15;2~');
    expect(key('C-F1')).toBe('\x1b[1;5P');
  });
});

describe('keySequence: characters and unknown names', () => {
  it('a single character is sent as itself, including multi-byte ones', () => {
    expect(key('a')).toBe('a');
    expect(key('Z')).toBe('Z');
    expect(key('-')).toBe('-');
    expect(key('é')).toBe('é');
    expect(key('😀')).toBe('😀');
  });

  it('an unknown name is invalid, names the key and the keys field, and suggests literal', () => {
    const err = thrown(() => key('Bogus'));
    expect(err.kind).toBe('invalid');
    expect(err.message).toContain('"Bogus"');
    expect(err.message).toContain('literal');
    expect(err.details).toMatchObject({ path: ['keys'] });
  });

  it('a word is not a key: it needs literal', () => {
    expect(() => key('hello')).toThrow(/unknown key "hello"/);
    expect(() => key('C-hello')).toThrow(/unknown key "C-hello"/);
  });
});

describe('hexBytes', () => {
  it('accepts two-digit bytes with or without 0x, in one or several strings', () => {
    expect([...hexBytes(['1b', '0x5b', '41'])]).toEqual([0x1b, 0x5b, 0x41]);
    expect([...hexBytes(['1b 5b 41'])]).toEqual([0x1b, 0x5b, 0x41]);
    expect([...hexBytes(['1b,5b, 0X41'])]).toEqual([0x1b, 0x5b, 0x41]);
    expect([...hexBytes(['3'])]).toEqual([3]);
    expect([...hexBytes(['FF', 'ff'])]).toEqual([255, 255]);
  });

  it('an empty list or blank strings give no bytes', () => {
    expect(hexBytes([]).length).toBe(0);
    expect(hexBytes(['', '  ']).length).toBe(0);
  });

  it.each(['1b5b', 'zz', '0x', '100', 'g1'])('%s is not a byte', (bad) => {
    const err = thrown(() => hexBytes([bad]));
    expect(err.kind).toBe('invalid');
    expect(err.details).toMatchObject({ path: ['hex'] });
  });
});

describe('updateModes', () => {
  const fresh = () => ({ applicationCursor: false, bracketedPaste: false });

  it('DECCKM (?1) and bracketed paste (?2004) are switched on by h and off by l', () => {
    const m = fresh();
    updateModes(m, 'x\x1b[?1hy');
    expect(m).toEqual({ applicationCursor: true, bracketedPaste: false });
    updateModes(m, '\x1b[?2004h');
    expect(m).toEqual({ applicationCursor: true, bracketedPaste: true });
    updateModes(m, '\x1b[?1l');
    expect(m).toEqual({ applicationCursor: false, bracketedPaste: true });
    updateModes(m, '\x1b[?2004l');
    expect(m).toEqual(fresh());
  });

  it('reads every parameter of a combined sequence and the last sequence wins', () => {
    const m = fresh();
    updateModes(m, '\x1b[?1;2004h');
    expect(m).toEqual({ applicationCursor: true, bracketedPaste: true });
    updateModes(m, '\x1b[?1h\x1b[?1l');
    expect(m.applicationCursor).toBe(false);
  });

  it('ignores other private modes and plain text', () => {
    const m = fresh();
    updateModes(m, '\x1b[?25l\x1b[?1049h\x1b[?12h plain text [?1h');
    expect(m).toEqual(fresh());
    // ?1 must be the whole parameter, not the start of ?12 or ?1049.
    updateModes(m, '\x1b[?10h');
    expect(m.applicationCursor).toBe(false);
  });
});
