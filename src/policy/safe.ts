/**
 * The built-in read-only commands of `approvals.safe: true` (SPEC §8), as data: each command with
 * the options that would make it write or run something, which take it off the list. In the
 * spirit of Codex's known-safe list; documented in docs/security.md.
 */
interface SafeEntry {
  /** Options that take the command off the list (exact words, or their `--opt=` form). */
  refuse?: string[];
  /** Only these first positional words (a verb, for git). */
  verbs?: Record<string, { refuse?: string[]; positional?: boolean }>;
  /** Every positional argument must match (sed's script). */
  script?: RegExp;
  /** Options that must be present (sed's `-n`). */
  require?: string[];
}

const PLAIN: SafeEntry = {};

export const SAFE: Record<string, SafeEntry> = {
  ls: PLAIN, cat: PLAIN, head: PLAIN, tail: PLAIN, wc: PLAIN, pwd: PLAIN, echo: PLAIN, printf: PLAIN, true: PLAIN, false: PLAIN,
  date: { refuse: ['-s', '--set'] }, uname: PLAIN, whoami: PLAIN, id: PLAIN, hostname: PLAIN, which: PLAIN, type: PLAIN, file: PLAIN,
  stat: PLAIN, du: PLAIN, df: PLAIN, cut: PLAIN, tr: PLAIN, nl: PLAIN, od: PLAIN, xxd: { refuse: ['-r', '-revert'] }, basename: PLAIN,
  dirname: PLAIN, realpath: PLAIN, readlink: PLAIN, seq: PLAIN, test: PLAIN, '[': PLAIN, diff: PLAIN, cmp: PLAIN, comm: PLAIN,
  sha256sum: PLAIN, sha1sum: PLAIN, md5sum: PLAIN, cksum: PLAIN, uniq: PLAIN, column: PLAIN, jq: PLAIN, grep: PLAIN, egrep: PLAIN, fgrep: PLAIN,
  rg: { refuse: ['--pre', '--pre-glob'] },
  sort: { refuse: ['-o', '--output'] },
  tree: { refuse: ['-o'] },
  find: { refuse: ['-exec', '-execdir', '-ok', '-okdir', '-delete', '-fprint', '-fprint0', '-fprintf', '-fls'] },
  sed: { require: ['-n'], refuse: ['-i', '--in-place', '-e', '--expression', '-f', '--file', '-s', '--separate', '-z'], script: /^((\d+|\$|\/[^/]*\/)(,(\d+|\$|\/[^/]*\/))?)?p$/ },
  git: {
    verbs: {
      status: {},
      diff: { refuse: ['--output', '--ext-diff'] },
      log: { refuse: ['--output', '--ext-diff'] },
      show: { refuse: ['--output', '--ext-diff'] },
      branch: { refuse: ['-d', '-D', '--delete', '-m', '-M', '--move', '-c', '-C', '--copy', '-f', '--force', '-u', '--set-upstream-to', '--unset-upstream', '--edit-description'], positional: false },
    },
  },
};

/** git's global options that change what runs (`-c core.pager=...`, `--exec-path`): never safe. */
const GIT_RUNS = /^(-c|--config-env|--exec-path)(=|$)/;

const has = (args: (string | undefined)[], options: readonly string[]) =>
  args.some((a) => a !== undefined && options.some((o) => a === o || a.startsWith(`${o}=`) || (o.length === 2 && /^-[a-zA-Z]+$/.test(a) && !a.startsWith('--') && a.includes(o[1]) && o[1] !== '-')));

/** Is this simple command on the read-only list? `raw`: its words as written (git's global options). */
export function safeCommand(argv: (string | undefined)[], raw: (string | undefined)[]): boolean {
  const name = argv[0];
  if (name === undefined || !Object.hasOwn(SAFE, name)) return false;
  if (argv.some((a) => a === undefined)) return false;
  const entry = SAFE[name];
  const args = argv.slice(1);
  if (entry.refuse && has(args, entry.refuse)) return false;
  if (entry.require && !entry.require.every((o) => has(args, [o]))) return false;
  const positional = args.filter((a) => !a!.startsWith('-'));
  if (entry.script && !positional.slice(0, 1).every((p) => entry.script!.test(p!))) return false;
  if (entry.verbs) {
    if (raw.some((w) => w !== undefined && GIT_RUNS.test(w))) return false;
    const verb = positional[0];
    if (verb === undefined || !Object.hasOwn(entry.verbs, verb)) return false;
    const v = entry.verbs[verb];
    const rest = args.slice(args.indexOf(verb) + 1);
    if (v.refuse && has(rest, v.refuse)) return false;
    if (v.positional === false && rest.some((a) => !a!.startsWith('-'))) return false;
  }
  return true;
}
