import { beforeAll, describe, expect, it } from 'vitest';
import type { TestClient } from '../helpers/rpc.js';
import { cliDaemon, type CliDaemon } from './run.js';

let run: CliDaemon['run'];
let c: TestClient;
cliDaemon((x) => ({ run, c } = x));

const COUNT = 60;
/** Session ids, newest first. */
let newestFirst: string[];

/** The ids in the table's rows, top to bottom. */
const rowIds = (stdout: string) =>
  stdout
    .trimEnd()
    .split('\n')
    .slice(1)
    .map((l) => l.split(/\s+/)[0]);

beforeAll(async () => {
  const ids: string[] = [];
  for (let i = 0; i < COUNT; i++) ids.push((await c.exec({ command: `echo ${i}`, stdin: 'null' })).sessionId);
  newestFirst = ids.reverse();
});

describe('procctl ps paging', () => {
  it('shows the newest 50 by default and says how many are hidden and how to see them', async () => {
    const r = await run(['ps']);
    expect(r.code).toBe(0);
    expect(r.stdout.split('\n')[0]).toMatch(/^ID\s+STATUS\s+PID\s+RUNTIME\s+(CPU\s+MEM\s+)?NAME$/);
    expect(rowIds(r.stdout)).toEqual(newestFirst.slice(0, 50));
    expect(r.stderr.trim()).toBe(`10 of ${COUNT} sessions not shown; \`procctl ps --all\` shows every one, \`procctl ps --offset 50\` the next page.`);
  });

  it('--all shows every session and no note', async () => {
    const r = await run(['ps', '--all']);
    expect(r.code).toBe(0);
    expect(rowIds(r.stdout)).toEqual(newestFirst);
    expect(r.stderr).toBe('');
  });

  it('--limit N shows the newest N', async () => {
    const r = await run(['ps', '--limit', '5']);
    expect(r.code).toBe(0);
    expect(rowIds(r.stdout)).toEqual(newestFirst.slice(0, 5));
    expect(r.stderr).toContain(`55 of ${COUNT} sessions not shown`);
    expect(r.stderr).toContain('`procctl ps --offset 5 --limit 5` the next page');
  });

  it('--offset N skips the newest N; at the end there is no next page', async () => {
    const r = await run(['ps', '--offset', '55']);
    expect(r.code).toBe(0);
    expect(rowIds(r.stdout)).toEqual(newestFirst.slice(55));
    expect(r.stderr.trim()).toBe(`55 of ${COUNT} sessions not shown; \`procctl ps --all\` shows every one.`);
  });

  it('--offset past the end says so', async () => {
    const r = await run(['ps', '--offset', '500']);
    expect(r.code).toBe(0);
    expect(r.stdout.trim()).toBe(`No sessions at offset 500; the scope has ${COUNT}.`);
  });

  it('--json prints the raw result', async () => {
    const r = await run(['--json', 'ps', '--limit', '2']);
    expect(r.code).toBe(0);
    const json = JSON.parse(r.stdout);
    expect(json).toMatchObject({ total: COUNT, offset: 0, limit: 2 });
    expect(json.sessions.map((s: any) => s.sessionId)).toEqual(newestFirst.slice(0, 2));
    expect(r.stderr).toBe('');
  });

  it('refuses --all with --limit, and a limit that is not a whole number (exit 2)', async () => {
    expect((await run(['ps', '--all', '--limit', '3'])).code).toBe(2);
    const bad = await run(['ps', '--limit', '-1']);
    expect(bad.code).toBe(2);
    expect(bad.stderr).toContain('--limit');
  });
});
