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
export async function restartAndWait(d: TestDaemon, before = 0, timeoutMs = 60_000): Promise<any> {
  const c = await TestClient.connect(d.socket);
  const r = await c.request('daemon.restart', operator(d));
  c.close();
  if (r.error) throw new Error(`restart refused: ${r.error.message}`);
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
  return r.result;
}
