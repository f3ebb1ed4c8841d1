import type { Change, Totals } from '../changes/types.js';
import { shown } from '../changes/paths.js';

/** What a review session changed, as `changes --stat` and a changes approval show it (SPEC §16). */

const KIND_MARK: Record<Change['kind'], string> = { added: 'A', modified: 'M', deleted: 'D', type: 'T', mode: 'P', symlink: 'L' };

/** One changed path: its kind as a letter, its name, and what changed of it. */
export function statLine(c: Change): string {
  const size = c.kind === 'deleted' ? (c.oldSize !== undefined ? ` (${c.oldSize} bytes)` : '') : c.size !== undefined ? ` (${c.oldSize !== undefined ? `${c.oldSize} -> ` : ''}${c.size} bytes)` : '';
  const link = c.target !== undefined ? ` -> ${shown(c.target)}` : '';
  const mode = c.kind === 'mode' && c.mode !== undefined ? ` (mode ${c.oldMode?.toString(8) ?? '?'} -> ${c.mode.toString(8)})` : '';
  return `${KIND_MARK[c.kind]} ${shown(c.path)}${link}${size}${mode}`;
}

/** The totals in words: `3 paths in /ws: 1 added, 2 modified, 0 deleted, 12 bytes`. */
export function totalsLine(t: Totals, workspace: string): string {
  return `${t.files} path${t.files === 1 ? '' : 's'} in ${workspace}: ${t.added} added, ${t.modified} modified, ${t.deleted} deleted, ${t.bytes} bytes`;
}
