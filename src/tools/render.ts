import { promptShown } from '../interrupt/prompt.js';
import { interruptView } from '../interrupt/watcher.js';
import { sessionResources } from '../runner/cgroup.js';
import type { Checkpoint, Interrupt, InterruptOutcome, Session } from '../session/session.js';
import { ANSWER, cliVoice, NUMBER, RPC, SECRET, type ResumeAnswer, type Voice } from '../schema/voice.js';

export const RUNNING_TAIL_CHARS = 2000;
export const LIST_TAIL_CHARS = 200;

const iso = (ms: number | undefined) => (ms === undefined ? undefined : new Date(ms).toISOString());

/**
 * An instant of `owner` as ISO text, kept with the owner: toISOString costs about a microsecond,
 * and `list` formats the same instants of every session on its page at every call. The number
 * is checked, so an instant that changed is formatted again.
 */
const keptIso = new WeakMap<object, { ms: number; text: string }[]>();
function isoOf(owner: object, slot: number, ms: number | undefined): string | undefined {
  if (ms === undefined) return undefined;
  let kept = keptIso.get(owner);
  if (kept === undefined) keptIso.set(owner, (kept = []));
  const hit = kept[slot];
  if (hit !== undefined && hit.ms === ms) return hit.text;
  const text = new Date(ms).toISOString();
  kept[slot] = { ms, text };
  return text;
}

/** One line saying how a finished session ended, in words a model or a person (voice) can act on. */
export function endLine(s: Session, v: Voice = RPC): string {
  if (s.status === 'denied') return deniedLine(s);
  const how = s.signal ? `signal ${s.signal}` : `code ${s.exitCode}`;
  switch (s.reason) {
    case undefined:
      return `Process exited with code ${s.exitCode}.`;
    case 'signal':
      return `Process exited with signal ${s.signal}.`;
    case 'cpu_limit':
      return `Process used up its CPU time limit (limits.cpuSeconds) and was killed by SIGXCPU; exited with ${how}.`;
    case 'file_size_limit':
      return `Process wrote past its file size limit (limits.fileSizeBytes) and was killed by SIGXFSZ; exited with ${how}.`;
    case 'memory_limit':
      return `Process reached the session's memory limit (limits.memoryBytes of the session) and the kernel killed it; exited with ${how}.`;
    case 'process_limit':
      return `Process could not start more processes: the session reached its process limit (limits.processes of the session); exited with ${how}.`;
    case 'command_not_found':
      return 'Process exited with code 127: command not found (check the spelling and that it is installed).';
    case 'not_executable':
      return 'Process exited with code 126: the command is not executable (check its permissions).';
    case 'spawn_error':
      return `Process could not start: ${s.error}.`;
    case 'timeout':
      return `Process timed out and was stopped (${s.stop?.signal}, then SIGKILL after the grace); exited with ${how}.`;
    case 'lost':
      return s.error
        ? `Process was lost: ${s.error}; what survived was terminated. Output up to then is in ${v.call({ action: 'log', sessionId: s.id })}.`
        : `Process was lost: the daemon stopped without stopping it (a crash or SIGKILL); what survived was terminated when the daemon came back. Output up to then is in ${v.call({ action: 'log', sessionId: s.id })}.`;
    case 'user':
      return `Process was stopped by kill (${s.stop?.signal}); exited with ${how}.`;
    default:
      return `Process was stopped (${s.reason}); exited with ${how}.`;
  }
}

/** Why a session never ran (status `denied`, SPEC §8). */
function deniedLine(s: Session): string {
  const why = s.denial ?? 'no reason given';
  switch (s.reason) {
    case 'refused':
      return `Denied: its approval was refused (${why}). Nothing ran.`;
    case 'expired':
      return `Denied: its approval was not given in time (${why}). Nothing ran.`;
    case 'user':
      return `Denied: withdrawn by kill while it waited for approval (${why}). Nothing ran.`;
    default:
      return `Denied by an approval rule: ${why}. Nothing ran.`;
  }
}

/** The note that says what a cap dropped, or ''. */
/** `network: {denied: [{host, count, reason}]}` when its proxy refused something (SPEC §12). */
export function networkView(s: Session): { denied: { host: string; count: number; reason: string }[] } | undefined {
  const denied = s.networkDenied;
  return denied.length > 0 ? { denied } : undefined;
}

/** What its proxy refused, one line per host, so the reader knows what to ask the operator to allow. */
export function networkNote(s: Session): string {
  return s.networkDenied.map((d) => `[blocked ${d.host}: ${d.reason}${d.count > 1 ? ` (${d.count} times)` : ''}]\n`).join('');
}

