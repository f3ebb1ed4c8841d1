import { z } from 'zod';

/**
 * What `daemon.status.restarts` counts (SPEC §19), carried from image to image in a planned
 * restart's hand-over: planned restarts and those after a crash, the last one's time (ms since
 * the epoch) and length, the sessions adopted and lost. One schema: the hand-over reads it, the
 * tools' `RestartCounts` is its type.
 */
export const RestartsSchema = z.object({
  planned: z.number().int().min(0),
  crash: z.number().int().min(0),
  lastAt: z.number().nullable(),
  lastMs: z.number().nullable(),
  adopted: z.number().int().min(0),
  lost: z.number().int().min(0),
});
export type Restarts = z.infer<typeof RestartsSchema>;
