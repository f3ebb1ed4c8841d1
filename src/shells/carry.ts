import { z } from 'zod';
import { SessionLimitsSchema } from '../base/session-limits.js';

/** A terminal shell's cut sent and not yet seen on the terminal, what was held of the output meanwhile, and the end it follows (shells/cuts.ts). */
const CutSchema = z.object({ text: z.string(), held: z.string(), status: z.tuple([z.string(), z.string()]), /** the spare cut a crash's adoption sent, not yet taken by an end */ spare: z.boolean().optional() });

/**
 * A shell as a planned restart hands it to the next image (SPEC §19, §20): what the daemon knew
 * of it. A persistent shell's process is handed on beside this as any job is (its session and
 * its descriptors, daemon/handover/schema.ts), and its running command as a carried session; a
 * review shell is only this (its state text), its running command a review session like any.
 */
export const CarriedShellSchema = z.object({
  name: z.string(),
  scope: z.string(),
  settings: z.object({
    workdir: z.string(),
    env: z.record(z.string(), z.string()),
    pty: z.boolean(),
    elevated: z.boolean(),
    stdin: z.enum(['pipe', 'null']),
    limits: SessionLimitsSchema.nullable().default(null),
    review: z.boolean(),
  }),
  cwd: z.string(),
  commands: z.number().int().min(0),
  createdAt: z.number(),
  lastUsedAt: z.number(),
  /** A persistent shell: what it had read of its end records (fd 61), not yet a whole one. */
  pending: z.string().default(''),
  /** A terminal shell: the cut sent and not yet seen on the terminal, what was held of the output meanwhile, and the end it follows. */
  cut: CutSchema.optional(),
  /** The cuts sent after that one, in order (after a crash, the probe's can follow a command's at once). */
  later: z.array(CutSchema).optional(),
  /** The command running in it: its session (carried beside, by id), whether it was interrupted, its timeout. */
  running: z.object({ sessionId: z.string(), interrupted: z.boolean(), timeoutSec: z.number().min(0) }).optional(),
  /** Taken back after a crash and not yet answered its probe (shell.ts settleAfterCrash): the probe, and the command taken back with it. */
  settling: z.object({ probe: z.string(), command: z.string().optional(), /** its line reads the spare cut itself when no end took it (shells/cuts.ts) */ takesSpare: z.boolean().optional(), /** commands sent since the probe line */ sent: z.number().int().min(0).optional(), /** the directory its end record said */ cwd: z.string().optional() }).optional(),
  /** A review shell: bash's state after its last command (shells/review.ts), and whether the last one ended it. */
  review: z.object({ state: z.string(), lost: z.boolean(), runningId: z.string().optional() }).optional(),
});
export type CarriedShell = z.infer<typeof CarriedShellSchema>;
