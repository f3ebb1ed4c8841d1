import { invalid } from '../base/errors.js';
import type { TerminalModes } from '../session/modes.js';

/** Keys that send one fixed sequence whatever the modes. */
const PLAIN: Record<string, string> = {
  enter: '\r',
  tab: '\t',
  btab: '\x1b[Z',
  escape: '\x1b',
  esc: '\x1b',
  space: ' ',
  bspace: '\x7f',
  backspace: '\x7f',
};

/** Cursor keys: final byte; `CSI x` normally, `SS3 x` in application cursor mode. */
const CURSOR: Record<string, string> = { up: 'A', down: 'B', right: 'C', left: 'D', home: 'H', end: 'F' };

/** Keys sent as `CSI n ~`. */
const TILDE: Record<string, number> = {
  insert: 2,
  ic: 2,
  delete: 3,
  dc: 3,
  pageup: 5,
  pgup: 5,
  ppage: 5,
  pagedown: 6,
  pgdn: 6,
  npage: 6,
  f5: 15,
  f6: 17,
  f7: 18,
  f8: 19,
  f9: 20,
  f10: 21,
  f11: 23,
  f12: 24,
};

/** F1-F4: `SS3 P..S`. */
const SS3_F: Record<string, string> = { f1: 'P', f2: 'Q', f3: 'R', f4: 'S' };

interface Modifiers {
  ctrl: boolean;
  meta: boolean;
  shift: boolean;
}

function splitModifiers(name: string): { mods: Modifiers; base: string } {
  const mods = { ctrl: false, meta: false, shift: false };
  let rest = name;
  for (;;) {
    const m = /^([CMS])-(.+)$/.exec(rest);
    if (!m) break;
    if (m[1] === 'C') mods.ctrl = true;
    else if (m[1] === 'M') mods.meta = true;
    else mods.shift = true;
    rest = m[2];
  }
  return { mods, base: rest };
}

/** The xterm modifier parameter: 1 + shift + 2·alt + 4·ctrl. */
const modParam = (m: Modifiers) => 1 + (m.shift ? 1 : 0) + (m.meta ? 2 : 0) + (m.ctrl ? 4 : 0);

function controlOf(ch: string): string {
  if (ch === ' ' || ch === '@' || ch === '2') return '\0';
  if (ch === '?') return '\x7f';
  const code = ch.toUpperCase().charCodeAt(0);
  if (code >= 0x40 && code <= 0x5f) return String.fromCharCode(code & 0x1f);
  throw invalid(`C-${ch} has no control character; use a letter or one of @[\\]^_ after C-`, { path: ['keys'], schema: true });
}

/** The bytes one tmux-style key name sends (`Enter`, `C-c`, `M-x`, `S-Up`, `F5`, `a`). */
export function keySequence(name: string, modes: Pick<TerminalModes, 'applicationCursor'>): string {
  const { mods, base } = splitModifiers(name);
  const key = base.toLowerCase();
  const any = mods.ctrl || mods.meta || mods.shift;
  if (CURSOR[key] !== undefined) {
    if (any) return `\x1b[1;${modParam(mods)}${CURSOR[key]}`;
    return `${modes.applicationCursor ? '\x1bO' : '\x1b['}${CURSOR[key]}`;
  }
  if (TILDE[key] !== undefined) return any ? `\x1b[${TILDE[key]};${modParam(mods)}~` : `\x1b[${TILDE[key]}~`;
  if (SS3_F[key] !== undefined) return any ? `\x1b[1;${modParam(mods)}${SS3_F[key]}` : `\x1bO${SS3_F[key]}`;
  let seq: string;
  if (PLAIN[key] !== undefined) {
    seq = key === 'space' && mods.ctrl ? '\0' : PLAIN[key];
    if (key === 'tab' && mods.shift) seq = '\x1b[Z';
  } else if ([...base].length === 1) {
    seq = mods.shift ? base.toUpperCase() : base;
    if (mods.ctrl) seq = controlOf(base);
  } else {
    throw invalid(
      `unknown key "${name}"; use names like Enter, Tab, Escape, Space, BSpace, Up, Down, Left, Right, Home, End, PageUp, PageDown, Insert, Delete, F1-F12, a single character, with C-, M-, S- modifiers (C-c, M-x), or pass literal:true to send text`,
      { path: ['keys'], schema: true },
    );
  }
  return mods.meta ? `\x1b${seq}` : seq;
}

/** Parse `hex` strings (`"1b"`, `"0x03"`, `"1b 5b 41"`) into bytes. */
export function hexBytes(hex: string[]): Buffer {
  const bytes: number[] = [];
  for (const item of hex) {
    for (const part of item.trim().split(/[\s,]+/).filter(Boolean)) {
      const h = part.replace(/^0x/i, '');
      if (!/^[0-9a-f]{1,2}$/i.test(h)) throw invalid(`hex "${part}" is not a byte; use two hex digits such as "1b" or "0x03"`, { path: ['hex'], schema: true });
      bytes.push(parseInt(h, 16));
    }
  }
  return Buffer.from(bytes);
}
