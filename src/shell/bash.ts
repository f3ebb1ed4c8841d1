import { existsSync, readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import type { Node, Parser } from 'web-tree-sitter';
import { unavailable } from '../base/errors.js';

/**
 * A command line as the approval rules see it (SPEC §8): every simple command it would run, with
 * its words as the shell would pass them where they are literal, and the parts that cannot be
 * judged without running them. Parsed by tree-sitter-bash (WebAssembly), never by hand.
 */
export interface Analysis {
  commands: SimpleCommand[];
  unanalyzable: { text: string; why: string }[];
}

export interface SimpleCommand {
  /** As written (the node's text). */
  text: string;
  /** Its words after wrappers are stripped and the name normalised (`/bin/rm` → `rm`); a word that is not literal is `undefined`. */
  argv: (string | undefined)[];
  /** Its words as written (git's global options kept). */
  raw: (string | undefined)[];
}

let parser: Parser | undefined;
let loading: Promise<void> | undefined;
/** Why the last load failed, until one succeeds. */
let failed: string | undefined;
/** What loads the parser; a test replaces it (`setBashLoaderForTest`). */
let loader: () => Promise<Parser> = load;
/** Told of each failed load (the daemon logs it). */
let onFailure: ((err: Error) => void) | undefined;

/**
 * Load the parser once: the first call starts it, every call waits for the same load. Its
 * WebAssembly compiles on V8's background threads, which a daemon's start (a planned restart's
 * above all) shares two cores with, so the daemon starts it once it serves, and whatever judges a
 * command waits for it first (`bashLoading`). web-tree-sitter itself (160 KB of JavaScript outside
 * the daemon's bundle, compiled without its code cache) is required only then.
 */
export function loadBash(): Promise<void> {
  // A failed load is not kept: the next request that needs the parser tries again, so a passing
  // fault (a full /tmp, memory) does not refuse every judged command until the daemon restarts.
  loading ??= loader().then(
    (p) => {
      parser = p;
      failed = undefined;
    },
    (err: Error) => {
      loading = undefined;
      failed = err.message;
      onFailure?.(err);
      throw err;
    },
  );
  return loading;
}

/** Where the parser is, for daemon.status: "ready", "loading", "failed: <why>", or "not loaded" before its first load. */
export function bashState(): string {
  if (parser) return 'ready';
  if (loading) return 'loading';
  return failed !== undefined ? `failed: ${failed}` : 'not loaded';
}

/** Tell `log` of each failed load (the daemon's log; one call a daemon). */
export function onBashLoadFailure(log: (err: Error) => void): void {
  onFailure = log;
}

/** Test-only: load with `fn` (given the real load) from now on, and forget a loaded parser (undefined: the real load again). */
export function setBashLoaderForTest(fn: ((real: () => Promise<Parser>) => Promise<Parser>) | undefined): void {
  loader = fn ? () => fn(load) : load;
  parser = undefined;
  loading = undefined;
  failed = undefined;
}

/** The parser's load to wait for before `analyze`, or undefined when it is loaded (nothing to wait for). */
export function bashLoading(): Promise<void> | undefined {
  return parser ? undefined : loadBash();
}

/**
 * Tests only (docs/testing.md): while the file this names exists, the load waits, so a test can
 * hold a daemon between serving and judging (what a request that comes first meets).
 */
const HOLD_ENV = 'PROCCTL_FAULT_BASH_HOLD';

async function load(): Promise<Parser> {
  const hold = process.env[HOLD_ENV];
  while (hold && existsSync(hold)) await new Promise((r) => setTimeout(r, 20));
  const require = createRequire(import.meta.url);
  try {
    const { Language, Parser } = require('web-tree-sitter') as typeof import('web-tree-sitter');
    await Parser.init();
    const bash = await Language.load(readFileSync(require.resolve('tree-sitter-bash/tree-sitter-bash.wasm')));
    const p = new Parser();
    p.setLanguage(bash);
    return p;
  } catch (err) {
    throw unavailable(`the bash parser of the approval rules (web-tree-sitter with tree-sitter-bash) did not load: ${(err as Error).message}; nothing was judged or run; reinstall procctl (npm install -g procctl) and restart the daemon`);
  }
}

/** How deep `sh -c`, `eval` and substitutions are followed: a script that nests deeper is unanalyzable. */
const MAX_NESTING = 8;
/** Shells whose `-c SCRIPT` is parsed in turn, and which read a script from stdin or a file otherwise. */
const SHELLS = new Set(['sh', 'bash', 'dash', 'zsh', 'ksh', 'mksh', 'ash', 'busybox']);

/** Parse a command line and find every simple command in it. */
export function analyze(source: string): Analysis {
  if (!parser) throw new Error('the bash parser is not loaded yet: wait for bashLoading() first');
  const out: Analysis = { commands: [], unanalyzable: [] };
  walkScript(source, out, 0);
  return out;
}

function walkScript(source: string, out: Analysis, depth: number): void {
  if (depth > MAX_NESTING) {
    out.unanalyzable.push({ text: source, why: `scripts nested more than ${MAX_NESTING} deep` });
    return;
  }
  // Bash drops backslash-newline before it splits words, and a CR before a newline is no separator.
  const text = source.replace(/\r\n/g, '\n').replace(/\\\n/g, '');
  const tree = parser!.parse(text);
  if (!tree) {
    out.unanalyzable.push({ text: source, why: 'it could not be parsed' });
    return;
  }
  try {
    if (tree.rootNode.hasError) out.unanalyzable.push({ text: source, why: 'it does not parse as bash' });
    walk(tree.rootNode, out, depth, new Set());
  } finally {
    tree.delete();
  }
}

/** Files the command line writes by redirection: a shell reading one of them runs what the line wrote. */
function walk(node: Node, out: Analysis, depth: number, written: Set<string>): void {
  switch (node.type) {
    case 'command':
      return command(node, out, depth, written);
    case 'redirected_statement': {
      for (const r of node.namedChildren) {
        if (r && r.type === 'file_redirect') {
          const target = r.namedChildren.find((c) => c && c.type !== 'file_descriptor');
          const word = target ? literal(target) : undefined;
          if (word !== undefined) written.add(word);
        }
      }
      const body = node.namedChildren[0];
      // A heredoc fed to a shell is a script read from stdin.
      if (body?.type === 'command' && node.namedChildren.some((c) => c?.type === 'heredoc_redirect' || c?.type === 'herestring_redirect')) {
        const name = nameOf(body);
        if (name !== undefined && SHELLS.has(name)) out.unanalyzable.push({ text: node.text, why: 'a shell reading its script from a heredoc' });
      }
      break;
    }
    case 'function_definition':
      out.unanalyzable.push({ text: node.text, why: 'it defines a function, which a later name may call' });
      break;
  }
  for (const child of node.namedChildren) if (child) walk(child, out, depth, written);
}

function nameOf(cmd: Node): string | undefined {
  const name = cmd.childForFieldName('name');
  return name ? literal(name) : undefined;
}

/** One simple command: its words, then what it runs in turn. */
function command(node: Node, out: Analysis, depth: number, written: Set<string>): void {
  const words: Node[] = [];
  for (const child of node.namedChildren) {
    if (!child) continue;
    if (child.type === 'command_name') words.push(child);
    else if (child.type !== 'variable_assignment' && !child.type.endsWith('redirect')) words.push(child);
    // Substitutions anywhere in it run too.
    walkSubstitutions(child, out, depth, written);
  }
  if (words.length === 0) return;
  // An unquoted newline ends a simple command in bash. tree-sitter-bash sometimes runs one on
  // across it (`a | b\nc x || d` comes back with `b c x` as one command): then each line's words
  // are analyzed as the command they are.
  const runs: Node[][] = [[words[0]]];
  for (let i = 1; i < words.length; i++) {
    const gap = node.text.slice(words[i - 1].endIndex - node.startIndex, words[i].startIndex - node.startIndex);
    if (gap.includes('\n')) runs.push([words[i]]);
    else runs[runs.length - 1].push(words[i]);
  }
  if (runs.length > 1) {
    for (const run of runs) walkScript(node.text.slice(run[0].startIndex - node.startIndex, run[run.length - 1].endIndex - node.startIndex), out, depth + 1);
    return;
  }
  // `NAME=$value` given to env is an assignment whatever its value: keep its name, mark its value unknown.
  const raw = words.map((w) => literal(w) ?? (/^[A-Za-z_][A-Za-z0-9_]*=/.test(w.text) ? `${w.text.slice(0, w.text.indexOf('='))}=\u0000` : undefined));
  if (raw[0] === undefined) {
    out.unanalyzable.push({ text: node.text, why: 'its command name comes from an expansion' });
    return;
  }
  const argv = stripWrappers(raw);
  if (argv.length === 0) return;
  if (argv[0] === undefined) {
    out.unanalyzable.push({ text: node.text, why: 'its command name comes from an expansion' });
    return;
  }
  const name = argv[0];
  out.commands.push({ text: node.text, argv, raw });
  if (name === 'eval') {
    const rest = argv.slice(1);
    if (rest.some((w) => w === undefined)) out.unanalyzable.push({ text: node.text, why: 'eval of something that is not literal' });
    else walkScript(rest.join(' '), out, depth + 1);
    return;
  }
  if (name === 'source' || name === '.') {
    out.unanalyzable.push({ text: node.text, why: 'it runs a script file' });
    return;
  }
  if (SHELLS.has(name)) {
    const c = argv.findIndex((w, i) => i > 0 && w !== undefined && /^-[a-zA-Z]*c[a-zA-Z]*$/.test(w));
    if (c > 0) {
      const script = argv[c + 1];
      if (script === undefined) out.unanalyzable.push({ text: node.text, why: 'a shell running a script that is not literal' });
      else walkScript(script, out, depth + 1);
      return;
    }
    const file = argv.slice(1).find((w) => w === undefined || !w.startsWith('-'));
    if (file === undefined && argv.slice(1).every((w) => w !== undefined)) out.unanalyzable.push({ text: node.text, why: 'a shell reading its script from stdin or a pipe' });
    else if (file === undefined || written.has(file)) out.unanalyzable.push({ text: node.text, why: 'a shell running a script the command line itself writes' });
    return;
  }
  // find -exec CMD ... ; runs CMD.
  if (name === 'find') {
    for (let i = 1; i < argv.length; i++) {
      if (!['-exec', '-execdir', '-ok', '-okdir'].includes(argv[i] ?? '')) continue;
      const end = argv.findIndex((w, j) => j > i && (w === ';' || w === '+'));
      const inner = argv.slice(i + 1, end === -1 ? undefined : end);
      if (inner.length > 0) out.commands.push({ text: node.text, argv: stripWrappers(inner), raw: inner });
    }
  }
}

function walkSubstitutions(node: Node, out: Analysis, depth: number, written: Set<string>): void {
  if (node.type === 'command_substitution' || node.type === 'process_substitution') {
    for (const child of node.namedChildren) if (child) walk(child, out, depth + 1, written);
    return;
  }
  for (const child of node.namedChildren) if (child) walkSubstitutions(child, out, depth, written);
}

const ESCAPES: Record<string, string> = { n: '\n', t: '\t', r: '\r', a: '\x07', b: '\b', e: '\x1b', E: '\x1b', f: '\f', v: '\v', '\\': '\\', "'": "'", '"': '"', '?': '?' };

/** A word's value as the shell would pass it, when it is literal; undefined when it holds an expansion. */
function literal(node: Node): string | undefined {
  switch (node.type) {
    case 'command_name':
      return node.namedChildren[0] ? literal(node.namedChildren[0]) : undefined;
    case 'word':
    case 'number':
      // Unquoted: a backslash quotes the next character.
      return node.text.replace(/\\(.)/gs, '$1');
    case 'raw_string':
      return node.text.slice(1, -1);
    case 'string': {
      let value = '';
      for (const child of node.namedChildren) {
        if (!child) continue;
        if (child.type !== 'string_content') return undefined;
        value += child.text.replace(/\\([$`"\\\n])/g, '$1');
      }
      return value;
    }
    case 'ansi_c_string':
      return node.text
        .slice(2, -1)
        .replace(/\\(x[0-9a-fA-F]{1,2}|u[0-9a-fA-F]{1,4}|U[0-9a-fA-F]{1,8}|[0-7]{1,3}|c.|.)/gs, (_, e: string) => {
          if (/^[xuU]/.test(e)) return String.fromCodePoint(parseInt(e.slice(1), 16));
          if (/^[0-7]/.test(e)) return String.fromCharCode(parseInt(e, 8));
          if (e.startsWith('c')) return String.fromCharCode(e.charCodeAt(1) & 31);
          return ESCAPES[e] ?? `\\${e}`;
        });
    case 'concatenation':
      // Unnamed pieces (a bare `=` or `:`) are literal text between the named ones.
      return rebuild(node);
    default:
      return undefined;
  }
}

/** A concatenation's value with its unnamed literal pieces kept in place. */
function rebuild(node: Node): string | undefined {
  let value = '';
  for (const child of node.children) {
    if (!child) continue;
    if (child.isNamed) {
      const part = literal(child);
      if (part === undefined) return undefined;
      value += part;
    } else value += child.text;
  }
  return value;
}

/** Wrappers that run the rest of their arguments as the command (SPEC §8), with the options each takes a value for. */
const WRAPPERS: Record<string, { valued: RegExp; positional?: number; stop?: (w: string) => boolean }> = {
  env: { valued: /^(-u|--unset|-C|--chdir|-S|--split-string)$/, stop: (w) => !w.startsWith('-') && !/^[A-Za-z_][A-Za-z0-9_]*=/.test(w) },
  command: { valued: /^$/ },
  builtin: { valued: /^$/ },
  exec: { valued: /^-a$/ },
  nice: { valued: /^(-n|--adjustment)$/ },
  nohup: { valued: /^$/ },
  timeout: { valued: /^(-s|--signal|-k|--kill-after)$/, positional: 1 },
  time: { valued: /^(-f|--format|-o|--output)$/ },
  stdbuf: { valued: /^(-i|-o|-e)$/ },
  ionice: { valued: /^(-c|--class|-n|--classdata|-p|--pid|-P|--pgid|-u|--uid)$/ },
  setsid: { valued: /^$/ },
  xargs: { valued: /^(-a|--arg-file|-d|--delimiter|-E|-e|-I|-i|-L|-l|-n|--max-args|-P|--max-procs|-s|--max-chars)$/ },
  sudo: { valued: /^(-u|--user|-g|--group|-h|--host|-p|--prompt|-C|--close-from|-D|--chdir|-r|--role|-t|--type|-T|--command-timeout|-U|--other-user)$/ },
  doas: { valued: /^(-u|-C)$/ },
};

/** git's options that come before its verb, with those that take a value. */
const GIT_GLOBAL_VALUED = /^(-C|-c|--git-dir|--work-tree|--namespace|--super-prefix|--exec-path|--config-env)$/;

/** `/bin/rm` → `rm`, quotes already gone. */
const normalise = (name: string) => name.replace(/^.*\//, '');

/** Strip wrappers (`sudo env -i nice timeout 5 rm …` → `rm …`) and git's global options; normalise the name. */
export function stripWrappers(argv: (string | undefined)[]): (string | undefined)[] {
  let words = argv;
  for (let rounds = 0; rounds < 16 && words.length > 0; rounds++) {
    const name = words[0] === undefined ? undefined : normalise(words[0]);
    const wrapper = name === undefined ? undefined : WRAPPERS[name];
    if (!wrapper) break;
    let i = 1;
    while (i < words.length) {
      const w = words[i];
      if (w === undefined) break;
      if (w === '--') {
        i++;
        break;
      }
      if (wrapper.stop ? wrapper.stop(w) : !w.startsWith('-')) break;
      i += wrapper.valued.test(w) ? 2 : 1;
    }
    i += wrapper.positional ?? 0;
    words = words.slice(i);
  }
  if (words.length === 0) return words;
  const name = words[0] === undefined ? undefined : normalise(words[0]);
  if (name === 'git') {
    let i = 1;
    while (i < words.length && words[i] !== undefined && words[i]!.startsWith('-')) i += GIT_GLOBAL_VALUED.test(words[i]!) ? 2 : 1;
    return [name, ...words.slice(i)];
  }
  return [name, ...words.slice(1)];
}
