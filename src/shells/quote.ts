/**
 * A command's text as one line of bash, `$'…'` quoted: whatever it holds (newlines, quotes,
 * an unclosed here-document), the shell reads exactly one line and hands the text to `eval`,
 * so a command can never swallow or fake the wrapper's own words around it.
 */
export function ansiQuote(text: string): string {
  let out = "$'";
  for (const ch of text) {
    const c = ch.codePointAt(0)!;
    if (ch === '\\') out += '\\\\';
    else if (ch === "'") out += "\\'";
    else if (ch === '\n') out += '\\n';
    else if (ch === '\r') out += '\\r';
    else if (ch === '\t') out += '\\t';
    else if (c < 0x20 || c === 0x7f) out += `\\x${c.toString(16).padStart(2, '0')}`;
    else out += ch;
  }
  return `${out}'`;
}
