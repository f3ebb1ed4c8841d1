/** Where a running job's input goes: a pipe, or its terminal. The runner makes it; the session holds it. */
export interface JobInput {
  write(data: string | Buffer): void;
  /** End of input: closes a pipe; sends ^D on a terminal. */
  end(): void;
  /** Bytes accepted but not yet taken by the job. */
  readonly queued: number;
}
