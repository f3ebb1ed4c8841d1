#!/usr/bin/env node
// Takes docs/console.png, the README's picture of the console, from a real run: a procctld of its
// own (temporary socket, state and config), a few sessions in two scopes (one printing output,
// one finished, one failed, one held for approval), a real `procctl ui`, and headless chromium
// (playwright-core, Debian's /usr/bin/chromium). Needs `npm run build` first.
//   node scripts/screenshot-console.mjs [OUT.png]
import { spawn } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { connect } from 'node:net';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { chromium } from 'playwright-core';

const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..');
const OUT = process.argv[2] ?? join(ROOT, 'docs', 'console.png');
const CHROMIUM = ['/usr/bin/chromium', '/usr/bin/chromium-browser'].find((p) => existsSync(p));
if (!CHROMIUM) throw new Error('needs chromium (apt-get install -y chromium)');
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

async function until(what, cond, ms = 30_000) {
  const end = Date.now() + ms;
  for (;;) {
    const v = await cond();
    if (v) return v;
    if (Date.now() > end) throw new Error(`gave up waiting for ${what}`);
    await sleep(50);
  }
}

/** The page's region from the top of `from` to the bottom of `to`, the page's whole width. */
async function below(page, from, to) {
  const a = await page.locator(from).first().boundingBox();
  const b = await page.locator(to).first().boundingBox();
  const width = page.viewportSize().width;
  await page.setViewportSize({ width, height: Math.ceil(Math.max(b.y + b.height + 16, page.viewportSize().height)) });
  return { x: 0, y: Math.max(0, a.y - 8), width, height: Math.ceil(b.y + b.height + 16 - Math.max(0, a.y - 8)) };
}

/** A JSON-RPC client on the daemon's socket, one line per message. */
async function rpc(socket) {
  const s = await new Promise((resolve, reject) => {
    const c = connect(socket, () => resolve(c));
    c.once('error', reject);
  });
  let buf = '';
  let id = 0;
  const waiting = new Map();
  s.setEncoding('utf8').on('data', (d) => {
    buf += d;
    for (let nl = buf.indexOf('\n'); nl >= 0; nl = buf.indexOf('\n')) {
      const msg = JSON.parse(buf.slice(0, nl));
      buf = buf.slice(nl + 1);
      const w = waiting.get(msg.id);
      if (!w) continue;
      waiting.delete(msg.id);
      if (msg.error) w.reject(new Error(msg.error.message));
      else w.resolve(msg.result);
    }
  });
  return {
    call: (method, params) =>
      new Promise((resolve, reject) => {
        waiting.set(++id, { resolve, reject });
        s.write(`${JSON.stringify({ jsonrpc: '2.0', id, method, params })}\n`);
      }),
    close: () => s.end(),
  };
}

const dir = mkdtempSync(join(tmpdir(), 'procctl-screenshot-'));
const project = join(dir, 'webshop');
mkdirSync(join(project, 'build'), { recursive: true });
writeFileSync(
  join(project, 'test.sh'),
  [
    'echo "> webshop@1.4.0 test"',
    'for f in cart checkout catalog search accounts payments shipping; do',
    '  sleep 0.2; echo " ✓ src/$f.test.ts ($((RANDOM % 40 + 5)) tests)"',
    'done',
    'echo " ✗ src/inventory.test.ts > reserves stock for a pending order" >&2',
    'echo "   expected 3 to be 2" >&2',
    'echo "watching for changes…"',
    // A little work now and then, so its CPU and memory move and the chart has points to draw.
    'while sleep 0.5; do seq 1 $((RANDOM * 4)) | sort -n | tail -n 1 > /dev/null; done',
  ].join('\n'),
);
const env = { ...process.env, XDG_CONFIG_HOME: join(dir, 'config'), PROCCTL_STATE_DIR: join(dir, 'state'), PROCCTL_LOG_LEVEL: 'warn', SHELL: '/bin/bash' };
for (const k of ['PROCCTL_SOCKET', 'PROCCTL_CONFIG', 'PROCCTL_ADMIN_TOKEN', 'NOTIFY_SOCKET', 'LISTEN_FDS', 'LISTEN_PID']) delete env[k];
mkdirSync(join(dir, 'config', 'procctl'), { recursive: true });
writeFileSync(join(dir, 'config', 'procctl', 'config.json'), JSON.stringify({ approvals: { rules: [{ command: ['rm'], action: 'ask', reason: 'deletes files' }] } }));
const socket = join(dir, 'run', 'procctl.sock');

