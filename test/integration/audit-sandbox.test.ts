import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { homedir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startDaemon, type TestDaemon } from '../helpers/daemon.js';
import type { TestClient } from '../helpers/rpc.js';
import { SKIP_SANDBOX } from './sandbox-support.js';

// Jobs cannot read or write the audit trail (SPEC §18): it is under the state directory, hidden in the sandbox.
// The state directory is outside /tmp (which the sandbox replaces anyway), where the rest of the host is readable.
const base = mkdtempSync(join(existsSync('/var/tmp') ? '/var/tmp' : homedir(), 'procctl-audit-sbx-'));
const stateDir = join(base, 'state');
const trail = join(stateDir, 'audit', 'audit-1.jsonl');
writeFileSync(join(base, 'visible'), 'a file beside the state directory\n');

let d: TestDaemon;
let c: TestClient;

describe.skipIf(SKIP_SANDBOX)('the audit trail inside the sandbox', () => {
  beforeAll(async () => {
    d = await startDaemon({ env: { PROCCTL_STATE_DIR: stateDir }, config: { sandbox: { mode: 'workspace-write', workspaces: [base] } } });
    c = await d.client();
  });
  afterAll(async () => {
    c?.close();
    await d?.stop();
    rmSync(base, { recursive: true, force: true });
  });

  it('a sandboxed job can neither read nor append to the trail, while the host reads it and the job reads its neighbour', async () => {
    await c.exec({ command: 'echo first', workdir: base });
    await c.call('history', {});
    expect(readFileSync(trail, 'utf8')).toContain('"command":"echo first"');
    const r = await c.exec({
      command: `cat ${base}/visible && echo neighbour=read; cat ${trail} && echo trail=read; ls ${join(stateDir, 'audit')} && echo listed; printf '%s%s\\n' FOR GED >> ${trail} && echo trail=written; true`,
      workdir: base,
      yieldMs: 30_000,
      stdin: 'null',
    });
    expect(r.status).toBe('completed');
    expect(r.output).toContain('neighbour=read');
    expect(r.output).not.toContain('trail=read');
    expect(r.output).not.toContain('listed');
    expect(r.output).not.toContain('trail=written');
    expect(r.output).not.toContain('"command"');
    // The command is on record (history flushes what the trail batched); what it would have appended
    // (FOR and GED joined) is not.
    await c.call('history', {});
    expect(readFileSync(trail, 'utf8')).toContain('FOR GED');
    expect(readFileSync(trail, 'utf8')).not.toContain('FORGED');
  });
});
