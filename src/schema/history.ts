import { z } from 'zod';

/** A time in `history`: an ISO 8601 timestamp, or how long ago (`90s`, `30m`, `2h`, `7d`). */
const When = z
  .string()
  .refine((v) => timeOf(v, Date.now()) !== undefined, { message: 'must be an ISO 8601 time (2026-11-27T06:00:00Z) or how long ago: a number and s, m, h or d (2h, 7d)' });

const UNITS: Record<string, number> = { s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000 };

/** The ISO time a `since`/`until` names, or undefined when it names none. */
export function timeOf(v: string, now: number): string | undefined {
  const ago = /^(\d+(?:\.\d+)?)([smhd])$/.exec(v);
  if (ago) return new Date(now - Number(ago[1]) * UNITS[ago[2]]).toISOString();
  if (!/^\d{4}-\d{2}-\d{2}/.test(v)) return undefined;
  const t = Date.parse(v);
  return Number.isNaN(t) ? undefined : new Date(t).toISOString();
}

/** `history` (SPEC §18): sessions from the audit trail, newest first, paged. */
export const HistoryParamsSchema = z.strictObject({
  since: When.optional().describe('Sessions started at or after this time (ISO 8601, or 2h, 7d ago).'),
  until: When.optional().describe('Sessions started at or before this time.'),
  ofScope: z.string().min(1).optional().describe('Only this scope\'s sessions (an operator\'s request, scope "*"; a scope always sees its own only).'),
  status: z.enum(['running', 'approval_required', 'completed', 'failed', 'denied']).optional().describe('Only sessions that ended so (running: no end on record).'),
  grep: z.string().min(1).max(1000).optional().describe('Only sessions whose command, workdir, id or scope holds this text (case-insensitive).'),
  sessionId: z.string().min(1).max(64).optional().describe("One session's whole story: its records in order."),
  offset: z.number().int().min(0).default(0),
  limit: z.number().int().min(1).max(1000).default(50),
});
export type HistoryParams = z.output<typeof HistoryParamsSchema>;

/** `audit.verify` takes nothing but who asks. */
export const VerifyParamsSchema = z.strictObject({});
