import type { ProcessParams } from '../../schema/process.js';
import type { CallContext, Daemon } from '../context.js';
import { interruptView } from '../../interrupt/watcher.js';
import { changesNote, checkpointView, endLine, interruptText, networkNote, networkView } from '../render.js';
import { sessionResources } from '../../runner/cgroup.js';
import { askPorts } from '../../runner/ports.js';
import { target } from './target.js';
import { jsonAnswer, LARGE_TEXT } from '../json-answer.js';
import { JsonText } from '../json-text.js';
import type { Resources } from '../../cgroup/session.js';
import type { Voice } from '../../schema/voice.js';
import type { Session } from '../../session/session.js';

/** A poll's answer: the result's fields, or, for a large output, the same as JSON bytes. */
type PollAnswer = Record<string, unknown> | JsonText;

const MAX_WAIT_MS = 120_000;

/** How soon to poll again (SPEC §6): 1 s after new output, then backing off while polls find none. */
const BACKOFF_MS = [1000, 5000, 10_000, 30_000, 60_000];

/** `quietPolls`: polls in a row, this one included, that found no new output (0 when this one found some). */
export function retryInMs(quietPolls: number): number {
  return BACKOFF_MS[Math.min(Math.max(quietPolls - 1, 0), BACKOFF_MS.length - 1)];
}

/** A run of NULs at least this long is said in a poll's text by its length (the output carries them). */
const NUL_RUN = 16;
const NUL_RUNS = new RegExp(`\0{${NUL_RUN},}`, 'g');

/**
 * The output as the text shows it: a run of NUL characters is said as `[N NUL characters]`, not
 * written out. JSON escapes a NUL in six bytes, so a job printing zeros made every poll's text
 * another 180 kB for a client to parse, for nothing a model or a person can read; `output` still
 * carries every character, and the count says how many.
 */
export function nulRuns(text: string): string {
  return text.includes('\0'.repeat(NUL_RUN)) ? text.replace(NUL_RUNS, (run) => `[${run.length} NUL characters]`) : text;
}

/**
 * Not async: a poll that does not wait is answered in the turn it was read, as a list is
 * (rpc/connection.ts: an answer at hand is never in flight). As an async function every poll was
 * a promise, held in the connection's map of requests in flight until answered: a set and a
 * delete per poll, whose table the long-lived map holds and the collector moves to the old
 * generation.
 */
export function pollAction(d: Daemon, ctx: CallContext, p: ProcessParams): PollAnswer | Promise<PollAnswer> {
  const s = target(d, ctx, p);
  const wait = Math.min(p.timeout ?? 0, MAX_WAIT_MS);
  if (wait > 0 && s.running && !s.interrupt && !s.output.hasPending) return s.waitForChange(wait, ctx.cancellation).then(() => pollAnswer(ctx, s));
  return pollAnswer(ctx, s);
}

/**
 * A quiet poll's answer as made for a session, and what it was made from: while none of that
 * moves, the next quiet poll of it in the same voice is the same bytes, and is answered with them.
 */
interface KeptPoll {
  voice: Voice;
  /** The session's revision (every change of what it shows but its output and running time) and its output count. */
  revision: number;
  outputChars: number;
  /** Its usage sample (replaced when read again with other figures, never changed) and the retry it advised. */
  resources: Resources | undefined;
  retryInMs: number | undefined;
  answer: JsonText;
}

const keptPolls = new WeakMap<Session, KeptPoll>();

/**
 * What a poll answers now: the output since the last one, and what to do next. A poll that finds
 * nothing new (an agent polling a quiet session, most polls of a thousand) gives the answer kept
 * from the last one when nothing it says has changed: the result is neither made nor serialized
 * again, a third of what the daemon's thread spent on such a poll besides the write itself.
 */