export function droppedNote(s: Session): string {
  const dropped = s.output.droppedChars;
  if (dropped === 0) return '';
  return `[${dropped} earlier characters of output were dropped by the ${s.output.capChars}-character cap; the newest are shown]\n`;
}

/**
 * The fields every view of a session shares (`list`, `kill`, `remove`). Fields without a value
 * are undefined rather than absent, so every record has one shape; JSON leaves them out.
 */
export function sessionRecord(s: Session, tailChars = LIST_TAIL_CHARS) {
  const running = s.running;
  // A session waiting for its approval has neither run nor ended.
  const ended = s.endedAt !== undefined;
  const dropped = s.output.droppedChars;
  return {
    sessionId: s.id,
    status: s.status,
    name: s.name,
    command: s.command,
    pid: s.pid ?? null,
    cwd: s.cwd,
    pty: s.pty,
    startedAt: isoOf(s, 0, s.startedAt),
    endedAt: isoOf(s, 1, s.endedAt),
    runtimeMs: s.runtimeMs,
    // Right after runtimeMs: the two figures that move by themselves (process list keeps the rest as bytes, tools/process/list.ts).
    resources: sessionResources(s),
    exitCode: ended ? s.exitCode : undefined,
    signal: ended ? s.signal : undefined,
    reason: s.reason,
    key: s.key,
    // The persistent shell it is a command of (SPEC §20): the console shows it under its shell.
    shell: s.shell === undefined ? undefined : { name: s.shell },
    tail: s.output.tail(tailChars),
    truncated: dropped > 0,
    droppedChars: dropped,
    interrupt: interruptView(s.interrupt),
    pastInterrupts: s.pastInterrupts.length ? s.pastInterrupts.map(pastInterruptView) : undefined,
    checkpoint: checkpointView(s.lastCheckpoint),
    checkpoints: ended ? s.checkpoints.map(checkpointView) : undefined,
    network: networkView(s),
    // The TCP ports it listens on (SPEC §20; the last seen once it ended), when it has any.
    ports: s.ports.length > 0 ? s.ports : undefined,
    // Frozen by process pause (SPEC §15); its status stays what it was.
    paused: s.paused || undefined,
    // Review mode (SPEC §16): held, pending until applied or discarded.
    changes: s.changes,
    // How the rules judged it (SPEC §8), and what its waitFor waits for (SPEC §5).
    decision: s.decision,
    readiness: s.readiness && { waitingFor: s.readiness.waitingFor, ready: s.readiness.readyAt !== undefined, readyAt: s.readiness.readyAt === undefined ? undefined : new Date(s.readiness.readyAt).toISOString() },
    // As the stop file says it: the text given to kill (else who stopped it), and who did.
    stop: s.stop && {
      reason: s.stop.note ?? s.stop.reason,
      by: s.stop.reason,
      signal: s.stop.signal,
      requestedAt: isoOf(s, 2, s.stop.at),
      graceful: running || s.stop.escalated === undefined ? undefined : !s.stop.escalated,
    },
  };
}

function pastInterruptView(i: InterruptOutcome) {
  return { ...i, createdAt: iso(i.createdAt), endedAt: iso(i.endedAt) };
}

/** How to answer a pending interrupt, in words a model or a person (voice) can act on. */
export function interruptText(s: Session, v: Voice = RPC): string {
  const i = s.interrupt;
  if (!i) return '';
  if (i.kind === 'approval') return approvalText(s, i, v);
  if (i.kind === 'changes') return changesApprovalText(s, i, v);
  const resume = (input: ResumeAnswer) => v.call({ action: 'resume', sessionId: s.id, input });
  const how =
    i.kind === 'confirm'
      ? `${resume({ confirm: true })} or ${resume({ confirm: false })}`
      : i.kind === 'select'
        ? `${resume({ text: NUMBER })} (options: ${i.fields[0]?.options?.map((o) => `${o.value}) ${o.label}`).join(', ')})`
        : i.kind === 'secret'
          ? `${resume({ text: SECRET })} (it is not echoed)`
          : resume({ text: ANSWER });
  // On a pipe many programs ask without a prompt: say how to see the question.
  const unseen = !s.pty && !promptShown(s.output.tail(200))
    ? ` It printed no prompt line: on a pipe, many programs show none (bash's read -p among them); to see its question, run it again with ${v.execOption('pty', true)}.`
    : '';
  return `Session ${s.id} is waiting for input (${i.kind}): "${i.reason}".${unseen} Answer once with ${how}, or ${resume({ eof: true })} to close its input. It expires at ${iso(i.expiresAt)}.`;
}

