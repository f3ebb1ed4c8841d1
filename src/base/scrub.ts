/**
 * Replaces secret values in a stream of bytes as it passes (SPEC §21: a credential's value never
 * reaches a job's captured output, nor the job itself through an upstream that echoes it back).
 * A chunk that ends with the start of a value keeps that start back until the next chunk says
 * whether the value follows; `end()` lets it go. Nothing is held otherwise, so output is not delayed.
 */
export class Scrubber {
  private readonly pairs: { find: Buffer; put: Buffer }[];
  private held: Buffer | undefined;

  constructor(replacements: readonly { find: string; put: string }[]) {
    this.pairs = replacements.filter((r) => r.find.length > 0).map((r) => ({ find: Buffer.from(r.find), put: Buffer.from(r.put) }));
  }

  get empty(): boolean {
    return this.pairs.length === 0;
  }

  /** The chunk with every value replaced, less a tail that may be the start of one (kept for the next). */
  write(chunk: Buffer): Buffer {
    if (this.pairs.length === 0) return chunk;
    let data = this.held ? Buffer.concat([this.held, chunk]) : chunk;
    this.held = undefined;
    data = this.replace(data);
    const keep = this.partialTail(data);
    if (keep > 0) {
      this.held = Buffer.from(data.subarray(data.length - keep));
      return data.subarray(0, data.length - keep);
    }
    return data;
  }

  /** What was kept back, at the stream's end. */
  end(): Buffer {
    const rest = this.held ?? Buffer.alloc(0);
    this.held = undefined;
    return rest;
  }

  /** A whole text at once (a header's value). */
  text(s: string): string {
    if (this.pairs.length === 0) return s;
    let out = s;
    for (const p of this.pairs) out = out.split(p.find.toString()).join(p.put.toString());
    return out;
  }

  private replace(data: Buffer): Buffer {
    for (const p of this.pairs) {
      let at = data.indexOf(p.find);
      if (at < 0) continue;
      const parts: Buffer[] = [];
      let from = 0;
      while (at >= 0) {
        parts.push(data.subarray(from, at), p.put);
        from = at + p.find.length;
        at = data.indexOf(p.find, from);
      }
      parts.push(data.subarray(from));
      data = Buffer.concat(parts);
    }
    return data;
  }

  /** How many bytes at the end of `data` are a proper start of some value (the longest such). */
  private partialTail(data: Buffer): number {
    return partialTail(data, this.pairs);
  }
}

/**
 * How many bytes at the end of `data` are a proper start of one of the `find`s (the longest such):
 * what a stream that looks for them must keep back until the next chunk says whether the rest follows.
 */
export function partialTail(data: Buffer, finds: Iterable<{ find: Buffer }>): number {
  let keep = 0;
  for (const { find } of finds) {
    // Only where the needle's first byte is, in its length less one from the end: mostly nowhere.
    let at = data.indexOf(find[0], Math.max(0, data.length - find.length + 1));
    while (at >= 0 && data.length - at > keep) {
      const n = data.length - at;
      if (find.compare(data, at, data.length, 0, n) === 0) {
        keep = n;
        break;
      }
      at = data.indexOf(find[0], at + 1);
    }
  }
  return keep;
}