function pollAnswer(ctx: CallContext, s: Session): PollAnswer {
  const v = ctx.voice;
  const drained = s.drain();
  // Both are looked at (and held) before the answer is chosen: a first look may change what the session shows.
  const resources = sessionResources(s);
  askPorts(s);
  // Which way the text ends: a question still open, a running session (with how soon to poll again), or its end.
  const asking = s.interrupt !== undefined && s.endedAt === undefined;
  const retry = !asking && s.running ? retryInMs(s.notePoll(drained.text !== '')) : undefined;
  const quiet = drained.text === '' && drained.dropped.stdout === 0 && drained.dropped.stderr === 0;
  if (quiet) {
    const k = keptPolls.get(s);
    if (k && k.voice === v && k.revision === s.revision && k.outputChars === s.output.totalChars && k.resources === resources && k.retryInMs === retry) return k.answer;
  }
  const result = freshAnswer(v, s, drained, resources, asking, retry);
  if (!quiet || result instanceof JsonText) return result;
  const answer = new JsonText(JSON.stringify(result));
  keptPolls.set(s, { voice: v, revision: s.revision, outputChars: s.output.totalChars, resources, retryInMs: retry, answer });
  return answer;
}

/** The answer made anew. */
function freshAnswer(v: Voice, s: Session, drained: ReturnType<Session['drain']>, resources: Resources | undefined, asking: boolean, retry: number | undefined): PollAnswer {
  const notes: string[] = [];
  for (const stream of ['stdout', 'stderr'] as const) {
    const n = drained.dropped[stream];
    if (n > 0) notes.push(`[${n} characters of ${stream} were dropped before this poll: more arrived than the pending cap holds; ${v.call({ action: 'log', sessionId: s.id })} has the newest retained output]`);
  }
  // The text: what goes before the output (notes, said first), the output, what goes after it.
  const lines = [...notes];
  const after: string[] = [];
  const result: Record<string, unknown> = { status: s.status, sessionId: s.id, output: drained.text };
  if (notes.length) result.droppedChars = drained.dropped;
  const network = networkView(s);
  if (network) {
    result.network = network;
    lines.unshift(networkNote(s).replace(/\n$/, ''));
  }
  const checkpoint = checkpointView(s.lastCheckpoint);
  if (checkpoint) {
    result.checkpoint = checkpoint;
    lines.unshift(`[checkpoint: ${checkpoint.name} at ${checkpoint.at}]`);
  }
  if (resources) result.resources = resources;
  if (s.ports.length > 0) {
    result.ports = s.ports;
    lines.unshift(`[listening on ${s.ports.map((p) => (p.address.includes(':') ? `[${p.address}]:${p.port}` : `${p.address}:${p.port}`)).join(', ')}${s.running ? '' : ' when last seen'}]`);
  }
  if (s.paused) {
    result.paused = true;
    after.push(`Session ${s.id} is paused; ${v.call({ action: 'continue', sessionId: s.id })} lets it run on.`);
  }
  if (s.interrupt) result.interrupt = interruptView(s.interrupt);
  // A review session's changes (SPEC §16): pending, none, applied... or, ended a moment ago, still being read.
  if (s.changes) result.changes = s.changes;
  // An ended session may still ask about its held changes (SPEC §16): how it ended, then the question.
  if (asking) {
    after.push(interruptText(s, v));
  } else if (retry !== undefined) {
    if (!drained.text) after.push('(no new output)');
    result.retryInMs = retry;
    after.push(`Session ${s.id} is still running; poll again in about ${Math.round((result.retryInMs as number) / 1000)}s with ${v.call({ action: 'poll', sessionId: s.id })}, or wait for it to end with ${v.call({ action: 'wait', sessionIds: [s.id] })}.`);
  } else {
    Object.assign(result, { exitCode: s.exitCode, signal: s.signal, reason: s.reason ?? null });
    after.push(endLine(s, v));
    // Its question, where a rule holds its changes for a person; else what it holds and the next step.
    if (s.interrupt) after.push(interruptText(s, v));
    else {
      const held = changesNote(s, v).trim();
      if (held) after.push(held);
    }
  }
  const body = nulRuns(drained.text.replace(/\n$/, ''));
  if (drained.text.length < LARGE_TEXT) {
    result.text = (drained.text ? [...lines, body, ...after] : [...lines, ...after]).join('\n');
    return result;
  }
  // A large output (a fast job's pending output, escaped up to six bytes a character) goes out
  // as JSON bytes made a slice at a time (json-answer.ts); the same answer, field for field.
  const { output, ...fields } = result;
  const join = (a: string[], edge: 'before' | 'after') => (a.length === 0 ? '' : edge === 'before' ? `${a.join('\n')}\n` : `\n${a.join('\n')}`);
  return jsonAnswer(fields, [
    ['output', [output as string]],
    ['text', [join(lines, 'before'), body, join(after, 'after')]],
  ]);
}
