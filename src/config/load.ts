import { readFileSync } from 'node:fs';
import { homedir } from 'node:os';
import { join } from 'node:path';
import { ConfigSchema, ENV_VARS, type Config, type EnvVar } from './schema.js';

export class ConfigError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'ConfigError';
  }
}

export interface LoadedConfig {
  config: Config;
  /** The file read, if any. */
  file: string | undefined;
}

/** Where the config file is looked for, first that applies (SPEC §3). */
export function configCandidates(explicit: string | undefined, env: NodeJS.ProcessEnv): { path: string; required: boolean }[] {
  const chosen = explicit ?? env.PROCCTL_CONFIG;
  if (chosen) return [{ path: chosen, required: true }];
  const xdg = env.XDG_CONFIG_HOME || join(env.HOME || homedir(), '.config');
  return [
    { path: join(xdg, 'procctl', 'config.json'), required: false },
    { path: '/etc/procctl/config.json', required: false },
  ];
}

function readConfigFile(explicit: string | undefined, env: NodeJS.ProcessEnv): { raw: unknown; file: string | undefined } {
  for (const { path, required } of configCandidates(explicit, env)) {
    let text: string;
    try {
      text = readFileSync(path, 'utf8');
    } catch (err) {
      const code = (err as NodeJS.ErrnoException).code;
      if (!required && code === 'ENOENT') continue;
      throw new ConfigError(`cannot read config file ${path}: ${(err as Error).message}`);
    }
    try {
      return { raw: JSON.parse(text), file: path };
    } catch (err) {
      throw new ConfigError(`config file ${path} is not valid JSON: ${(err as Error).message}`);
    }
  }
  return { raw: {}, file: undefined };
}

function parseEnvValue(v: EnvVar, text: string): unknown {
  const t = text.trim();
  if (v.kind === 'int') return /^-?\d+$/.test(t) ? Number(t) : text;
  if (v.kind === 'bool') {
    if (/^(1|true|yes|on)$/i.test(t)) return true;
    if (/^(0|false|no|off)$/i.test(t)) return false;
    return text;
  }
  return text;
}

function setPath(target: Record<string, unknown>, path: string[], value: unknown): void {
  let node = target;
  for (const key of path.slice(0, -1)) {
    const next = node[key];
    if (next === undefined) node[key] = {};
    // A file value of the wrong type stays, so the schema reports it against the file.
    else if (typeof next !== 'object' || next === null || Array.isArray(next)) return;
    node = node[key] as Record<string, unknown>;
  }
  node[path[path.length - 1]] = value;
}

function getPath(target: unknown, path: PropertyKey[]): unknown {
  let node = target;
  for (const key of path) {
    if (typeof node !== 'object' || node === null) return undefined;
    node = (node as Record<PropertyKey, unknown>)[key];
  }
  return node;
}

/** Keys of earlier versions, and what to write instead. */
const REPLACED: Record<string, string> = {
  scopeTokens: 'write each scope\'s token as scopes.NAME.token, e.g. {"scopes": {"ci": {"token": "sha256:<hex of the token>"}}} (see docs/configuration.md)',
};

/** Parse a config object; any problem names the key, the value, where it came from and what is allowed. */
export function parseConfig(raw: unknown, sources: Map<string, string> = new Map(), file?: string): Config {
  for (const [old, now] of Object.entries(REPLACED)) {
    if (typeof raw === 'object' && raw !== null && Object.hasOwn(raw, old)) {
      throw new ConfigError(`config key ${old} ${file ? `in ${file} ` : ''}was replaced: ${now}`);
    }
  }
  // Read once per start or reload: checked without compiling a parser for it first (zod's JIT, worth it only for a schema parsed many times).
  const result = ConfigSchema.safeParse(raw, { jitless: true });
  if (result.success) return result.data;
  const lines = result.error.issues.map((issue) => {
    const key = issue.path.join('.');
    const where = sources.get(key) ?? (file ? `in ${file}` : 'in the config');
    if (issue.code === 'unrecognized_keys') {
      const prefix = key ? `${key}.` : '';
      return `unknown config key ${issue.keys.map((k) => prefix + k).join(', ')} ${where}; see docs/configuration.md for the keys`;
    }
    const value = getPath(raw, issue.path);
    return `invalid config ${key} = ${JSON.stringify(value)} (${where}): ${issue.message}`;
  });
  throw new ConfigError(lines.join('\n'));
}

/** Load the config: the JSON file, then environment variables (and their aliases) over it. */
export function loadConfig(explicitFile: string | undefined, env: NodeJS.ProcessEnv = process.env): LoadedConfig {
  const { raw, file } = readConfigFile(explicitFile, env);
  if (typeof raw !== 'object' || raw === null || Array.isArray(raw)) {
    throw new ConfigError(`config file ${file} must hold a JSON object, got ${JSON.stringify(raw)?.slice(0, 80)}`);
  }
  const merged = structuredClone(raw) as Record<string, unknown>;
  const sources = new Map<string, string>();
  for (const v of ENV_VARS) {
    const name = [v.name, ...v.aliases].find((n) => env[n] !== undefined && env[n] !== '');
    if (!name) continue;
    setPath(merged, v.path, parseEnvValue(v, env[name] as string));
    sources.set(v.path.join('.'), `from $${name}`);
  }
  return { config: parseConfig(merged, sources, file), file };
}

