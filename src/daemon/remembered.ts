import { readFileSync, renameSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { Logger } from 'pino';
import { z } from 'zod';
import type { RememberedRule } from '../policy/remembered.js';
import type { RememberedAnswers } from '../tools/context.js';

const RememberedFileSchema = z.object({
  v: z.literal(1),
  rules: z.array(
    z.object({
      scope: z.string(),
      kind: z.enum(['command', 'prefix']),
      words: z.array(z.string()).min(1),
      at: z.number(),
      from: z.string(),
    }),
  ),
});

/**
 * Remembered answers on disk (SPEC §8): `remembered.json` in the state directory, written whole
 * (temp file and rename) at each change, read at start. A file that fails its schema is set aside
 * as `.corrupt` and the daemon starts with none, saying so.
 */
export class RememberedStore implements RememberedAnswers {
  private rules: RememberedRule[] = [];
  private readonly file: string;

  constructor(
    dir: string,
    private readonly log: Logger,
  ) {
    this.file = join(dir, 'remembered.json');
  }

  load(): void {
    let text: string;
    try {
      text = readFileSync(this.file, 'utf8');
    } catch {
      return;
    }
    const parsed = RememberedFileSchema.safeParse((() => {
      try {
        return JSON.parse(text);
      } catch {
        return undefined;
      }
    })());
    if (parsed.success) {
      this.rules = parsed.data.rules;
      return;
    }
    this.log.warn({ file: this.file }, 'remembered answers are unreadable: set aside as .corrupt, starting with none');
    try {
      renameSync(this.file, `${this.file}.corrupt`);
    } catch {
      // leave it
    }
  }

  list(): readonly RememberedRule[] {
    return this.rules;
  }

  add(rules: RememberedRule[]): void {
    const fresh = rules.filter((r) => !this.rules.some((x) => x.scope === r.scope && x.kind === r.kind && x.words.join('\0') === r.words.join('\0')));
    if (fresh.length === 0) return;
    this.save([...this.rules, ...fresh]);
  }

  remove(n: number): RememberedRule | undefined {
    const gone = this.rules[n - 1];
    if (!gone) return undefined;
    this.save(this.rules.filter((_, i) => i !== n - 1));
    return gone;
  }

  /** Written before the answer goes out: a remembered answer survives a crash right after. */
  private save(rules: RememberedRule[]): void {
    const tmp = `${this.file}.tmp`;
    writeFileSync(tmp, JSON.stringify({ v: 1, rules }), { mode: 0o600 });
    renameSync(tmp, this.file);
    this.rules = rules;
  }
}
