import { isUtf8 } from 'node:buffer';

/**
 * A changed path is the exact bytes of a name relative to the workspace. It travels as a string:
 * valid UTF-8 as itself, and each byte that is not part of valid UTF-8 as the lone surrogate
 * U+DC80..U+DCFF (Python's "surrogateescape", PEP 383). Valid UTF-8 never decodes to a lone
 * surrogate, so the string maps back to the same bytes; JSON.stringify shows such a byte as
 * "\udcff" and a newline as "\n", and JSON.parse gives the same string back.
 */
export type RelPath = string;

/** The string form of a name's bytes (see RelPath). */
export function fromBytes(bytes: Buffer): RelPath {
  if (isUtf8(bytes)) return bytes.toString('utf8');
  let out = '';
  let i = 0;
  while (i < bytes.length) {
    const n = sequenceLength(bytes, i);
    if (n > 0) {
      out += bytes.toString('utf8', i, i + n);
      i += n;
    } else {
      out += String.fromCharCode(0xdc00 + bytes[i]);
      i += 1;
    }
  }
  return out;
}

/** The bytes a RelPath stands for. */
export function toBytes(path: RelPath): Buffer {
  if (wellFormed(path)) return Buffer.from(path, 'utf8');
  const parts: Buffer[] = [];
  let run = '';
  for (let i = 0; i < path.length; i++) {
    const c = path.charCodeAt(i);
    const pairStart = c >= 0xd800 && c <= 0xdbff && i + 1 < path.length && isLow(path.charCodeAt(i + 1));
    if (pairStart) {
      run += path[i] + path[++i];
    } else if (c >= 0xdc80 && c <= 0xdcff) {
      parts.push(Buffer.from(run, 'utf8'), Buffer.of(c - 0xdc00));
      run = '';
    } else run += path[i];
  }
  parts.push(Buffer.from(run, 'utf8'));
  return Buffer.concat(parts);
}

/** `root/rel` as something fs calls take: a string when the name is valid UTF-8, else its bytes. */
export function under(root: string, rel: RelPath): string | Buffer {
  if (rel === '') return root;
  if (wellFormed(rel)) return `${root}/${rel}`;
  return Buffer.concat([Buffer.from(`${root}/`, 'utf8'), toBytes(rel)]);
}

/** A name as the addon's calls take it: itself when valid UTF-8, else its bytes. */
export const asName = (name: RelPath): string | Buffer => (wellFormed(name) ? name : toBytes(name));

/** The directory part of a RelPath ('' for a top-level name). */
export const parentOf = (rel: RelPath) => {
  const cut = rel.lastIndexOf('/');
  return cut < 0 ? '' : rel.slice(0, cut);
};

/** A RelPath's last component. */
export const baseOf = (rel: RelPath) => rel.slice(rel.lastIndexOf('/') + 1);

/** Why a path given to the planner is not a plain relative name, or undefined when it is. */
export function unsafeName(rel: RelPath): string | undefined {
  if (rel === '') return 'an empty name';
  if (rel.startsWith('/')) return 'an absolute name';
  if (rel.includes('\0')) return 'a name with a NUL byte';
  const segments = rel.split('/');
  if (segments.includes('..')) return 'a name with a ".." segment';
  if (segments.some((s) => s === '' || s === '.')) return 'a name with an empty or "." segment';
  return undefined;
}

/** A path for text meant for a person: quoted C-style (as git does) when it holds a control
 *  character, a quote, a backslash or bytes that are not UTF-8 (shown as \xHH); else as itself. */
export function shown(rel: RelPath): string {
  if (!/[\u0000-\u001f\u007f"\\]/.test(rel) && wellFormed(rel)) return rel;
  let out = '';
  for (const ch of rel) {
    const c = ch.codePointAt(0)!;
    if (ch === '\n') out += '\\n';
    else if (ch === '\t') out += '\\t';
    else if (ch === '"' || ch === '\\') out += `\\${ch}`;
    else if (c < 0x20 || c === 0x7f) out += `\\x${c.toString(16).padStart(2, '0')}`;
    else if (c >= 0xdc80 && c <= 0xdcff) out += `\\x${(c - 0xdc00).toString(16)}`;
    else out += ch;
  }
  return `"${out}"`;
}

const isLow = (c: number) => c >= 0xdc00 && c <= 0xdfff;

// String.prototype.isWellFormed is in Node 20 but not in the ES2022 lib the project compiles against.
const wellFormed = (s: string) => (s as unknown as { isWellFormed(): boolean }).isWellFormed();

/** How many bytes the valid UTF-8 sequence at i takes, or 0 when the byte there starts none. */
function sequenceLength(b: Buffer, i: number): number {
  const c = b[i];
  if (c < 0x80) return 1;
  const cont = (k: number) => i + k < b.length && (b[i + k] & 0xc0) === 0x80;
  if (c >= 0xc2 && c <= 0xdf) return cont(1) ? 2 : 0;
  if (c >= 0xe0 && c <= 0xef) {
    if (!cont(1) || !cont(2)) return 0;
    const c1 = b[i + 1];
    if (c === 0xe0 && c1 < 0xa0) return 0; // overlong
    if (c === 0xed && c1 >= 0xa0) return 0; // a surrogate, never valid UTF-8
    return 3;
  }
  if (c >= 0xf0 && c <= 0xf4) {
    if (!cont(1) || !cont(2) || !cont(3)) return 0;
    const c1 = b[i + 1];
    if (c === 0xf0 && c1 < 0x90) return 0; // overlong
    if (c === 0xf4 && c1 >= 0x90) return 0; // past U+10FFFF
    return 4;
  }
  return 0;
}