/** How a pending approval is answered: by a person, once (SPEC §8); a model is told to wait, not how to answer it. */
function approvalText(s: Session, i: Interrupt, v: Voice): string {
  const head = `Session ${s.id} has not started: it needs approval before it runs (${i.reason}).`;
  const until = `Unanswered, it is denied at ${iso(i.expiresAt)}.`;
  // A person at the command line is the one who decides.
  if (v.name === 'cli') {
    const yes = v.call({ action: 'resume', sessionId: s.id, input: { confirm: true } });
    const no = v.call({ action: 'resume', sessionId: s.id, input: { confirm: false } });
    return `${head} Nothing has run yet. Approve it with ${yes}, refuse it with ${no}. ${until}`;
  }
  const person = cliVoice(s.scope);
  const yes = person.call({ action: 'resume', sessionId: s.id, input: { confirm: true } });
  const no = person.call({ action: 'resume', sessionId: s.id, input: { confirm: false } });
  const poll = v.call({ action: 'poll', sessionId: s.id });
  return `${head} A person decides: tell the user what it is for and wait; they answer with ${yes} or ${no} (or in their MCP client). ${poll} shows when it starts. ${until}`;
}

/** How a changes approval is answered (SPEC §16): by a person; a model is told to wait, not how to apply what it wrote. */
function changesApprovalText(s: Session, i: Interrupt, v: Voice): string {
  const head = `The changes of session ${s.id} wait for a person's approval before they reach the workspace:\n${i.reason}`;
  const until = `Unanswered by ${iso(i.expiresAt)}, the question expires and the changes stay held until a person applies or discards them.`;
  if (v.name === 'cli') {
    const yes = v.call({ action: 'resume', sessionId: s.id, input: { confirm: true } });
    const no = v.call({ action: 'resume', sessionId: s.id, input: { confirm: false } });
    return `${head}\nSee the diff with ${v.call({ action: 'changes', sessionId: s.id })}; apply them with ${yes}, discard them with ${no}. ${until}`;
  }
  const person = cliVoice(s.scope);
  const yes = person.call({ action: 'resume', sessionId: s.id, input: { confirm: true } });
  const no = person.call({ action: 'resume', sessionId: s.id, input: { confirm: false } });
  return `${head}\nA person decides: tell the user what the command changed and why, and wait; they apply with ${yes} or discard with ${no} (or answer in their MCP client). ${v.call({ action: 'changes', sessionId: s.id })} shows the diff; ${v.call({ action: 'poll', sessionId: s.id })} shows what became of them. ${until}`;
}

export function checkpointView(c: Checkpoint | undefined) {
  return c && { name: c.name, data: c.data, at: isoOf(c, 0, c.at) };
}

export type SessionRecord = ReturnType<typeof sessionRecord>;

/** What ended an exec's wait with the command still running (SPEC §20): its yield, or quiet (yieldOnQuietMs). */
export type Yielded = { by: 'time' } | { by: 'quiet'; quietMs: number | undefined };

