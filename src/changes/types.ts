import { z } from 'zod';

/** What a changed path is in the upper directory or the workspace. */
export const FileTypeSchema = z.enum(['file', 'dir', 'symlink', 'fifo', 'socket', 'char', 'block']);
export type FileType = z.infer<typeof FileTypeSchema>;

export const ChangeKindSchema = z.enum(['added', 'modified', 'deleted', 'type', 'mode', 'symlink']);
export type ChangeKind = z.infer<typeof ChangeKindSchema>;

/**
 * One changed path as the answer shows it (SPEC §16). `path` is a RelPath (paths.ts: bytes that
 * are not UTF-8 travel as lone surrogates); `type`/`oldType` are what the session left and what
 * the workspace holds (absent when there is none); sizes and modes likewise.
 */
export const ChangeSchema = z.strictObject({
  path: z.string(),
  kind: ChangeKindSchema,
  type: FileTypeSchema.optional(),
  oldType: FileTypeSchema.optional(),
  size: z.number().int().nonnegative().optional(),
  oldSize: z.number().int().nonnegative().optional(),
  mode: z.number().int().nonnegative().optional(),
  oldMode: z.number().int().nonnegative().optional(),
  target: z.string().optional(),
});
export type Change = z.infer<typeof ChangeSchema>;

export const TotalsSchema = z.strictObject({
  files: z.number().int(),
  added: z.number().int(),
  modified: z.number().int(),
  deleted: z.number().int(),
  bytes: z.number().int(),
});
export type Totals = z.infer<typeof TotalsSchema>;

/** What the planner needs of an upper entry besides the answer's fields; never shown. */
export interface UpperFacts {
  /** When the session first wrote the path (statx btime), 0n when the filesystem does not say. */
  btimeNs: bigint;
  /** Links of the upper file, and how many of them the upper directory itself holds. */
  nlink: number;
  linksInUpper: number;
  /** A deletion that comes from an opaque directory rather than a whiteout of its own. */
  fromOpaque?: boolean;
  /** An overlay mark this reader does not carry (redirect or metacopy: off by default). */
  overlayMark?: string;
}

/** What read() returns: the answer's list and totals, and the facts kept for plan(). */
export interface ChangeSet {
  files: Change[];
  totals: Totals;
  facts: Map<string, UpperFacts>;
}

export const ActionSchema = z.enum(['write', 'mkdir', 'symlink', 'delete', 'chmod', 'refuse', 'conflict']);
export type Action = z.infer<typeof ActionSchema>;

/** One row of an apply's plan: the table the tests, the answer and apply() all read. */
export interface PlanEntry {
  path: string;
  kind: ChangeKind;
  action: Action;
  /** Why it is refused or a conflict; or a note on what is carried differently. */
  why?: string;
  /** The mode apply gives what it writes (permission bits, setuid/setgid never). */
  mode?: number;
}

/** What a path held, exactly enough to tell later whether it still does. */
export const FingerprintSchema = z.strictObject({
  type: FileTypeSchema,
  dev: z.number(),
  ino: z.string(),
  size: z.number(),
  mtimeNs: z.string(),
  mode: z.number(),
});
export type Fingerprint = z.infer<typeof FingerprintSchema>;

/**
 * One step apply took: what it wrote (null: it deleted the path) and what was there before —
 * "absent", a copy kept under the originals directory by name, or only a mode (a chmod).
 */
export const ManifestEntrySchema = z.strictObject({
  path: z.string(),
  action: ActionSchema,
  wrote: FingerprintSchema.nullable(),
  original: z.union([
    z.literal('absent'),
    z.strictObject({ kept: z.string().regex(/^\d+$/), type: FileTypeSchema }),
    z.strictObject({ mode: z.number() }),
  ]),
});
export type ManifestEntry = z.infer<typeof ManifestEntrySchema>;

export const ManifestSchema = z.array(ManifestEntrySchema);
export type Manifest = z.infer<typeof ManifestSchema>;

export interface PathWhy {
  path: string;
  why: string;
}
