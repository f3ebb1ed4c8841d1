/** What every bench is given by bench/main.ts. */
export interface BenchOptions {
  rounds: number;
  /** Smaller sizes, for checking the bench itself. */
  quick: boolean;
  log: (line: string) => void;
}
