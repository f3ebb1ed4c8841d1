import { readdirSync } from 'node:fs';

/**
 * The names a directory holds, read in one listing, for a caller about to ask whether many of
 * its names are there: a listing costs a fraction of a microsecond a name, an lstat of a name
 * that is not there several, so a session's new directory of 100 files under a workspace
 * directory of 10 is one listing and 10 lstats, not 100. A listing is only read when the
 * directory is small against what is asked (its size on disk, at most ~16 bytes a name on the
 * file systems here, says how many names it can hold): a large directory asked about a few
 * names is still looked up name by name. Either way an entry found is then lstat'ed as before;
 * only the names the listing lacks are taken as absent.
 */
export class Listing {
  private readonly names = new Set<string>();

  private constructor() {}

  /** A listing of `dir` when asking about `asking` names of it is worth one; else undefined. */
  static of(dir: string | Buffer, asking: number, dirBytes: number): Listing | undefined {
    if (asking < MIN_ASKED || dirBytes / BYTES_PER_NAME > asking * NAMES_PER_ASK) return undefined;
    let names: Buffer[];
    try {
      names = readdirSync(dir, { encoding: 'buffer' }) as Buffer[];
    } catch {
      return undefined;
    }
    const l = new Listing();
    for (const n of names) l.names.add(n.toString('latin1'));
    return l;
  }

  /** Whether the directory held `name` (its bytes) when it was listed. */
  has(name: Buffer): boolean {
    return this.names.has(name.toString('latin1'));
  }
}

/** Below this many names asked about, lookups one by one cost less than a listing. */
const MIN_ASKED = 16;
/** The fewest bytes a name takes in a directory's size (ext4: 8 + the name; tmpfs: 20). */
const BYTES_PER_NAME = 16;
/** How many names of a listing one lookup saved is worth. */
const NAMES_PER_ASK = 16;
