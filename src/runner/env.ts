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

/** The environment of a session: the daemon's, the caller's overrides, then the session's own variables. */
export function buildEnv(
  base: NodeJS.ProcessEnv,
  overrides: Record<string, string> | undefined,
  sessionVars: Record<string, string>,
): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = { ...base };
  for (const name of DAEMON_ONLY) delete env[name];
  if (overrides) Object.assign(env, overrides);
  return Object.assign(env, sessionVars);
}
