/** Terminal modes an application sets in its output; they decide what some keys send. */
export interface TerminalModes {
  /** DECCKM: application cursor keys. */
  applicationCursor: boolean;
  /** Mode 2004: the application wants pastes bracketed. */
  bracketedPaste: boolean;
}

/** Track terminal modes an application sets in its output (pty sessions only). */
export function updateModes(modes: TerminalModes, text: string): void {
  if (text.indexOf('\x1b[?') === -1) return;
  const re = /\x1b\[\?([\d;]+)([hl])/g;
  for (let m = re.exec(text); m; m = re.exec(text)) {
    const on = m[2] === 'h';
    for (const p of m[1].split(';')) {
      if (p === '1') modes.applicationCursor = on;
      else if (p === '2004') modes.bracketedPaste = on;
    }
  }
}
