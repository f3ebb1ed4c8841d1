import { readFileSync } from 'node:fs';
import { waitFor, type TestDaemon } from './daemon.js';
import { TestClient } from './rpc.js';

/** The operator's side of a request to a test daemon: scope "*" and the approver credential beside its socket. */
export function operator(d: TestDaemon): Record<string, string> {
  return { scope: '*', approverToken: readFileSync(`${d.socket}.approver`, 'utf8').trim() };
}

/** `daemon.status`, asked on a connection of its own. */
export async function daemonStatus(d: TestDaemon): Promise<any> {
  const c = await TestClient.connect(d.socket);
  try {
    return await c.call('daemon.status');
  } finally {
    c.close();
  }
}

/**
 * Ask for a planned restart (SPEC §19) as the operator and wait until the new image serves, its
 * planned restarts counted past `before`; the restart's answer. A refusal throws with its message.
 */
export async function restartAndWait(d: TestDaemon, before = 0, timeoutMs = 45_000): Promise<any> {
  const c = await TestClient.connect(d.socket);
  const r = await c.request('daemon.restart', operator(d));
  c.close();
  if (r.error) throw new Error(`restart refused: ${r.error.message}`);
  try {
    await waitFor(
      async () => {
        try {
          return (await daemonStatus(d)).restarts.planned > before;
        } catch {
          return false;
        }
      },
      { what: 'the new image to serve', timeoutMs },
    );
  } catch (err) {
    // Within a test's own time-out (60 s), so that what the daemon said last is in the failure.
    throw new Error(`${(err as Error).message}; the daemon (pid ${d.proc.pid}, ${d.proc.exitCode === null ? 'running' : `exited ${d.proc.exitCode ?? d.proc.signalCode}`}) said last:\n${d.stderr().slice(-3000)}`);
  }
  return r.result;
}
