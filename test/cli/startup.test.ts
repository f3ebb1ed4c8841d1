import { execFileSync, spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PROCCTL, ROOT, startDaemon, stopAllDaemons, type TestDaemon } from '../helpers/daemon.js';

// What `procctl ps --json` loads, recorded by a module resolve hook: the speed of the CLI is
// measured in the bench (npm run bench -- --only cli); this checks what makes it fast.
const dir = mkdtempSync(join(tmpdir(), 'procctl-startup-'));
const LOG = join(dir, 'loaded.txt');
const HOOKS = join(dir, 'hooks.mjs');
writeFileSync(
  HOOKS,
  `import { appendFileSync } from 'node:fs';
export async function resolve(spec, ctx, next) {
  const r = await next(spec, ctx);
  appendFileSync(${JSON.stringify(LOG)}, r.url + '\\n');
  return r;
}
`,
);
const REGISTER = `data:text/javascript,import{register}from"node:module";register(${JSON.stringify(pathToFileURL(HOOKS).href)})`;
const CLI_DIR = join(ROOT, 'dist', 'src', 'cli');

/** The modules (ES and CommonJS, by URL) loaded by node running `args`. */
function loadedBy(args: string[]): string[] {
  writeFileSync(LOG, '');
  const cjs = join(dir, 'cjs.cjs');
  writeFileSync(cjs, `process.on('exit', () => require('node:fs').appendFileSync(${JSON.stringify(LOG)}, Object.keys(require.cache).map((f) => 'file://' + f).join('\\n') + '\\n'));\n`);
  const r = spawnSync(process.execPath, ['--import', REGISTER, '--require', cjs, ...args], { encoding: 'utf8' });
  expect(r.status, r.stderr).toBe(0);
  return readFileSync(LOG, 'utf8').split('\n').filter((u) => u.startsWith('file:'));
}

const HEAVY = /node_modules\/(zod|pino|@modelcontextprotocol|re2js|@lydell)\//;

describe('what `procctl ps --json` loads', () => {
  let d: TestDaemon;
  beforeAll(async () => {
    d = await startDaemon();
    execFileSync(process.execPath, [join(ROOT, 'scripts', 'bundle-cli.mjs')], { stdio: 'ignore' });
  });
  afterAll(stopAllDaemons);

  it('the one-file build: no module of dist/ (bin/procctl reads the bundle itself), no zod, no daemon', () => {
    const mtime = (f: string) => statSync(join(CLI_DIR, f)).mtimeMs;
    if (mtime('main.js') > mtime('procctl.cjs')) return; // a tsc ran since beforeAll: the next test covers the sources
    const loaded = loadedBy([PROCCTL, '--socket', d.socket, 'ps', '--json']);
    expect(loaded.filter((u) => HEAVY.test(u))).toEqual([]);
    expect(loaded.filter((u) => u.includes('/dist/'))).toEqual([]);
    expect(loaded.filter((u) => u.includes('/node_modules/'))).toEqual([]);
  });

  it('what a command loads from outside the bundle reports as the CLI does: mcp --no-spawn, no daemon, exits 3 with the hint', () => {
    const r = spawnSync(process.execPath, [PROCCTL, '--socket', join(dir, 'none.sock'), 'mcp', '--no-spawn'], { encoding: 'utf8', input: '' });
    expect(r.status, r.stderr).toBe(3);
    expect(r.stderr).toContain('cannot reach procctld');
    expect(r.stderr).toContain('start it with `procctld`');
  });

  it('the compiled sources: ps and what it uses, no other command, no zod, no daemon', () => {
    const main = pathToFileURL(join(CLI_DIR, 'main.js')).href;
    const loaded = loadedBy(['--input-type=module', '-e', `import(${JSON.stringify(main)}).then((m) => m.runCli(['--socket', ${JSON.stringify(d.socket)}, 'ps', '--json']))`]);
    expect(loaded.filter((u) => HEAVY.test(u))).toEqual([]);
    expect(loaded.filter((u) => u.includes('/dist/src/daemon/') && !u.endsWith('/version.js'))).toEqual([]);
    expect(loaded.filter((u) => u.includes('/dist/src/cli/commands/')).map((u) => u.split('/').pop()).sort()).toEqual(['index.js', 'ps.js']);
  });
});
