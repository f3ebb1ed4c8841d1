import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { cliDaemon, type CliDaemon } from './run.js';

let run: CliDaemon['run'];
cliDaemon((x) => ({ run } = x));

describe('procctl exec --shell, shells, shell close', () => {
  it('keeps the directory and variables between commands, lists the shell and closes it', async () => {
    const work = mkdtempSync(join(tmpdir(), 'procctl-cli-shell-'));
    const first = await run(['exec', '--shell', 'dev', '--cwd', work, '--', 'mkdir -p api && cd api && export STAGE=test']);
    expect(first.code).toBe(0);
    const second = await run(['exec', '--shell', 'dev', '--', 'echo "$STAGE $PWD"; exit_code() { return 3; }; exit_code']);
    expect(second.stdout).toBe(`test ${join(work, 'api')}\n`);
    expect(second.code).toBe(3);
    const listed = await run(['shells']);
    expect(listed.stdout).toMatch(/^NAME\s+STATE\s+COMMANDS/);
    expect(listed.stdout).toMatch(new RegExp(`dev\\s+idle\\s+2\\s+\\d+\\s+\\S+\\s+${join(work, 'api')}`));
    const closed = await run(['shell', 'close', 'dev']);
    expect(closed.stdout).toBe('Closed shell dev.\n');
    expect((await run(['shells'])).stdout).toBe('No shells.\n');
  });
});
