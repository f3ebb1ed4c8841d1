import { afterAll, describe, expect, it } from 'vitest';
import { startDaemon, stopAllDaemons } from '../helpers/daemon.js';

afterAll(stopAllDaemons);

describe('smoke', () => {
  it('runs a command and reports its exit code', async () => {
    const d = await startDaemon();
    const c = await d.client();
    const r = await c.exec({ command: 'echo hi; exit 3' });
    expect(r.status).toBe('completed');
    expect(r.exitCode).toBe(3);
    expect(r.text).toContain('(Command exited with code 3)');
    c.close();
    expect(await d.stop()).toBe(0);
  });
});
