import { describe, expect, it } from 'vitest';
import { waitFor } from '../helpers/daemon.js';
import { cliDaemon, type CliDaemon } from './run.js';

let x: CliDaemon;
cliDaemon((shared) => (x = shared));

describe('procctl ps: the PORTS column (SPEC §20)', () => {
  it('shows the port a session listens on, and no column when none listens', async () => {
    const quiet = await x.run(['exec', '--bg', '--', 'sleep 60']);
    expect(quiet.code).toBe(0);
    const before = await x.run(['ps']);
    expect(before.stdout.split('\n')[0]).not.toContain('PORTS');
    const r = await x.run(['--json', 'exec', '--bg', '--', `exec node -e "const s = require('net').createServer().listen(0, '127.0.0.1', () => console.log('port', s.address().port))"`]);
    const id = JSON.parse(r.stdout).sessionId as string;
    const port = Number((await waitFor(async () => /port (\d+)/.exec((await x.run(['log', id])).stdout), { what: 'the port' }))[1]);
    const ps = await waitFor(async () => {
      const out = (await x.run(['ps'])).stdout;
      return out.includes(`127.0.0.1:${port}`) ? out : undefined;
    }, { what: 'ps to show the port' });
    const [head, ...rows] = ps.split('\n');
    expect(head).toMatch(/^ID\s+STATUS\s+PID\s+RUNTIME\s+(CPU\s+MEM\s+)?PORTS\s+NAME$/);
    expect(rows.find((l) => l.startsWith(id))).toContain(`127.0.0.1:${port}`);
    const sleeper = rows.find((l) => l.includes('sleep'))!;
    expect(sleeper.split(/\s+/).slice(-3, -1)).toContain('-');
    await x.run(['kill', '--all']);
  });
});
