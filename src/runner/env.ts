import { forbidden } from '../base/errors.js';

const NAME = /^[A-Za-z_][A-Za-z0-9_]*$/;
const REFUSED: [RegExp, string][] = [
  [/^PATH$/, 'PATH decides which programs run'],
  [/^LD_/, 'LD_* variables inject code into every program'],
  [/^DYLD_/, 'DYLD_* variables inject code into every program'],
  [/^BASH_FUNC_/, 'BASH_FUNC_* variables define shell functions'],
  [/^NODE_OPTIONS$/, 'NODE_OPTIONS injects code into every Node program'],
];

/** Variables of the daemon's own environment that describe the daemon, not the job. */
const DAEMON_ONLY = ['LISTEN_FDS', 'LISTEN_PID', 'LISTEN_FDNAMES', 'NOTIFY_SOCKET', 'WATCHDOG_USEC', 'WATCHDOG_PID'];

/** Refuse overrides that would change what runs or inject code (SPEC §5). */
export function checkEnvOverrides(overrides: Record<string, string>): void {
  for (const name of Object.keys(overrides)) {
    if (!NAME.test(name)) {
      throw forbidden(`env: "${name}" is not a valid variable name; use letters, digits and _ and do not start with a digit`, { path: ['env', name] });
    }
    const refused = REFUSED.find(([re]) => re.test(name));
    if (refused) {
      throw forbidden(`env: ${name} may not be overridden (${refused[1]}); set it inside the command instead if you really mean it`, { path: ['env', name] });
    }
  }
}

/** The daemon's inherited variables as every job gets them: without DAEMON_ONLY, and as NAME=value strings. */
interface Base {
  object: NodeJS.ProcessEnv;
  /** [name, "NAME=value"] in order. */
  pairs: [string, string][];
}

const bases = new WeakMap<NodeJS.ProcessEnv, Base>();

/** The base made once per inherited environment (daemonInheritance gives the same object exec after exec). */
function baseOf(env: NodeJS.ProcessEnv): Base {
  let base = bases.get(env);
  if (!base) {
    const object: NodeJS.ProcessEnv = {};
    const pairs: [string, string][] = [];
    for (const [name, value] of Object.entries(env)) {
      if (value === undefined || DAEMON_ONLY.includes(name)) continue;
      object[name] = value;
      pairs.push([name, `${name}=${value}`]);
    }
    base = { object, pairs };
    bases.set(env, base);
  }
  return base;
}

/**
 * The environment of a session: the daemon's (less the variables that describe the daemon), the
 * caller's overrides, then the session's own variables. Held as the inherited part and what is
 * laid over it: the native spawner takes NAME=value strings, and those of the inherited part are
 * made once, not for every exec (40-odd strings and a copy of the object were ~30 µs of an exec's
 * way to its spawn, docs/benchmarks.md).
 */
export class JobEnv {
  private made: NodeJS.ProcessEnv | undefined;

  private constructor(
    private readonly base: Base,
    private readonly top: Record<string, string>,
  ) {}

  static of(inherited: NodeJS.ProcessEnv, overrides: Record<string, string> | undefined, sessionVars: Record<string, string>): JobEnv {
    return new JobEnv(baseOf(inherited), overrides ? { ...overrides, ...sessionVars } : sessionVars);
  }

  /** None (a session taken over, whose job runs already). */
  static empty(): JobEnv {
    return new JobEnv(baseOf({}), {});
  }

  /** The whole environment as an object (a terminal's spawner, the fork fallback). */
  object(): NodeJS.ProcessEnv {
    this.made ??= { ...this.base.object, ...this.top };
    return this.made;
  }

  /** NAME=value for every variable, as the native spawner takes them. */
  pairs(): string[] {
    const { base, top } = this;
    const names = Object.keys(top);
    const over = names.some((name) => Object.hasOwn(base.object, name));
    const out: string[] = [];
    for (const [name, pair] of base.pairs) if (!over || !Object.hasOwn(top, name)) out.push(pair);
    for (const name of names) out.push(`${name}=${top[name]}`);
    return out;
  }

  /** Without each variable whose value holds one of `values` (a credential's), but those named in `kept` (the caller's own). */
  without(values: readonly string[], kept: Record<string, string> | undefined): JobEnv {
    if (values.length === 0) return this;
    const env: NodeJS.ProcessEnv = {};
    for (const [name, value] of Object.entries(this.object())) {
      if (value !== undefined && values.some((v) => value.includes(v)) && !(kept && Object.hasOwn(kept, name))) continue;
      env[name] = value;
    }
    return new JobEnv(baseOf(env), {});
  }
}
