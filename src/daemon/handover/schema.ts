import { z } from 'zod';
import { RestartsSchema } from '../../schema/restarts.js';
import { CarriedSessionSchema } from '../../session/carry.js';
import { ResourcesSchema } from '../../session/record.js';
import { CarriedShellSchema } from '../../shells/carry.js';
import { HANDOVER_FORMAT } from './format.js';

/**
 * What one daemon image hands the next in a planned restart (SPEC §19), as one versioned schema:
 * every resource that outlives the image is named here (or in the parts it takes from the
 * session and the runner), so a field that is not carried is visibly not carried. The next image
 * reads this format only; another is refused with a message, never half read.
 */
export { CARRIES, HANDOVER_FORMAT } from './format.js';

const fd = z.number().int().min(0);

/** A running session's job as the runner hands it over (runner/handover.ts HandedJob). */
export const HandedJobSchema = z.object({
  ends: z.union([
    /** `pidfd`: a job adopted after a crash, its leader's pidfd (how it ended, once its new parent reaped it: runner/native.ts). */
    z.object({ pid: z.number().int().positive(), stdout: fd, stderr: fd, stdin: z.number().int().min(-1), stdinId: z.string().optional(), pidfd: fd.optional() }),
    /** A job on a terminal: the pseudo-terminal's master and the job's side's name (runner/launch/pty.ts adoptPty). */
    z.object({
      pid: z.number().int().positive(),
      terminal: fd,
      pts: z.string(),
      pidfd: fd.optional(),
      /** The pipe its output goes through to the spool (runner/launch/tap.ts): read first by the next image; absent from an image that read the master. */
      tap: z.object({ read: fd, write: fd.optional() }).optional(),
    }),
  ]),
  stdinQueued: z.number().int().min(0),
  timeoutSec: z.number().min(0),
  killGraceMs: z.number().min(0),
  limits: z.array(z.tuple([z.enum(['cpu', 'as', 'nofile', 'nproc', 'fsize']), z.number(), z.number()])),
  cgroup: z.object({ v2: z.string().optional(), v1: z.record(z.string(), z.string()) }).optional(),
  sandboxed: z.boolean().optional(),
  /** A confined job's channels (daemon/channel.ts): the daemon's end of each, and the proxy's listening sockets with its policy. */
  channels: z
    .object({
      checkpoint: z.object({ control: fd.optional(), listeners: z.array(fd).optional() }).optional(),
      proxy: z
        .object({
          control: fd.optional(),
          listeners: z.array(fd).optional(),
          policy: z.object({ allow: z.array(z.string()), deny: z.array(z.string()) }),
          /** The placeholders of the credentials its proxy writes in (SPEC §21): never their values, which the next image reads from its config. */
          credentials: z.array(z.object({ name: z.string().min(1), hosts: z.array(z.string()), placeholder: z.string().min(1) })).optional(),
        })
        .optional(),
    })
    .optional(),
});

/** What `daemon.status.restarts` counts, carried from image to image (one schema with the tools' RestartCounts). */
export { RestartsSchema, type Restarts } from '../../schema/restarts.js';

export const HandoverSchema = z.object({
  format: z.literal(HANDOVER_FORMAT),
  from: z.object({
    version: z.string(),
    pid: z.number().int(),
    at: z.number(),
    /** When each step of the old image ended (ms since the epoch) and the CPU it had used, for the restart's timeline (docs/durability.md). */
    steps: z.record(z.string(), z.number()).optional(),
    cpuMs: z.number().optional(),
  }),
  /** The listening socket, kept open all along: clients that connect meanwhile wait in its backlog. */
  listen: z.object({ fd, activated: z.boolean() }),
  /** Clients that connected during the hand-over, unread: their requests are answered by the next image. */
  clients: z.array(fd).default([]),
  /** The guardian keeps watching: its pipe and table go on (daemon/guardian-link.ts). */
  guardian: z.object({ pid: z.number().int(), pipe: fd, table: fd, /** Where it keeps sessions' descriptors for a crash (handover/crash.ts). */ keep: fd.optional() }).optional(),
  /** The approver credential the daemon made beside its socket (SPEC §8): clients that read it keep it. */
  approver: z.string().optional(),
  restarts: RestartsSchema,
  /** What the old image checked just before the exec, for the config as it reads now: the sandbox's probe (sandbox/host.ts sandboxCheckKey), not run again. */
  checked: z
    .object({
      sandbox: z.string().optional(),
      /**
       * Review mode's probe as the old image last found it (sandbox/overlay.ts), with the host's
       * print then (sandbox/host-print.ts) and the image's version: the new image of the same
       * version on the same host takes it rather than mount a trial overlay again.
       */
      review: z.object({ version: z.string(), print: z.string(), review: z.boolean(), how: z.enum(['overlayfs', 'overlayfs in a user namespace']).optional(), reason: z.string().optional() }).optional(),
    })
    .optional(),
  /**
   * Each running session, its job's ends, and the usage sample the old image held for it (runner/
   * cgroup.ts), so the new image's first `daemon.status` or `list` answers from it rather than read
   * every session's cgroup again first. Optional: an image that held none, or an older one, sends none.
   */
  sessions: z.array(z.object({ session: CarriedSessionSchema, job: HandedJobSchema, usage: ResourcesSchema.optional() })),
  /** The persistent shells (SPEC §20): a shell's own process as a job, its running command as a session; a review shell as its state. */
  shells: z.array(z.object({ shell: CarriedShellSchema, box: z.object({ session: CarriedSessionSchema, job: HandedJobSchema }).optional(), command: CarriedSessionSchema.optional() })).default([]),
});
export type Handover = z.infer<typeof HandoverSchema>;

