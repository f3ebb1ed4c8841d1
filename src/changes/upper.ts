import { closeSync, lstatSync, openSync, readdirSync, readlinkSync, readSync, type BigIntStats, type Stats } from 'node:fs';
import { constants } from 'node:fs';
import { foreignMark, isOpaque, isWhiteout, permissions, typeOf, type XattrFormat } from './overlay.js';
import { invalid } from '../base/errors.js';
import { Listing } from './listing.js';
import { fromBytes } from './paths.js';
import type { Change, ChangeSet, Totals, UpperFacts } from './types.js';

export interface ReadOptions {
  /** The attribute namespace of the mount's marks: "trusted" (real root) or "user" (userxattr). */
  xattrs?: XattrFormat;
}

/**
 * What a session changed: read from its upper directory, comparing each entry with the one at
 * the same path of the workspace (an lstat, and a read of both only when sizes match), never by
 * walking the workspace. The one workspace listing read is that of a directory the session made
 * opaque, to name the lower entries it hid. Deleted directories are one entry each.
 */
export function read(upper: string, workspace: string, options: ReadOptions = {}): ChangeSet {
  const format = options.xattrs ?? 'trusted';
  const files: Change[] = [];
  const facts = new Map<string, UpperFacts>();
  // Hard-linked upper files by inode: how many of their links the upper directory holds.
  const linked = new Map<bigint, string[]>();

  const visit = (dir: Buffer, lowerDir: Buffer | undefined, lowerBytes: number, rel: string, opaque: boolean, opaqueBtime: bigint) => {
    const names = (readdirSync(dir, { encoding: 'buffer' }) as Buffer[]).sort(Buffer.compare);
    if (opaque && lowerDir) hidden(lowerDir, rel, names, opaqueBtime);
    const listed = lowerDir ? Listing.of(lowerDir, names.length, lowerBytes) : undefined;
    for (const name of names) {
      const up = join(dir, name);
      const low = lowerDir && (!listed || listed.has(name)) ? join(lowerDir, name) : undefined;
      const path = rel === '' ? fromBytes(name) : `${rel}/${fromBytes(name)}`;
      const st = lstatSync(up, { bigint: true });
      const old = low ? lstatSync(low, { throwIfNoEntry: false }) : undefined;
      const fact: UpperFacts = { btimeNs: st.birthtimeNs, nlink: Number(st.nlink), linksInUpper: 1 };
      if (isWhiteout(st)) {
        if (old) add({ path, kind: 'deleted', ...before(old) }, fact);
        continue;
      }
      const type = typeOf(st);
      const mark = foreignMark(up, st, format);
      if (mark) fact.overlayMark = mark;
      if (type === 'dir') {
        const madeOpaque = opaque || isOpaque(up, format);
        const mode = permissions(st);
        if (!old) add({ path, kind: 'added', type, mode }, fact);
        else if (!old.isDirectory()) add({ path, kind: 'type', type, mode, ...before(old) }, fact);
        else if (mark || mode !== permissions(old)) add({ path, kind: mark ? 'modified' : 'mode', type, mode, ...before(old) }, fact);
        if (!mark) visit(up, old?.isDirectory() ? low : undefined, old?.size ?? 0, path, madeOpaque, st.birthtimeNs);
        continue;
      }
      const change = compare(up, st, old && low ? { st: old, path: low } : undefined, path);
      if (!change) continue;
      if (type === 'file' && st.nlink > 1n) linked.set(st.ino, [...(linked.get(st.ino) ?? []), path]);
      add(change, fact);
    }
  };

  // The lower entries an opaque directory hides and the upper does not replace: deletions.
  const hidden = (lowerDir: Buffer, rel: string, names: Buffer[], btimeNs: bigint) => {
    let lower: Buffer[];
    try {
      lower = readdirSync(lowerDir, { encoding: 'buffer' }) as Buffer[];
    } catch {
      return;
    }
    const kept = new Set(names.map((n) => n.toString('latin1')));
    for (const name of lower.sort(Buffer.compare)) {
      if (kept.has(name.toString('latin1'))) continue;
      const old = lstatSync(join(lowerDir, name), { throwIfNoEntry: false });
      if (!old) continue;
      const path = rel === '' ? fromBytes(name) : `${rel}/${fromBytes(name)}`;
      add({ path, kind: 'deleted', ...before(old) }, { btimeNs, nlink: 1, linksInUpper: 1, fromOpaque: true });
    }
  };

  const add = (change: Change, fact: UpperFacts) => {
    files.push(change);
    facts.set(change.path, fact);
  };

  const root = lstatSync(upper, { bigint: true });
  if (!root.isDirectory()) throw invalid(`${upper} is not a directory`);
  const lowerRoot = lstatSync(workspace, { throwIfNoEntry: false });
  visit(Buffer.from(upper), lowerRoot?.isDirectory() ? Buffer.from(workspace) : undefined, lowerRoot?.size ?? 0, '', isOpaque(upper, format), root.birthtimeNs);
  for (const paths of linked.values()) for (const p of paths) facts.get(p)!.linksInUpper = paths.length;
  return { files, totals: totals(files), facts };
}

