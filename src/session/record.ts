import { z } from 'zod';
import { ExecParamsSchema } from '../schema/exec.js';

/**
 * The session record on disk (SPEC §10), defined once: the types a Session uses for what it keeps
 * (interrupts, checkpoints, its stop request, the exec a pending approval starts) come from these
 * schemas, and so does the check a record passes before it is restored.
 */

const finite = z.number().refine(Number.isFinite, 'must be a finite number');

export const InterruptFieldSchema = z.object({
  name: z.string(),
  type: z.enum(['confirm', 'text', 'secret', 'select']),
  label: z.string(),
  required: z.boolean(),
  options: z.array(z.object({ value: z.string(), label: z.string() })).optional(),
});
export type InterruptField = z.infer<typeof InterruptFieldSchema>;

/**
 * A question the session is waiting on (SPEC §7), the approval it waits for before it starts
 * (§8), or, once it ended, the approval its held changes wait for (`changes`, §16).
 */
export const InterruptSchema = z.object({
  id: z.string(),
  kind: z.enum(['confirm', 'text', 'secret', 'select', 'approval', 'changes']),
  reason: z.string(),
  fields: z.array(InterruptFieldSchema),
  createdAt: finite,
  expiresAt: finite,
});
export type Interrupt = z.infer<typeof InterruptSchema>;

/** What became of an interrupt. */
export const InterruptOutcomeSchema = z.object({
  id: z.string(),
  kind: InterruptSchema.shape.kind,
  reason: z.string(),
  createdAt: finite,
  endedAt: finite,
  outcome: z.enum(['answered', 'expired', 'ended']),
});
export type InterruptOutcome = z.infer<typeof InterruptOutcomeSchema>;

export const CheckpointSchema = z.object({ name: z.string(), data: z.unknown().optional(), at: finite });
export type Checkpoint = z.infer<typeof CheckpointSchema>;

export const StopReasonSchema = z.enum(['user', 'timeout', 'replaced', 'cancelled', 'shutdown', 'expired']);
/** Who or what stopped a session (SPEC §9). */
export type StopReason = z.infer<typeof StopReasonSchema>;

export const StopRequestSchema = z.object({
  reason: StopReasonSchema,
  signal: z.string() as z.ZodType<NodeJS.Signals>,
  at: finite,
  note: z.string().optional(),
  /** True when SIGKILL was needed: the job did not stop within the grace. */
  escalated: z.boolean().optional(),
});
export type StopRequest = z.infer<typeof StopRequestSchema>;

/**
 * What an unstarted session runs once its approval is given (SPEC §8): the exec params as they
 * were checked when it was asked for, and the working directory they resolved to.
 */
export const PendingExecSchema = z.object({
  params: ExecParamsSchema,
  cwd: z.string(),
  /** The rule that asked (its position in approvals.rules), for the log; absent when the scope's elevated policy asked. */
  rule: z.number().int().optional(),
  /** A part of it said "review" (SPEC §16): approved, it runs in review mode and its changes wait for a person. */
  review: z.string().optional(),
});
export type PendingExec = z.infer<typeof PendingExecSchema>;

export const SessionStatusSchema = z.enum(['running', 'waiting_input', 'approval_required', 'completed', 'failed', 'denied']);

/**
 * Why a session failed or was denied: a stop, something about the command itself, or a denial
 * (`rule`, `refused`, `expired`, `user`: SPEC §8).
 */
export const FailReasonSchema = z.enum([
  ...StopReasonSchema.options,
  'command_not_found',
  'not_executable',
  'signal',
  'cpu_limit',
  'file_size_limit',
  'memory_limit',
  'process_limit',
  'spawn_error',
  'lost',
  'rule',
  'refused',
]);

/** What a session used (SPEC §15), from its cgroup: a held sample while it runs, read once at its end. */
export const ResourcesSchema = z.object({
  cpuMs: finite,
  memoryBytes: finite,
  memoryPeakBytes: finite,
  processes: finite,
});
export type Resources = z.infer<typeof ResourcesSchema>;

const SpoolCountsSchema = z.object({
  totalBytes: finite,
  droppedBytes: finite,
  dropped: z.object({ rotated: finite, budget: finite, fault: finite }).optional(),
  fault: z.string().optional(),
});

/** A TCP port one of its processes listens on (SPEC §20), and the address it listens at (`0.0.0.0`, `::`, `127.0.0.1`). */
export const ListenPortSchema = z.object({ address: z.string(), port: z.number().int().min(0).max(65535) });
export type ListenPort = z.infer<typeof ListenPortSchema>;

/** A session as written to the state directory: version 1, the same fields since SPEC §10 landed. */
export const SessionRecordSchema = z.object({
  v: z.literal(1),
  id: z.string().regex(/^[a-z0-9]{1,32}$/),
  scope: z.string(),
  command: z.string(),
  name: z.string(),
  cwd: z.string(),
  key: z.string().optional(),
  stdin: z.enum(['pipe', 'null']),
  pty: z.boolean().default(false),
  status: SessionStatusSchema,
  startedAt: finite,
  endedAt: finite.optional(),
  exitCode: finite.nullable(),
  signal: z.string().nullable(),
  reason: FailReasonSchema.optional(),
  error: z.string().optional(),
  /** Why a denied session never ran. */
  denial: z.string().optional(),
  /** How the approval rules judged it (SPEC §8). */
  decision: z.object({ action: z.string(), part: z.string(), rule: z.number().int().optional(), reason: z.string() }).optional(),
  stop: StopRequestSchema.optional(),
  backgrounded: z.boolean().default(false),
  pid: z.number().int().optional(),
  /** The leader's start time (clock ticks since boot), so a reused PID is never mistaken for it. */
  pidStartTime: finite.optional(),
  checkpoints: z.array(CheckpointSchema),
  /** Destinations its network proxy refused (SPEC §12). */
  networkDenied: z.array(z.object({ host: z.string(), count: finite, reason: z.string() })).optional(),
  interrupt: InterruptSchema.optional(),
  pastInterrupts: z.array(InterruptOutcomeSchema),
  /** A pending approval's exec (status `approval_required`): what starts once it is given. */
  pendingExec: PendingExecSchema.optional(),
  output: z.object({ retained: z.string(), dropped: finite, total: finite, pending: z.string() }),
  spool: SpoolCountsSchema.optional(),
  /** What it used, where it had a cgroup (SPEC §15). */
  resources: ResourcesSchema.optional(),
  /** The TCP ports it was last seen listening on (SPEC §20). */
  ports: z.array(ListenPortSchema).optional(),
  /** Taken over by a daemon after the one that started it crashed (SPEC §19): its exit may not have been observable. */
  adopted: z.literal('crash').optional(),
  /** Why it ended with neither exitCode nor signal though its job exited (adopted after a crash, on a kernel that could not tell: docs/durability.md). */
  exitUnknown: z.string().optional(),
});
export type SessionRecord = z.infer<typeof SessionRecordSchema>;

/** A parsed record, or why it is not one (a torn or foreign file), naming the first field at fault. */
export function parseRecord(raw: unknown): { record: SessionRecord } | { problem: string } {
  const r = SessionRecordSchema.safeParse(raw);
  if (r.success) return { record: r.data };
  const issue = r.error.issues[0];
  return { problem: `not a session record: ${issue.path.join('.') || 'the record'}: ${issue.message}` };
}
