import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { Session } from '../session/session.js';
import { stopSession, type StopOptions } from '../runner/stop.js';
import type { ShellSettings } from './shell.js';
import { ansiQuote } from './quote.js';

/** Where a review shell's command leaves the shell's state, in its own scratch directory. */
const STATE_FILE = '.shell-state';

/**
 * Variables that are bash's own (read-only, or reset by every bash), the wrapper's, or the
 * session's (PROCCTL_*): never carried from one command to the next.
 */
const NOT_CARRIED =
  'BASH|BASHOPTS|BASHPID|BASH_ALIASES|BASH_ARG*|BASH_CMDS|BASH_COMMAND|BASH_EXECUTION_STRING|BASH_LINENO|BASH_SOURCE|BASH_SUBSHELL|BASH_VERSINFO|BASH_VERSION|' +
  'COMP_WORDBREAKS|DIRSTACK|EPOCHREALTIME|EPOCHSECONDS|EUID|FUNCNAME|GROUPS|HISTCMD|HOSTTYPE|LINENO|MACHTYPE|OPTERR|OPTIND|OSTYPE|PIPESTATUS|PPID|PWD|' +
  'RANDOM|SECONDS|SHELLOPTS|SHLVL|SRANDOM|UID|_|PROCCTL_*|__procctl_*';

/**
 * The job a review shell's command is: bash restores the shell's state (its directory,
 * variables, functions, aliases, options, umask) quietly, runs the command's text with `eval`,
 * then writes the state as it is now to its scratch directory and exits with the command's `$?`.
 * A variable is carried when the commands made it differ from what the session's environment
 * gave (so the session's own PROCCTL_*, proxy and credential variables are always its own), and
 * one they unset is unset again. `exit` in the command ends before the state is written: the
 * shell's state is gone, as a persistent shell's is.
 */
export function reviewScript(state: string, command: string, cwd: string): string {
  const body = [
    'shopt -s expand_aliases',
    'declare -A __procctl_env0; for __procctl_n in $(compgen -e); do __procctl_env0[$__procctl_n]=${!__procctl_n}; done',
    `{ builtin cd -- ${ansiQuote(cwd)}; builtin eval ${ansiQuote(state)}; } >/dev/null 2>&1`,
    `builtin eval ${ansiQuote(command)}`,
    // In braces with their stderr gone: under a restored `set -x` the wrapper's own lines are not traced into the output.
    '{ __procctl_s=$?; } 2>/dev/null',
    '{',
    '  builtin printf "builtin cd -- %q\\n" "$PWD"',
    '  for __procctl_n in $(compgen -v); do',
    `    case $__procctl_n in ${NOT_CARRIED}) continue ;; esac`,
    '    if [[ -v __procctl_env0[$__procctl_n] && ${__procctl_env0[$__procctl_n]} == "${!__procctl_n}" ]]; then continue; fi',
    // Restored by eval at the script's top level, so a plain declare makes a global again.
    '    builtin declare -p "$__procctl_n"',
    '  done',
    '  for __procctl_n in "${!__procctl_env0[@]}"; do [[ -v $__procctl_n ]] || builtin printf "builtin unset %q\\n" "$__procctl_n"; done',
    '  builtin declare -f; builtin alias -p; builtin shopt -p; builtin set +o; builtin umask -p',
    `} >"$PROCCTL_TMPDIR/${STATE_FILE}.new" 2>/dev/null && command mv -f "$PROCCTL_TMPDIR/${STATE_FILE}.new" "$PROCCTL_TMPDIR/${STATE_FILE}"`,
    '{ builtin exit "$__procctl_s"; } 2>/dev/null',
  ].join('\n');
  // Run by the daemon's shell, which may be a POSIX sh: quoted for it, not as bash's $'…'.
  return `exec bash --noprofile --norc -c '${body.replaceAll("'", "'\\''")}' bash`;
}

/**
 * A shell in review mode (SPEC §16 and §20): each command is a review session of its own (its
 * own overlay, its changes held, applied or discarded as any review session's), run by a bash
 * of its own that starts from the shell's state and leaves the state as the command left it. So
 * the shell lives on as its state, not as one process; see docs/shells.md.
 */
export class ReviewShell {
  createdAt = Date.now();
  readonly review = true;
  lastUsedAt = Date.now();
  commands = 0;
  cwd: string;
  /** bash's state after the last command that ended with one: run before the next command. */
  state = '';
  private running: Session | undefined;
  private closed = false;

  constructor(
    readonly name: string,
    readonly scope: string,
    readonly settings: ShellSettings,
  ) {
    this.cwd = settings.workdir;
  }

  get pid(): number | undefined {
    return this.running?.pid;
  }

  get alive(): boolean {
    return !this.closed;
  }

  get busy(): Session | undefined {
    return this.running;
  }

  /**
   * The command `session` (started with `reviewScript`) runs now; once it ends, its state is the
   * shell's. Resolves `true` when it ended without leaving a state (`exit`, a shell option that
   * ended it): the shell's state is gone, and the next command says so.
   */
  track(session: Session, counted = true): Promise<boolean> {
    this.running = session;
    if (counted) this.commands++;
    this.lastUsedAt = Date.now();
    return session.finished.then(() => {
      if (this.running === session) this.running = undefined;
      this.lastUsedAt = Date.now();
      let text: string | undefined;
      try {
        text = session.tmpdir ? readFileSync(join(session.tmpdir, STATE_FILE), 'utf8') : undefined;
      } catch {
        text = undefined;
      }
      if (text === undefined) {
        // Stopped by a kill or a timeout: the state is as it was before this command. Ended by itself: gone.
        if (session.stop) return false;
        this.state = '';
        this.cwd = this.settings.workdir;
        return true;
      }
      this.state = text;
      const first = text.slice(0, text.indexOf('\n'));
      this.cwd = unquoteCd(first) ?? this.cwd;
      return false;
    });
  }

  /** Close the shell: a command running in it is stopped as any session is. */
  async close(reason: StopOptions['reason'] = 'user', graceMs = 1000): Promise<void> {
    this.closed = true;
    const running = this.running;
    if (running?.running) await stopSession(running, { reason, signal: 'SIGTERM', graceMs });
  }
}

/** The directory from the state's first line (`builtin cd -- DIR`, DIR as bash's printf %q wrote it). */
function unquoteCd(line: string): string | undefined {
  const prefix = 'builtin cd -- ';
  if (!line.startsWith(prefix)) return undefined;
  const quoted = line.slice(prefix.length);
  // %q writes a plain path as is and escapes the rest with backslashes, or as $'…' when it holds control characters.
  if (quoted.startsWith("$'")) return undefined;
  return quoted.replace(/\\(.)/g, '$1');
}