/** The change an upper non-directory makes over the workspace's entry, or null when none. */
function compare(up: Buffer, st: BigIntStats, lower: { st: Stats; path: Buffer } | undefined, path: string): Change | null {
  const type = typeOf(st);
  const mode = permissions(st);
  const now: Change = { path, kind: 'added', type, mode };
  if (type === 'file') now.size = Number(st.size);
  if (type === 'symlink') now.target = fromBytes(readlinkSync(up, { encoding: 'buffer' }));
  if (!lower) return type === 'symlink' ? { ...now, kind: 'symlink' } : now;
  const old = lower.st;
  const was = before(old);
  if (typeOf(old) !== type) return { ...now, kind: 'type', ...was };
  if (type === 'symlink') {
    const target = readlinkSync(lower.path, { encoding: 'buffer' });
    return fromBytes(target) === now.target ? null : { ...now, kind: 'symlink', ...was };
  }
  if (type !== 'file') return { ...now, kind: 'modified', ...was };
  const modeChanged = mode !== permissions(old);
  if (Number(st.size) !== old.size || !sameContent(up, lower.path)) return { ...now, kind: 'modified', ...was };
  return modeChanged ? { ...now, kind: 'mode', ...was } : null;
}

/** What the workspace holds at a changed path, as the answer's old* fields. */
function before(old: Stats): Pick<Change, 'oldType' | 'oldSize' | 'oldMode'> {
  const out: Pick<Change, 'oldType' | 'oldSize' | 'oldMode'> = { oldType: typeOf(old), oldMode: permissions(old) };
  if (old.isFile()) out.oldSize = old.size;
  return out;
}

/** Whether two files of the same size hold the same bytes, read in chunks. */
function sameContent(a: Buffer, b: Buffer): boolean {
  const fa = openSync(a, constants.O_RDONLY | constants.O_NOFOLLOW);
  let fb: number | undefined;
  try {
    fb = openSync(b, constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK);
    const ba = Buffer.allocUnsafe(1 << 16);
    const bb = Buffer.allocUnsafe(1 << 16);
    for (;;) {
      const na = readSync(fa, ba, 0, ba.length, null);
      const nb = readSync(fb, bb, 0, bb.length, null);
      if (na !== nb || ba.compare(bb, 0, nb, 0, na) !== 0) return false;
      if (na === 0) return true;
    }
  } finally {
    closeSync(fa);
    if (fb !== undefined) closeSync(fb);
  }
}

export function totals(files: readonly Change[]): Totals {
  const t: Totals = { files: files.length, added: 0, modified: 0, deleted: 0, bytes: 0 };
  for (const c of files) {
    if (c.kind === 'deleted') t.deleted++;
    else if (c.oldType === undefined) t.added++;
    else t.modified++;
    if (c.type === 'file' && c.kind !== 'mode') t.bytes += c.size ?? 0;
  }
  return t;
}

const SLASH = Buffer.from('/');
const join = (dir: Buffer, name: Buffer) => Buffer.concat([dir, SLASH, name]);
