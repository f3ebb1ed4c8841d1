import type { Command } from 'commander';

/**
 * Every `procctl` command: its name, the summary `procctl --help` lists, and how to load its file.
 * Only the command being run is loaded (the CLI starts in about the time node does); the others
 * are listed by name and summary alone. A test checks each summary against its command's own.
 */
export interface CommandEntry {
  name: string;
  summary: string;
  load(): Promise<(program: Command) => void>;
}

export const COMMANDS: readonly CommandEntry[] = [
  { name: 'exec', summary: 'run a command as if locally (output, stdin, Ctrl-C), or leave it running (--bg, --yield)', load: () => import('./exec.js').then((m) => m.registerExec) },
  { name: 'shells', summary: "list the scope's persistent shells", load: () => import('./shells.js').then((m) => m.registerShells) },
  { name: 'shell', summary: 'close a persistent shell (shell close NAME)', load: () => import('./shells.js').then((m) => m.registerShell) },
  { name: 'ps', summary: 'list the sessions of the scope, newest first', load: () => import('./ps.js').then((m) => m.registerPs) },
  { name: 'poll', summary: 'print the output no poll has returned yet', load: () => import('./poll.js').then((m) => m.registerPoll) },
  { name: 'wait', summary: 'sleep until any (--all: every one) of the sessions has ended or needs an answer', load: () => import('./wait.js').then((m) => m.registerWait) },
  { name: 'log', summary: "page a session's output by lines, or follow it (-f)", load: () => import('./log.js').then((m) => m.registerLog) },
  { name: 'write', summary: "write DATA to a session's stdin", load: () => import('./write.js').then((m) => m.registerWrite) },
  { name: 'send-keys', summary: 'type named keys into a terminal (pty) session', load: () => import('./send-keys.js').then((m) => m.registerSendKeys) },
  { name: 'paste', summary: 'paste text into a terminal (pty) session', load: () => import('./paste.js').then((m) => m.registerPaste) },
  { name: 'submit', summary: 'press Enter in a session', load: () => import('./submit.js').then((m) => m.registerSubmit) },
  { name: 'resume', summary: 'answer the question a session is waiting on, or its approval (of a command, or of its held changes)', load: () => import('./resume.js').then((m) => m.registerResume) },
  { name: 'approvals', summary: 'list the approvals waiting for you to answer, in every scope your credential reaches', load: () => import('./approvals.js').then((m) => m.registerApprovals) },
  { name: 'policy', summary: 'explain how the approval rules judge a command, running nothing', load: () => import('./policy.js').then((m) => m.registerPolicy) },
  { name: 'rules', summary: "list remembered answers (numbered) and the config's approval rules", load: () => import('./rules.js').then((m) => m.registerRules) },
  { name: 'attach', summary: 'connect this terminal to a terminal (pty) session; Ctrl-] detaches', load: () => import('./attach.js').then((m) => m.registerAttach) },
  { name: 'signal', summary: "deliver one signal to a session's process group", load: () => import('./signal.js').then((m) => m.registerSignal) },
  { name: 'pause', summary: 'freeze every process of a session (continue lets it run on)', load: () => import('./pause.js').then((m) => m.registerPause) },
  { name: 'continue', summary: 'let a paused session run on', load: () => import('./pause.js').then((m) => m.registerContinue) },
  { name: 'kill', summary: "stop a session's whole process group (or --all)", load: () => import('./kill.js').then((m) => m.registerKill) },
  { name: 'changes', summary: "show what a review session changed in its workspaces (held until you apply it)", load: () => import('./changes.js').then((m) => m.registerChanges) },
  { name: 'apply', summary: "write a review session's changes into the workspace", load: () => import('./changes.js').then((m) => m.registerApply) },
  { name: 'discard', summary: "drop a review session's changes; the workspace stays as it is", load: () => import('./changes.js').then((m) => m.registerDiscard) },
  { name: 'undo', summary: 'put back what an apply replaced', load: () => import('./changes.js').then((m) => m.registerUndo) },
  { name: 'clear', summary: 'forget a finished session', load: () => import('./clear.js').then((m) => m.registerClear) },
  { name: 'rm', summary: 'kill a session if it is running, then forget it', load: () => import('./rm.js').then((m) => m.registerRm) },
  { name: 'events', summary: "stream the scope's session events, one line each", load: () => import('./events.js').then((m) => m.registerEvents) },
  { name: 'checkpoint', summary: 'report progress from inside a running job', load: () => import('./checkpoint.js').then((m) => m.registerCheckpoint) },
  { name: 'tool', summary: 'send a whole tool call object, e.g. {"tool":"exec","command":"ls"}', load: () => import('./tool.js').then((m) => m.registerTool) },
  { name: 'tools', summary: 'list the tools the daemon offers (--json: with their JSON Schemas)', load: () => import('./tools.js').then((m) => m.registerTools) },
  { name: 'history', summary: 'sessions from the audit trail, long after they were forgotten; history ID tells one whole', load: () => import('./history.js').then((m) => m.registerHistory) },
  { name: 'audit', summary: 'check that the audit trail is whole (verify)', load: () => import('./audit.js').then((m) => m.registerAudit) },
  { name: 'status', summary: 'show whether the daemon is up, and its session counts', load: () => import('./status.js').then((m) => m.registerStatus) },
  { name: 'daemon', summary: 'run procctld in the foreground (same options as procctld), or install it as a systemd service', load: () => import('./daemon.js').then((m) => m.registerDaemon) },
  { name: 'mcp', summary: 'serve the exec and process tools over the Model Context Protocol (stdio)', load: () => import('./mcp.js').then((m) => m.registerMcp) },
  { name: 'ui', summary: "serve the person's console: every scope's sessions, approvals and changes, live, in a browser", load: () => import('./ui.js').then((m) => m.registerUi) },
  { name: 'dial-stdio', summary: "connect stdin/stdout to this host's daemon, byte for byte (what --host runs over ssh)", load: () => import('./dial-stdio.js').then((m) => m.registerDialStdio) },
];
