/**
 * The node flags procctld runs with, wherever it is started: bin/procctld's first line carries
 * them (`env -S`), and so do the systemd unit `procctl daemon install` writes, the daemon an MCP
 * client starts, and the bench's and tests' daemons (test/unit/base/node-flags.test.ts holds
 * them together). A planned restart's new image is started with the old one's flags.
 *
 * `--min-semi-space-size=16`: V8 shrinks an idle process's young generation (the collection after
 * a quiet spell sees a low allocation rate) and lets it grow back only as the objects surviving
 * its collections add up, which a daemon answering polls, whose garbage dies young, does not do
 * for minutes. A daemon that had idled then made 182-229 young collections where it made 15-44
 * before it (60,000 requests; docs/benchmarks.md), each a pause for every client. 16 MB a
 * semi-space is what V8 lets a busy process reach here anyway: a busy daemon is as it was, and an
 * idle one keeps that young generation (about 30 MB) instead of giving it back.
 */
export const DAEMON_NODE_FLAGS: readonly string[] = ['--min-semi-space-size=16'];
