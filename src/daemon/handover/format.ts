/**
 * The hand-over's format and what an image carries (SPEC §19), in a module of their own: the
 * pre-flight (preflight.ts) says them without loading the schema, or anything of the daemon.
 */
export const HANDOVER_FORMAT = 1;

/**
 * What this image can take over besides sessions on pipes, said by `procctld --handover-format`
 * after its format and version: an image that does not name a kind (an older one) is never handed
 * a session of that kind, the restart is refused instead. `terminal-tap`: a terminal whose output
 * goes through a pipe to its spool (runner/launch/tap.ts), which an image that reads terminals from
 * their master would not read first.
 */
export const CARRIES = ['terminal', 'terminal-tap', 'sandbox', 'review', 'credentials', 'shells'] as const;
