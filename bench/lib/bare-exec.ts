/**
 * The floor of the exec round trip for any daemon on this transport, in a process of its own:
 * `node bare-exec.js SOCKET FILE SHELL ARG...` listens on a Unix socket, and for every NDJSON
 * request line starts SHELL with the ARGs and the request's `params.command` through procctl's
 * own spawner (native/spawn.c: vfork, stdin on a socketpair, stdout and stderr on pipes, as the
 * daemon starts a job), reads both pipes to their end and waits for the exit, then answers with
 * the JSON-RPC result held in FILE (the daemon's answer to the same exec), its id put in. The same
 * socket, spawn, job and answer bytes, with none of the daemon's work (its policy, session,
 * cgroup, spool, records and trail). Prints `ready` once it listens.
 */
import { closeSync, readFileSync } from 'node:fs';
import { Socket } from 'node:net';
import { envPairs, nativeSpawner, posixSpawn } from '../../src/runner/native.js';
import { serveLines } from './line-server.js';

const [socketPath, resultFile, shell, ...args] = process.argv.slice(2);
const held = readFileSync(resultFile, 'utf8').trim();
const addon = nativeSpawner();
if (addon instanceof Error) throw addon;

// Made once, as the daemon makes the inherited part of a job's environment once (runner/env.ts JobEnv).
const env = envPairs(process.env);

serveLines(socketPath, (req, conn) => run(String(req.params?.command), () => conn.write(`{"jsonrpc":"2.0","id":${JSON.stringify(req.id)},"result":${held}}\n`)));

/** Start the command, and call `done` once it has exited and both its pipes have ended. */
function run(command: string, done: () => void): void {
  let left = 3;
  const settle = () => {
    if (--left > 0) return;
    done();
    // Its input, never written to, is let go once it ended (as the daemon does).
    closeSync(child.stdin);
  };
  const child = posixSpawn(addon as Exclude<typeof addon, Error>, shell, [shell, ...args, command], env, process.cwd(), false, settle);
  for (const fd of [child.stdout, child.stderr]) new Socket({ fd, readable: true, writable: false }).on('data', () => undefined).once('close', settle);
}
