import { z } from 'zod';

/** Largest `data` a checkpoint may carry, serialised. */
export const MAX_CHECKPOINT_BYTES = 16 * 1024;

export const CheckpointParamsSchema = z.strictObject({
  sessionId: z.string().min(1).describe('The session reporting progress (PROCCTL_SESSION_ID in its environment).'),
  name: z.string().min(1).max(200).describe('What was reached, e.g. "migrated" or "epoch-3".'),
  data: z
    .unknown()
    .optional()
    .refine((d) => d === undefined || JSON.stringify(d).length <= MAX_CHECKPOINT_BYTES, {
      message: `data must serialise to at most ${MAX_CHECKPOINT_BYTES} bytes`,
    })
    .describe('Any JSON value describing the progress.'),
});

export type CheckpointParams = z.output<typeof CheckpointParamsSchema>;