/** The environment variable that tells a new image where its hand-over is; set only for the exec. */
export const HANDOVER_ENV = 'PROCCTL_HANDOVER';

/**
 * The descriptors a hand-over file names, read leniently (any format): they are kept open at
 * start so that a hand-over the image cannot read still has its processes' ends, to stop them
 * as lost rather than leave them to a closed pipe.
 */
export function namedDescriptors(raw: unknown): number[] {
  const out: number[] = [];
  const add = (v: unknown) => {
    if (typeof v === 'number' && Number.isInteger(v) && v > 2) out.push(v);
  };
  const h = raw as { listen?: { fd?: unknown }; clients?: unknown[]; guardian?: { pipe?: unknown; table?: unknown; keep?: unknown }; sessions?: { job?: { ends?: { stdout?: unknown; stderr?: unknown; stdin?: unknown; terminal?: unknown; pidfd?: unknown; tap?: { read?: unknown; write?: unknown } }; channels?: Record<string, { control?: unknown; listeners?: unknown[] } | undefined> } }[] };
  add(h?.listen?.fd);
  if (Array.isArray(h?.clients)) for (const c of h.clients) add(c);
  add(h?.guardian?.pipe);
  add(h?.guardian?.table);
  add(h?.guardian?.keep);
  if (Array.isArray(h?.sessions)) for (const s of h.sessions) for (const v of [s?.job?.ends?.stdout, s?.job?.ends?.stderr, s?.job?.ends?.stdin, s?.job?.ends?.terminal, s?.job?.ends?.pidfd]) add(v);
  // A persistent shell's own process is a job like a session's.
  const shells = (raw as { shells?: { box?: (typeof h.sessions & object)[number] }[] })?.shells;
  const jobs = [...(Array.isArray(h?.sessions) ? h.sessions : []), ...(Array.isArray(shells) ? shells.flatMap((s) => (s?.box ? [s.box] : [])) : [])];
  for (const s of jobs) for (const v of [s?.job?.ends?.stdout, s?.job?.ends?.stderr, s?.job?.ends?.stdin, s?.job?.ends?.terminal, s?.job?.ends?.pidfd, s?.job?.ends?.tap?.read, s?.job?.ends?.tap?.write]) add(v);
  if (Array.isArray(h?.sessions))
    for (const s of jobs)
      for (const ch of Object.values(s?.job?.channels ?? {})) {
        add(ch?.control);
        if (Array.isArray(ch?.listeners)) for (const fd of ch.listeners) add(fd);
      }
  return out;
}

/** A hand-over, or why this image cannot read it (another format, a torn file), in words. */
export function parseHandover(raw: unknown): { handover: Handover } | { problem: string } {
  const format = (raw as { format?: unknown })?.format;
  if (format !== HANDOVER_FORMAT) {
    return { problem: `the hand-over is in format ${JSON.stringify(format)} and this image reads format ${HANDOVER_FORMAT}` };
  }
  // Read once per image: checked without compiling a parser for it first (zod's JIT, worth it only for a schema parsed many times).
  const r = HandoverSchema.safeParse(raw, { jitless: true });
  if (r.success) return { handover: r.data };
  const issue = r.error.issues[0];
  return { problem: `the hand-over is not readable: ${issue.path.join('.') || 'the hand-over'}: ${issue.message}` };
}