const children = [];
const start = (bin, args) => {
  const p = spawn(process.execPath, [join(ROOT, 'bin', bin), ...args], { env, cwd: project, stdio: ['ignore', 'pipe', 'inherit'] });
  children.push(p);
  return p;
};
let browser;
try {
  start('procctld', ['--socket', socket]);
  const c = await until('the daemon to listen', () => rpc(socket).catch(() => undefined));
  const exec = (scope, params) => c.call('exec', { workdir: project, ...params, scope });
  await exec('agent-1', { command: 'git init -q && git status --short', name: 'git status' });
  await exec('agent-1', { command: 'sleep 900', name: 'dev server', background: true });
  const tests = await exec('agent-2', { command: 'bash test.sh', name: 'npm test', background: true });
  await exec('agent-2', { command: 'ls build/', name: 'ls build' });
  const held = await exec('agent-2', { command: 'rm -rf build/', name: 'clean build' });
  if (held.status !== 'approval_required') throw new Error(`rm -rf build/ was not held: ${held.status}`);

  const ui = start('procctl', ['--socket', socket, 'ui']);
  let out = '';
  ui.stdout.setEncoding('utf8').on('data', (s) => (out += s));
  const link = await until('procctl ui to print its link', () => out.includes('\n') && out.split('\n')[0]);
  browser = await chromium.launch({ executablePath: CHROMIUM, args: ['--no-sandbox'] });
  const page = await browser.newPage({ viewport: { width: 1200, height: 760 }, deviceScaleFactor: 1 });
  await page.goto(link);
  await page.locator(`.approval[data-session="${held.sessionId}"] .parts`).waitFor();
  await page.locator(`table.sessions tr[data-session="${tests.sessionId}"]`).waitFor();
  await until('the tests to print their failure', async () => (await c.call('process', { action: 'log', sessionId: tests.sessionId, scope: 'agent-2' })).output.includes('expected 3 to be 2'));
  await sleep(1000);
  const board = await page.screenshot({ clip: await below(page, 'header', 'table.sessions') });
  await page.goto(`${new URL(link).origin}/#/s/${encodeURIComponent(tests.sessionId)}`);
  await until('the output to show', async () => (await page.locator('pre.out.live').innerText()).includes('expected 3 to be 2'));
  // A few samples of CPU and memory for the session's chart (drawn from the rows the page is pushed, every 2 s).
  await sleep(6500);
  const session = await page.screenshot({ clip: await below(page, 'main section:not(.approvals)', 'label.follow') });
  // One picture: the sessions and the approval, then one session's output beneath.
  const shot = await browser.newPage({ viewport: { width: 1200, height: 400 }, deviceScaleFactor: 1 });
  await shot.setContent(`<body style="margin:0;background:#fff">${[board, session].map((b) => `<img style="display:block;border-bottom:1px solid #ccc" src="data:image/png;base64,${b.toString('base64')}">`).join('')}</body>`);
  await shot.screenshot({ path: OUT, fullPage: true });
  process.stdout.write(`wrote ${OUT} (${Math.round(statSync(OUT).size / 1024)} KiB)\n`);
  c.close();
} finally {
  await browser?.close();
  for (const p of children.reverse()) {
    if (p.exitCode !== null || p.signalCode !== null) continue;
    const gone = new Promise((r) => p.once('exit', r));
    p.kill('SIGTERM');
    await gone;
  }
  rmSync(dir, { recursive: true, force: true });
}
