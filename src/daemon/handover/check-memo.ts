import { createHash } from 'node:crypto';
import { readdirSync, readFileSync, realpathSync, renameSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { configCandidates } from '../../config/load.js';

/**
 * The pre-flight's answer, remembered per installed image (docs/durability.md "The pre-flight,
 * remembered"): `procctld --handover-format` starts a whole Node and loads the config's schema to
 * say three words, and the same image with the same config and environment says the same words
 * every time. Its answer is kept in the state directory under a key made of everything the
 * answer depends on that a file system or the daemon can tell; any change of it (an upgrade, a
 * rebuild, one file of the package touched, the config edited, another Node) asks the image again.
 * Only an answer that let a restart go on is remembered; a refusal is asked again every time.
 */
export interface ImageInputs {
  /** The procctld that would start (bin/procctld of the package as installed now). */
  procctld: string;
  /** The package's directory. */
  root: string;
  /** The daemon's own options, which the pre-flight and the new image start with. */
  args: string[];
  /** The --config the daemon was started with, if any. */
  configFile: string | undefined;
  env: NodeJS.ProcessEnv;
}

/** The parts of the package whose files are fingerprinted (size, time, inode): what the image runs. */
const IMAGE_PARTS = ['bin', 'package.json', 'dist/src', 'build/Release', 'prebuilds', 'node_modules/.package-lock.json'];

/** The key of the pre-flight's answer for these inputs as they are now (sha256 hex). */
export function imageKey(i: ImageInputs): string {
  const h = createHash('sha256');
  const add = (...parts: (string | number | bigint | undefined)[]) => h.update(parts.map(String).join('\0')).update('\n');
  add('node', process.execPath, process.version, ...process.execArgv);
  add('procctld', realpathSync(i.procctld), ...i.args);
  for (const [k, v] of Object.entries(i.env).sort(([a], [b]) => (a < b ? -1 : 1))) add('env', k, v);
  for (const { path } of configCandidates(i.configFile, i.env)) add('config', path, readOr(path));
  for (const part of IMAGE_PARTS) for (const file of filesUnder(join(i.root, part))) add('file', file.path, file.size, file.mtimeNs, file.ino);
  return h.digest('hex');
}

/** The answer remembered under this key, if any. */
export function rememberedAnswer(memo: string, key: string): string | undefined {
  try {
    const m = JSON.parse(readFileSync(memo, 'utf8')) as { key?: unknown; answer?: unknown };
    return m.key === key && typeof m.answer === 'string' ? m.answer : undefined;
  } catch {
    return undefined;
  }
}

/** Remember an answer (the last one only), written aside and renamed so a reader never sees half. */
export function rememberAnswer(memo: string, key: string, answer: string): void {
  const tmp = `${memo}.${process.pid}.tmp`;
  writeFileSync(tmp, `${JSON.stringify({ key, answer, at: new Date().toISOString() })}\n`, { mode: 0o600 });
  renameSync(tmp, memo);
}

/** The files under a part that an image runs; bin/ is taken whole (its scripts have no extension). */
const RUNS = /(^[^./]+$)|\.(js|cjs|mjs|json|node|cache)$/;

function readOr(path: string): string {
  try {
    return readFileSync(path, 'utf8');
  } catch (err) {
    return `(${(err as NodeJS.ErrnoException).code ?? 'unreadable'})`;
  }
}

/** Every file at or under `path` with its size, time and inode; nothing when it does not exist. */
function filesUnder(path: string): { path: string; size: number; mtimeNs: bigint; ino: bigint }[] {
  const stat = (p: string) => {
    const s = statSync(p, { bigint: true, throwIfNoEntry: false });
    return s && { path: p, size: Number(s.size), mtimeNs: s.mtimeNs, ino: s.ino, dir: s.isDirectory() };
  };
  const top = stat(path);
  if (!top) return [];
  if (!top.dir) return [top];
  const out = [];
  for (const name of (readdirSync(path, { recursive: true }) as string[]).sort()) {
    // What runs (code, its code cache, the addon), not type declarations, source maps or object files.
    if (!RUNS.test(name) || name.startsWith('obj.target/')) continue;
    const s = stat(join(path, name));
    if (s && !s.dir) out.push(s);
  }
  return out;
}
