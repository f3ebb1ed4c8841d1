import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import { homedir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { EXIT, note, out, UsageError } from '../context.js';
import { DAEMON_NODE_FLAGS } from '../../base/node-flags.js';

/**
 * `procctl daemon install [--user | --system] [--ui [--ui-port N]] [--dry-run]` (SPEC §11, §17):
 * the package's own units (docs/systemd/), with ExecStart naming this package's procctld (and
 * procctl, for the console's unit) and the node running it, written where systemd looks, then
 * systemctl daemon-reload and enable --now of the socket (and the console). Where systemd is not
 * running, or with --dry-run, it writes nothing and prints a shell script instead that would do
 * the same (`procctl daemon install --user --dry-run | sh`).
 */

const USAGE = 'usage: procctl daemon install [--user | --system] [--ui [--ui-port N]] [--dry-run]';
const UNITS = ['procctld.service', 'procctld.socket'] as const;
/** The console's unit (`--ui`), and the fixed port it serves on, so its address stays the same. */
const UI_UNIT = 'procctl-ui.service';
export const UI_PORT = 7787;
/** The program each unit's ExecStart runs, in the package's bin/. */
const BIN_OF: Record<string, string> = { 'procctld.service': 'procctld', [UI_UNIT]: 'procctl' };

/** This package's directory: where package.json named procctl is, above this file (bundled or not). */
export function packageRoot(from = dirname(fileURLToPath(import.meta.url))): string {
  for (let dir = from; ; dir = dirname(dir)) {
    try {
      if (JSON.parse(readFileSync(join(dir, 'package.json'), 'utf8')).name === 'procctl') return dir;
    } catch {
      // not here
    }
    if (dirname(dir) === dir) throw new Error(`cannot find the procctl package above ${from}`);
  }
}

/** A word of a systemd command line: quoted when it has to be. */
function unitWord(word: string): string {
  return /^[A-Za-z0-9_@%+=:,./-]+$/.test(word) ? word : `"${word.replace(/(["\\])/g, '\\$1')}"`;
}

export interface InstallPlan {
  kind: 'user' | 'system';
  /** Where the units go. */
  dir: string;
  /** File name → content. */
  units: Record<string, string>;
  /** What runs after they are written. */
  commands: string[][];
  /** Something to do first that procctl does not do itself (the system user), as shell lines. */
  before: string[];
}

/**
 * The units for this install: the package's own, with ExecStart running this package's
 * bin/procctld with the node running now (systemd's PATH may not have it: nvm, /opt), and
 * Documentation pointing at the package's docs/systemd.md.
 */
export function installPlan(kind: 'user' | 'system', env: NodeJS.ProcessEnv = process.env, root = packageRoot(), ui?: { port: number }): InstallPlan {
  const source = kind === 'user' ? join(root, 'docs', 'systemd', 'user') : join(root, 'docs', 'systemd');
  const units: Record<string, string> = {};
  for (const name of ui ? [...UNITS, UI_UNIT] : UNITS) {
    const from = join(source, name);
    let text = readFileSync(from, 'utf8');
    text = text.replace(/^# .*Install: see docs\/\w+\.md\.\n/m, '');
    text = `# Written by \`procctl daemon install --${kind}\` from ${from}.\n# Install again after moving procctl or node; change settings in a drop-in (systemctl${kind === 'user' ? ' --user' : ''} edit ${name}).\n${text}`;
    const doc = `Documentation=file://${join(root, 'docs', name === UI_UNIT ? 'console.md' : 'systemd.md')}`;
    text = /^Documentation=/m.test(text) ? text.replace(/^Documentation=.*$/m, doc) : text.replace(/^(Description=.*)$/m, `$1\n${doc}`);
    const program = join(root, 'bin', BIN_OF[name] ?? 'procctld');
    // The daemon with its node flags (base/node-flags.ts), as bin/procctld's first line gives them.
    const flags = name === UI_UNIT ? '' : DAEMON_NODE_FLAGS.map((f) => `${unitWord(f)} `).join('');
    text = text.replace(/^ExecStart=\S+(.*)$/m, (_line, rest: string) => `ExecStart=${unitWord(process.execPath)} ${flags}${unitWord(program)}${rest}`);
    if (name === UI_UNIT && ui) text = text.replace(/^(ExecStart=.* --port )\d+$/m, `$1${ui.port}`);
    units[name] = text;
  }
  const systemctl = kind === 'user' ? ['systemctl', '--user'] : ['systemctl'];
  const commands = [
    [...systemctl, 'daemon-reload'],
    [...systemctl, 'enable', '--now', 'procctld.socket'],
    ...(ui ? [[...systemctl, 'enable', '--now', UI_UNIT]] : []),
  ];
  if (kind === 'user') {
    const config = env.XDG_CONFIG_HOME || join(env.HOME || homedir(), '.config');
    return { kind, dir: join(config, 'systemd', 'user'), units, commands, before: [] };
  }
  const before = hasUser('procctl') ? [] : ['useradd --system --create-home --home-dir /home/procctl --shell /bin/bash procctl'];
  return { kind, dir: '/etc/systemd/system', units, commands, before };
}

/** Is there a user of this name (the system service's jobs run as `procctl`)? */
function hasUser(name: string): boolean {
  try {
    return readFileSync('/etc/passwd', 'utf8').split('\n').some((l) => l.split(':')[0] === name);
  } catch {
    return spawnSync('id', ['-u', name], { stdio: 'ignore' }).status === 0;
  }
}

/** Why systemd cannot take the units here, or '' when it can. */
function systemdMissing(kind: 'user' | 'system', env: NodeJS.ProcessEnv): string {
  // sd_booted(): the system manager makes this directory at boot.
  if (!existsSync('/run/systemd/system')) return 'systemd is not running on this host (no /run/systemd/system)';
  if (kind === 'system') return '';
  const runtime = env.XDG_RUNTIME_DIR || `/run/user/${process.getuid?.()}`;
  if (!existsSync(join(runtime, 'systemd', 'private'))) return `no systemd user manager runs for you (no ${join(runtime, 'systemd', 'private')}; log in through a session, or \`loginctl enable-linger $USER\`)`;
  return '';
}

const shellWord = (w: string) => (/^[A-Za-z0-9_@%+=:,./-]+$/.test(w) ? w : `'${w.replace(/'/g, `'\\''`)}'`);

/** The plan as a shell script that carries it out: the units as here-documents, then the commands. */
export function installScript(plan: InstallPlan): string {
  const lines = [...plan.before, `mkdir -p ${shellWord(plan.dir)}`];
  for (const [name, text] of Object.entries(plan.units)) {
    lines.push(`cat > ${shellWord(join(plan.dir, name))} <<'PROCCTL_UNIT'`, text.replace(/\n$/, ''), 'PROCCTL_UNIT');
  }
  for (const c of plan.commands) lines.push(c.map(shellWord).join(' '));
  return `${lines.join('\n')}\n`;
}

/** Run `procctl daemon install ARGS`; returns the exit status. */
export function daemonInstall(args: string[], env: NodeJS.ProcessEnv = process.env): number {
  let values: { user?: boolean; system?: boolean; ui?: boolean; 'ui-port'?: string; 'dry-run'?: boolean };
  try {
    ({ values } = parseArgs({
      args,
      options: { user: { type: 'boolean' }, system: { type: 'boolean' }, ui: { type: 'boolean' }, 'ui-port': { type: 'string' }, 'dry-run': { type: 'boolean' } },
      strict: true,
      allowPositionals: false,
    }));
  } catch (err) {
    throw new UsageError(`${(err as Error).message.split('\n')[0]}\n${USAGE}`);
  }
  if (values.user && values.system) throw new UsageError(`--user and --system exclude each other\n${USAGE}`);
  if (values['ui-port'] !== undefined && !values.ui) throw new UsageError(`--ui-port goes with --ui\n${USAGE}`);
  const uiPort = values['ui-port'] === undefined ? UI_PORT : Number(values['ui-port']);
  if (!/^\d+$/.test(values['ui-port'] ?? '1') || uiPort < 1 || uiPort > 65535) throw new UsageError(`--ui-port takes a TCP port (1-65535), not ${values['ui-port']}\n${USAGE}`);
  const root = process.getuid?.() === 0;
  const kind = values.system ? 'system' : values.user ? 'user' : root ? 'system' : 'user';
  if (!values.user && !values.system) note(`procctl: installing the ${kind} service (${root ? 'root' : 'not root'}; --user or --system to choose)`);
  const plan = installPlan(kind, env, packageRoot(), values.ui ? { port: uiPort } : undefined);
  const missing = values['dry-run'] ? 'asked for a dry run' : systemdMissing(kind, env);
  if (missing) {
    note(`procctl: ${missing}: nothing was written. This script would install the units and start the socket (run it with \`| sh\`${kind === 'system' ? ' as root' : ''}):`);
    process.stdout.write(installScript(plan));
    return EXIT.ok;
  }
  if (kind === 'system' && !root) throw new UsageError(`writing ${plan.dir} needs root: run \`sudo procctl daemon install --system\`, or --user for a service of your own`);
  if (plan.before.length > 0) {
    note(`procctl: the system service runs jobs as the user procctl, which does not exist yet; create it first (docs/systemd.md says why it needs a home and a login shell):\n  ${plan.before.join('\n  ')}`);
    return EXIT.failed;
  }
  mkdirSync(plan.dir, { recursive: true });
  for (const [name, text] of Object.entries(plan.units)) {
    const file = join(plan.dir, name);
    writeFileSync(`${file}.tmp`, text);
    renameSync(`${file}.tmp`, file);
    out(`wrote ${file}`);
  }
  for (const c of plan.commands) {
    const r = spawnSync(c[0], c.slice(1), { stdio: 'inherit', env });
    if (r.status !== 0) {
      note(`procctl: \`${c.join(' ')}\` failed (${r.error?.message ?? `exit ${r.status ?? r.signal}`}); the units are written, run it again once that is fixed`);
      return EXIT.failed;
    }
    out(`ran ${c.join(' ')}`);
  }
  const socket = kind === 'user' ? '' : ' --socket /run/procctl/procctl.sock';
  out(`procctld starts on the first connection: ${kind === 'user' ? '`procctl status`' : `\`sudo -u procctl procctl${socket} status\``}${kind === 'user' ? '; `loginctl enable-linger $USER` keeps it running while you are logged out' : ''}`);
  if (values.ui) out(`the console serves http://127.0.0.1:${uiPort}/; ${kind === 'user' ? '`procctl ui --link`' : `\`sudo -u procctl procctl${socket} ui --link\``} prints a link to open it (one use each)`);
  return EXIT.ok;
}