/** The result of an exec call for a session in whatever state it is in, its text in the reader's voice. */
export function execResult(s: Session, warnings: string[] = [], v: Voice = RPC, yielded?: Yielded) {
  const base = { sessionId: s.id, name: s.name, ...(warnings.length ? { warnings } : {}) };
  const warningText = warnings.map((w) => `[warning: ${w}]\n`).join('');
  if (s.awaitingApproval) return { status: s.status, ...base, interrupt: interruptView(s.interrupt), text: warningText + interruptText(s, v) };
  if (s.status === 'denied') return { status: s.status, ...base, reason: s.reason, text: warningText + endLine(s, v) };
  const r = s.readiness;
  const readiness = r ? { ready: r.readyAt !== undefined } : {};
  if (s.running) {
    // Still going, or waiting for an answer: what it asks (or how to follow it), then its last output.
    const tail = s.output.tail(RUNNING_TAIL_CHARS);
    const readyLine = !r
      ? ''
      : r.readyAt !== undefined
        ? `Ready: ${r.waitingFor} (${seconds(r.readyAt - s.startedAt)} after it started).\n`
        : `Not ready yet: ${r.waitingFor} was not seen in ${seconds(s.runtimeMs)}; it is still being watched (a ready event is sent when it holds).\n`;
    const what = s.interrupt
      ? interruptText(s, v)
      : readyLine +
        `Command still running (session ${s.id}, pid ${s.pid}). ` +
        `${v.call({ action: 'poll', sessionId: s.id })} for new output, ${v.call({ action: 'write', sessionId: s.id })} to send input, ` +
        `${v.call({ action: 'kill', sessionId: s.id })} to stop it.`;
    const network = networkView(s);
    const quietLine = yielded?.by === 'quiet' ? `No output for ${yielded.quietMs} ms (yieldOnQuietMs), so this answer did not wait longer. ` : '';
    return {
      status: s.status,
      ...base,
      ...(yielded ? { yielded: yielded.by } : {}),
      ...(network ? { network } : {}),
      ...(s.ports.length > 0 ? { ports: s.ports } : {}),
      ...(s.changes ? { changes: s.changes } : {}),
      pid: s.pid ?? null,
      startedAt: iso(s.startedAt),
      ...(s.interrupt ? { interrupt: interruptView(s.interrupt) } : {}),
      ...readiness,
      tail,
      text: `${warningText}${networkNote(s)}${quietLine}${what}${tail ? `\n--- last output ---\n${tail}` : ''}`,
    };
  }
  const network = networkView(s);
  const output = s.output.text();
  const body = output.length ? output.replace(/\n$/, '') : '(no output)';
  let footer = '';
  if (s.status === 'failed') footer = `\n\n(${endLine(s, v)})`;
  else if (s.exitCode !== 0) footer = `\n\n(Command exited with code ${s.exitCode})`;
  if (r && r.readyAt === undefined) footer += `\n(It ended before ${r.waitingFor}.)`;
  return {
    status: s.status,
    ...base,
    exitCode: s.exitCode,
    ...(s.status === 'failed' ? { signal: s.signal, reason: s.reason } : {}),
    durationMs: s.runtimeMs,
    output,
    truncated: s.output.droppedChars > 0,
    droppedChars: s.output.droppedChars,
    ...readiness,
    ...(network ? { network } : {}),
    ...(s.changes ? { changes: s.changes } : {}),
    ...(s.interrupt ? { interrupt: interruptView(s.interrupt) } : {}),
    text: warningText + networkNote(s) + droppedNote(s) + body + footer + changesNote(s, v),
  };
}

/** A review session's end: what it holds and the next step (SPEC §16), on a line of its own; nothing for other sessions. */
export function changesNote(s: Session, v: Voice): string {
  const c = s.changes;
  if (!c || s.running) return '';
  // Ended a moment ago, what it wrote still being read (Session.settling): said, not left blank.
  if (s.settling) return `\n(Review: what it wrote is being read; ${v.call({ action: 'wait', sessionIds: [s.id] })} answers once its changes are held.)`;
  if (!c.pending) return c.state === 'none' ? '\n(Review: it changed nothing in its workspace.)' : '';
  if (s.interrupt?.kind === 'changes') return `\n\n${interruptText(s, v)}`;
  return `\n(Review: its ${c.files} changed path${c.files === 1 ? '' : 's'} (${c.bytes} bytes) are held, not in the workspace; see them with ${v.call({ action: 'changes', sessionId: s.id })}, then ${v.call({ action: 'apply', sessionId: s.id })} or ${v.call({ action: 'discard', sessionId: s.id })}.)`;
}

/** The one-line summary of a backgrounded session's exit (SPEC §6, notifyOnExit). */
export function exitSummary(s: Session): string {
  const last = lastLine(s.output.tail(400));
  let head: string;
  if (s.status === 'completed') head = `Exec completed (${s.id}, code ${s.exitCode})`;
  else if (s.signal) head = `Exec failed (${s.id}, signal ${s.signal}${s.reason && s.reason !== 'signal' ? `, ${s.reason}` : ''})`;
  else if (s.reason === 'spawn_error') head = `Exec failed (${s.id}, ${s.error})`;
  else head = `Exec failed (${s.id}, code ${s.exitCode}${s.reason ? `, ${s.reason}` : ''})`;
  return last ? `${head} :: ${last}` : head;
}

function lastLine(text: string): string {
  const lines = text.split('\n');
  for (let i = lines.length - 1; i >= 0; i--) {
    const line = lines[i].trim();
    if (line) return line.length > 200 ? `${line.slice(0, 199)}…` : line;
  }
  return '';
}

/** A duration for text: "850 ms", "12.3 s". */
function seconds(ms: number): string {
  return ms < 1000 ? `${Math.round(ms)} ms` : `${(ms / 1000).toFixed(1)} s`;
}
