import { execFileSync, spawnSync } from 'node:child_process';
import { cpSync, mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, utimesSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PROCCTL, PROCCTLD, ROOT, startDaemon, stopAllDaemons, type TestDaemon } from '../helpers/daemon.js';
import { DAEMON_NODE_FLAGS } from '../../src/base/node-flags.js';

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
function loadedBy(args: string[], env: NodeJS.ProcessEnv = process.env): string[] {
  writeFileSync(LOG, '');
  const cjs = join(dir, 'cjs.cjs');
  writeFileSync(cjs, `process.on('exit', () => require('node:fs').appendFileSync(${JSON.stringify(LOG)}, Object.keys(require.cache).map((f) => 'file://' + f).join('\\n') + '\\n'));\n`);
  const r = spawnSync(process.execPath, ['--import', REGISTER, '--require', cjs, ...args], { encoding: 'utf8', env });
  expect(r.status, r.stderr).toBe(0);
  return readFileSync(LOG, 'utf8').split('\n').filter((u) => u.startsWith('file:'));
}

/** What bin/procctl says it runs (PROCCTL_CLI_REPORT=1), for `procctl --version`. */
function whichCli(bin: string): string {
  const r = spawnSync(process.execPath, [bin, '--version'], { encoding: 'utf8', env: { ...process.env, PROCCTL_CLI_REPORT: '1' } });
  expect(r.status, r.stderr).toBe(0);
  return r.stderr;
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
    if (!whichCli(PROCCTL).includes('running the bundle')) return; // a tsc ran since beforeAll: the next test covers the sources
    const loaded = loadedBy([PROCCTL, '--socket', d.socket, 'ps', '--json']);
    expect(loaded.filter((u) => HEAVY.test(u))).toEqual([]);
    expect(loaded.filter((u) => u.includes('/dist/'))).toEqual([]);
    expect(loaded.filter((u) => u.includes('/node_modules/'))).toEqual([]);
  });

  it('what a command loads from outside the bundle reports as the CLI does: mcp --no-spawn, no daemon, says why and serves anyway', () => {
    const r = spawnSync(process.execPath, [PROCCTL, '--socket', join(dir, 'none.sock'), 'mcp', '--no-spawn'], { encoding: 'utf8', input: '' });
    expect(r.status, r.stderr).toBe(0);
    expect(r.stderr).toContain('cannot reach procctld');
    expect(r.stderr).toContain('serving anyway');
  });

  it('the compiled sources: ps and what it uses, no other command, no zod, no daemon', () => {
    const main = pathToFileURL(join(CLI_DIR, 'main.js')).href;
    const loaded = loadedBy(['--input-type=module', '-e', `import(${JSON.stringify(main)}).then((m) => m.runCli(['--socket', ${JSON.stringify(d.socket)}, 'ps', '--json']))`]);
    expect(loaded.filter((u) => HEAVY.test(u))).toEqual([]);
    expect(loaded.filter((u) => u.includes('/dist/src/daemon/') && !u.endsWith('/version.js'))).toEqual([]);
    expect(loaded.filter((u) => u.includes('/dist/src/cli/commands/')).map((u) => u.split('/').pop()).sort()).toEqual(['index.js', 'ps.js']);
  });
});

// The bundle is chosen by its stamp, never by file times: an install from a tarball sets those
// as it unpacks, and a bare `tsc` must still make the sources run.
describe('what procctld loads before its config says what it needs', () => {
  it('neither prom-client nor any of OpenTelemetry: they are loaded when metrics.listen or telemetry.otlp.endpoint is set', () => {
    // The one-file image (dist/src/daemon/procctld.cjs, what bin/procctld runs after a build; it is
    // compiled from its code cache, not required, so it is told by what procctld reports) and the compiled sources alike.
    for (const [image, env, says] of [
      ['bundle', process.env, 'running the bundle'],
      ['sources', { ...process.env, PROCCTL_DAEMON_SOURCES: '1' }, 'running the compiled sources'],
    ] as const) {
      const report = spawnSync(process.execPath, [...DAEMON_NODE_FLAGS, PROCCTLD, '--version'], { encoding: 'utf8', env: { ...env, PROCCTL_DAEMON_REPORT: '1' } });
      expect(report.stderr + report.stdout, `procctld runs the ${image}`).toContain(says);
      const loaded = loadedBy([PROCCTLD, '--version'], env);
      expect(loaded.some((u) => u.includes('/dist/src/daemon/daemon.js')), `the daemon's module is loaded from the ${image}`).toBe(image === 'sources');
      expect(loaded.filter((u) => /\/node_modules\/(prom-client|@opentelemetry)\//.test(u)), image).toEqual([]);
      expect(loaded.filter((u) => /\/dist\/src\/(metrics\/prometheus|telemetry\/)/.test(u)), image).toEqual([]);
    }
  });
});

describe('which CLI bin/procctl runs', () => {
  const copy = join(dir, 'copy');
  beforeAll(() => {
    execFileSync(process.execPath, [join(ROOT, 'scripts', 'bundle-cli.mjs')], { stdio: 'ignore' });
    mkdirSync(join(copy, 'dist'), { recursive: true });
    cpSync(join(ROOT, 'bin'), join(copy, 'bin'), { recursive: true });
    cpSync(join(ROOT, 'dist', 'src'), join(copy, 'dist', 'src'), { recursive: true });
    cpSync(join(ROOT, 'package.json'), join(copy, 'package.json'));
    symlinkSync(join(ROOT, 'node_modules'), join(copy, 'node_modules'));
  });
  afterAll(() => rmSync(copy, { recursive: true, force: true }));
  const bin = () => join(copy, 'bin', 'procctl');
  const copied = (f: string) => join(copy, 'dist', 'src', 'cli', f);

  it('runs the bundle whatever the file times say: sources newer than it, as npm can leave them', () => {
    const later = new Date(Date.now() + 3_600_000);
    utimesSync(copied('main.js'), later, later);
    const old = new Date('1985-10-26T08:15:00Z');
    utimesSync(copied('procctl.cjs'), old, old);
    expect(whichCli(bin())).toContain('running the bundle');
  });

  it('runs the compiled sources once a tsc has rewritten them (the stamp line is gone), and says why', () => {
    const main = readFileSync(copied('main.js'), 'utf8');
    writeFileSync(copied('main.js'), main.replace(/\/\/# procctl-bundle [0-9a-f]+\n$/, ''));
    const r = whichCli(bin());
    expect(r).toContain('running the compiled sources');
    expect(r).toContain('npm run build');
    writeFileSync(copied('main.js'), main);
    expect(whichCli(bin())).toContain('running the bundle');
  });

  it('runs the compiled sources when the stamp is missing or names other sources', () => {
    const stamp = readFileSync(copied('procctl.cjs.json'), 'utf8');
    writeFileSync(copied('procctl.cjs.json'), JSON.stringify({ sources: '0'.repeat(64) }));
    expect(whichCli(bin())).toContain('running the compiled sources');
    rmSync(copied('procctl.cjs.json'));
    expect(whichCli(bin())).toContain('the bundle has no stamp');
    writeFileSync(copied('procctl.cjs.json'), stamp);
  });
});
