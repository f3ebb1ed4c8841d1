import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { gzipSync } from 'node:zlib';
import type { Browser, BrowserContext, Page } from 'playwright-core';
import type { BenchClient } from './lib/client.js';
import { BenchDaemon, ROOT } from './lib/daemon.js';
import type { BenchOptions } from './lib/options.js';
import { cpuMs } from './lib/proc.js';
import type { Metric } from './lib/report.js';
import { startSleepers } from './lib/sessions.js';
import { median, quantile, round, sleep } from './lib/stats.js';

const PROCCTL = join(ROOT, 'bin', 'procctl');
const CHROMIUM = ['/usr/bin/chromium', '/usr/bin/chromium-browser'].find((p) => existsSync(p));
/** Issue 28's budgets. */
const FIRST_DATA_MS = 1000;
const LIVE_P95_MS = 100;
const CPU_PERCENT = 5;
const WEIGHT_KB = 300;

/** Wall-clock ms with sub-ms precision: comparable with a page's `performance.timeOrigin + performance.now()` and bash's $EPOCHREALTIME. */
const wall = () => performance.timeOrigin + performance.now();

/**
 * The console's figures (issue 28): a real daemon with 1,000 running sessions, a real `procctl ui`,
 * and headless chromium (playwright-core) on its page.
 * (a) first data: from navigation to the sessions table showing rows;
 * (b) live: an output line, and a new approval, from the daemon having it to the page drawing it;
 * (c) the daemon's CPU with a page open on the 1,000 idle sessions against none open;
 * (d) the page's script and style, gzipped.
 */
export async function consoleCost(opts: BenchOptions): Promise<Metric[]> {
  if (!CHROMIUM) throw new Error('the console bench drives Debian\'s chromium (apt-get install -y chromium); none at /usr/bin/chromium');
  const { chromium } = await import('playwright-core');
  // PROCCTL_BENCH_CONSOLE_SESSIONS: fewer sessions, to tell what the thousand cost from what any page does.
  const count = Number(process.env.PROCCTL_BENCH_CONSOLE_SESSIONS ?? 1000);
  const d = await BenchDaemon.start({ PROCCTL_MAX_SESSIONS: String(count * 2) }, { approvals: { rules: [{ command: ['touch'], action: 'ask', reason: 'bench' }] } });
  const client = await d.client();
  let ui: ConsoleProc | undefined;
  let browser: Browser | undefined;
  try {
    const cg = (await client.call('daemon.status')).cgroups;
    const t0 = performance.now();
    await startSleepers(client, count, [], new Set());
    opts.log(`console: ${count} x \`sleep 600\` started in ${round((performance.now() - t0) / 1000, 1)} s (cgroups: ${cg?.mode ?? 'unknown'}${cg?.reason ? `, ${cg.reason}` : ''})`);
    ui = await startUi(d);
    browser = await chromium.launch({ executablePath: CHROMIUM, args: ['--no-sandbox'] });
    const context = await browser.newContext({ viewport: { width: 1400, height: 900 } });
    await context.addInitScript(OBSERVER);
    // The token is traded once: this context keeps the cookie for every page below.
    const first = await context.newPage();
    await first.goto(ui.link);
    await first.close();

    const loads = opts.quick ? 3 : 5;
    const lines = opts.quick ? 40 : 150;
    const approvals = opts.quick ? 8 : 25;
    const windowMs = opts.quick ? 6000 : 20_000;
    const rounds: Round[] = [];
    for (let r = 0; r < opts.rounds; r++) {
      const arrivals: number[] = [];
      const firstData = await measureFirstData(context, ui.origin, loads, count, arrivals);
      const live = await measureLive(context, ui.origin, client, lines, approvals);
      const cpu = await measureCpu(context, ui, d.pid, windowMs, r % 2 === 1);
      rounds.push({ firstData, arrivals, ...live, cpu });
      opts.log(
        `  round ${r + 1}: first data median ${round(median(firstData), 0)} ms (of ${loads}: ${firstData.map((x) => round(x, 0)).join(', ')}; the rows arrived at ${arrivals.map((x) => round(x, 0)).join(', ')}); ` +
          `output line p95 ${round(quantile(live.line, 0.95), 1)} ms (median ${round(median(live.line), 1)}; from the write ${round(quantile(live.fromWrite, 0.95), 1)}); ` +
          `approval p95 ${round(quantile(live.approval, 0.95), 1)} ms (pushed to the page at ${round(quantile(live.approvalArrived, 0.95), 1)} ms p95; the page's main thread in ${live.longTasks.count} long tasks for ${round(live.longTasks.ms, 0)} of ${round(live.longTasks.overMs, 0)} ms); daemon CPU ${round(cpu.open, 2)}% with a page vs ${round(cpu.closed, 2)}% without (console ${round(cpu.consoleOpen, 2)}%)`,
      );
    }
    const weight = pageWeightKb();
    const med = (f: (x: Round) => number) => median(rounds.map(f));
    return [
      {
        bench: 'console',
        name: `first data on screen (${count} sessions)`,
        value: med((x) => median(x.firstData)),
        unit: 'ms',
        target: { op: '<=', value: FIRST_DATA_MS },
        rounds: rounds.map((x) => round(median(x.firstData), 0)),
        detail: `navigation to the sessions table showing rows, ${loads} loads a round; worst ${round(Math.max(...rounds.flatMap((x) => x.firstData)), 0)} ms`,
      },
      {
        bench: 'console',
        name: 'output line on screen, p95',
        value: med((x) => quantile(x.line, 0.95)),
        unit: 'ms',
        target: { op: '<=', value: LIVE_P95_MS },
        rounds: rounds.map((x) => round(quantile(x.line, 0.95), 1)),
        detail: `from the job printing it ($EPOCHREALTIME) to the page's frame showing it; median ${round(med((x) => median(x.line)), 1)} ms; from the bench's write ${round(med((x) => quantile(x.fromWrite, 0.95)), 1)} ms p95; ${lines} lines a round, ${count} sessions beside`,
      },
      {
        bench: 'console',
        name: 'new approval on screen, p95',
        value: med((x) => quantile(x.approval, 0.95)),
        unit: 'ms',
        target: { op: '<=', value: LIVE_P95_MS },
        rounds: rounds.map((x) => round(quantile(x.approval, 0.95), 1)),
        detail: `from the exec request to its card on the sessions page; median ${round(med((x) => median(x.approval)), 1)} ms; ${approvals} a round`,
      },
      {
        bench: 'console',
        name: `daemon CPU with a console open, more than without (${count} idle sessions)`,
        value: med((x) => x.cpu.open - x.cpu.closed),
        unit: '% of a core',
        target: { op: '<', value: CPU_PERCENT },
        rounds: rounds.map((x) => round(x.cpu.open - x.cpu.closed, 2)),
        detail: `${round(med((x) => x.cpu.open), 2)}% with a page open vs ${round(med((x) => x.cpu.closed), 2)}% without, ${windowMs / 1000} s each (utime + stime, /proc/<pid>/stat); the console process itself ${round(med((x) => x.cpu.consoleOpen), 2)}% with the page open`,
      },
      {
        bench: 'console',
        name: "page's script + style, gzipped",
        value: weight,
        unit: 'KB',
        target: { op: '<=', value: WEIGHT_KB },
        detail: 'dist/web/app.js + app.css at gzip -9, as scripts/bundle-web.mjs checks it',
      },
    ];
  } finally {
    await browser?.close();
    client.close();
    await ui?.stop();
    await d.stop();
  }
}

interface Round {
  firstData: number[];
  arrivals: number[];
  approvalArrived: number[];
  longTasks: { count: number; ms: number; overMs: number };
  line: number[];
  fromWrite: number[];
  approval: number[];
  cpu: { open: number; closed: number; consoleOpen: number };
}

interface ConsoleProc {
  link: string;
  origin: string;
  pid: number;
  stop(): Promise<void>;
}

/** `procctl ui` against the bench daemon; its one line is the link. Stopped by pid. */
async function startUi(d: BenchDaemon): Promise<ConsoleProc> {
  const proc: ChildProcess = spawn(process.execPath, [PROCCTL, '--socket', d.socket, 'ui'], { env: d.env, stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  let err = '';
  proc.stdout!.setEncoding('utf8').on('data', (s: string) => (out += s));
  proc.stderr!.setEncoding('utf8').on('data', (s: string) => (err += s));
  const exited = new Promise<void>((r) => proc.once('exit', () => r()));
  const deadline = Date.now() + 30_000;
  while (!out.includes('\n')) {
    if (proc.exitCode !== null) throw new Error(`procctl ui exited ${proc.exitCode}: ${err}`);
    if (Date.now() > deadline) {
      proc.kill('SIGTERM');
      throw new Error(`procctl ui printed no link within 30 s: ${err}`);
    }
    await sleep(20);
  }
  const link = out.split('\n')[0];
  return {
    link,
    origin: new URL(link).origin,
    pid: proc.pid!,
    async stop() {
      if (proc.exitCode === null && proc.signalCode === null) proc.kill('SIGTERM');
      const t = setTimeout(() => proc.kill('SIGKILL'), 10_000);
      await exited;
      clearTimeout(t);
    },
  };
}

/**
 * Set up in every page before its own script: a MutationObserver noting, at the next animation
 * frame (the frame that shows it), when the sessions table first has rows, when each output line
 * `L<i> <stamp>` appears, and when each approval card appears. Times are wall-clock ms.
 */
const OBSERVER = `(() => {
  const seen = { rows: 0, lines: {}, approvals: {}, sessionsArrived: 0, approvalsArrived: {}, longTasks: [] };
  window.__bench = seen;
  // The page's main thread busy for 50 ms or more at a time: what a push waits behind.
  new PerformanceObserver((list) => { for (const e of list.getEntries()) seen.longTasks.push([e.startTime, e.duration]); }).observe({ type: 'longtask', buffered: true });
  // When the pushes arrive, to tell the console's part from the page's.
  const add = EventSource.prototype.addEventListener;
  EventSource.prototype.addEventListener = function (type, fn, ...rest) {
    if (type !== 'sessions' && type !== 'approvals') return add.call(this, type, fn, ...rest);
    return add.call(this, type, function (e) {
      const t = performance.timeOrigin + performance.now();
      if (type === 'sessions' && !seen.sessionsArrived) seen.sessionsArrived = t;
      // The push is { host, approvals } since the fleet view (a bare list before it).
      if (type === 'approvals') {
        const d = JSON.parse(e.data);
        for (const a of Array.isArray(d) ? d : d.approvals) if (!(a.sessionId in seen.approvalsArrived)) seen.approvalsArrived[a.sessionId] = t;
      }
      return fn.call(this, e);
    }, ...rest);
  };
  let pending = null;
  const frame = () => {
    const t = performance.timeOrigin + performance.now();
    const p = pending;
    pending = null;
    if (p.rows && !seen.rows) seen.rows = t;
    for (const k of p.lines) if (!(k in seen.lines)) seen.lines[k] = t;
    for (const k of p.approvals) if (!(k in seen.approvals)) seen.approvals[k] = t;
  };
  const note = () => {
    if (!pending) {
      pending = { rows: false, lines: [], approvals: [] };
      requestAnimationFrame(frame);
    }
    return pending;
  };
  const texts = (text) => {
    for (const m of text.matchAll(/\\bL(\\d+) \\d+\\.\\d+/g)) note().lines.push(m[1]);
  };
  new MutationObserver((records) => {
    for (const r of records) {
      if (r.type === 'characterData') { texts(r.target.data || ''); continue; }
      for (const n of r.addedNodes) {
        if (n.nodeType === 3) { texts(n.data); continue; }
        if (n.nodeType !== 1) continue;
        if (!seen.rows && !(pending && pending.rows) && document.querySelector('table.sessions tbody tr')) note().rows = true;
        if (n.matches('.approval[data-session]')) note().approvals.push(n.dataset.session);
        for (const a of n.querySelectorAll('.approval[data-session]')) note().approvals.push(a.dataset.session);
        if (n.closest('pre.out') || n.querySelector('pre.out')) texts(n.textContent || '');
      }
    }
  }).observe(document, { subtree: true, childList: true, characterData: true });
})();`;

/** (a) New pages on the sessions view, one after another: navigation start to the first frame with rows. */
async function measureFirstData(context: BrowserContext, origin: string, loads: number, count: number, arrivals: number[]): Promise<number[]> {
  const times: number[] = [];
  for (let i = 0; i < loads; i++) {
    const page = await context.newPage();
    await page.goto(`${origin}/#/`, { waitUntil: 'commit' });
    await page.waitForFunction(() => (window as any).__bench?.rows > 0, undefined, { timeout: 30_000, polling: 50 });
    const [ms, arrived] = await page.evaluate(() => [(window as any).__bench.rows - performance.timeOrigin, (window as any).__bench.sessionsArrived - performance.timeOrigin]);
    arrivals.push(arrived);
    const shown = await page.locator('table.sessions tbody tr').count();
    if (shown < Math.min(200, count)) throw new Error(`the table drew ${shown} rows, expected ${Math.min(200, count)}`);
    times.push(ms);
    await page.close();
    // The console unsubscribes when its last page closes; the next load starts as a first one.
    await sleep(500);
  }
  return times;
}

/** The page's clock less this process's, by the closest of a few round trips. */
async function clockOffset(page: Page): Promise<number> {
  let best = Infinity;
  let offset = 0;
  for (let i = 0; i < 9; i++) {
    const t1 = wall();
    const p = await page.evaluate(() => performance.timeOrigin + performance.now());
    const t2 = wall();
    if (t2 - t1 < best) {
      best = t2 - t1;
      offset = p - (t1 + t2) / 2;
    }
  }
  return offset;
}

/**
 * (b) A session whose job stamps each line it reads with $EPOCHREALTIME as it prints it; the
 * bench writes `L<i>` to its stdin at irregular intervals while a page shows the session. Then
 * approvals: execs that a rule holds, each timed from its request to its card on the sessions page.
 */
async function measureLive(context: BrowserContext, origin: string, client: BenchClient, lines: number, approvals: number) {
  const job = await client.call('exec', { command: `exec bash -c 'while IFS= read -r l; do printf "%s %s\\n" "$l" "$EPOCHREALTIME"; done'`, background: true, name: 'stamper' });
  if (job.status !== 'running') throw new Error(`the stamping job answered ${JSON.stringify(job).slice(0, 300)}`);
  const page = await context.newPage();
  const line: number[] = [];
  const fromWrite: number[] = [];
  const approval: number[] = [];
  const approvalArrived: number[] = [];
  let longTasks = { count: 0, ms: 0, overMs: 0 };
  try {
    await page.goto(`${origin}/#/s/${encodeURIComponent(job.sessionId)}`);
    await page.locator('pre.out.live').waitFor({ timeout: 30_000 });
    // The stream is open once an echo of a first line shows.
    await client.call('process', { action: 'write', sessionId: job.sessionId, data: 'L0\n' });
    await page.waitForFunction(() => '0' in ((window as any).__bench?.lines ?? {}), undefined, { timeout: 30_000, polling: 50 });
    const offset = await clockOffset(page);
    const sent: number[] = [];
    for (let i = 1; i <= lines; i++) {
      sent[i] = wall();
      await client.call('process', { action: 'write', sessionId: job.sessionId, data: `L${i}\n` });
      await sleep(20 + Math.random() * 60);
    }
    await page.waitForFunction((n) => Object.keys((window as any).__bench.lines).length > n, lines, { timeout: 30_000, polling: 100 });
    const seen: Record<string, number> = await page.evaluate(() => (window as any).__bench.lines);
    const text = await page.locator('pre.out.live').innerText();
    const stamps = new Map([...text.matchAll(/\bL(\d+) (\d+\.\d+)/g)].map((m) => [m[1], Number(m[2]) * 1000]));
    for (let i = 1; i <= lines; i++) {
      const shown = seen[String(i)] - offset;
      const stamp = stamps.get(String(i));
      if (stamp === undefined || !Number.isFinite(shown)) throw new Error(`line L${i} was not seen with its stamp`);
      line.push(shown - stamp);
      fromWrite.push(shown - sent[i]);
    }
    await page.close();

    const board = await context.newPage();
    await board.goto(`${origin}/#/`);
    await board.locator('table.sessions tbody tr').first().waitFor({ timeout: 30_000 });
    const boardOffset = await clockOffset(board);
    const held: [string, number][] = [];
    for (let i = 0; i < approvals; i++) {
      const t = wall();
      const x = await client.call('exec', { command: `touch /nonexistent/bench-${i}` });
      if (x.status !== 'approval_required') throw new Error(`the held exec answered ${JSON.stringify(x).slice(0, 300)}`);
      held.push([x.sessionId, t]);
      await sleep(100 + Math.random() * 100);
    }
    await board.waitForFunction((ids) => ids.every((id) => id in (window as any).__bench.approvals), held.map(([id]) => id), { timeout: 30_000, polling: 100 });
    const [cards, pushed]: Record<string, number>[] = await board.evaluate(() => [(window as any).__bench.approvals, (window as any).__bench.approvalsArrived]);
    const since = held[0][1] + boardOffset - (await board.evaluate(() => performance.timeOrigin));
    const tasks: [number, number][] = await board.evaluate(() => (window as any).__bench.longTasks);
    const busy = tasks.filter(([start]) => start >= since);
    longTasks = { count: busy.length, ms: busy.reduce((n, [, d]) => n + d, 0), overMs: wall() - held[0][1] };
    for (const [id, t] of held) {
      approval.push(cards[id] - boardOffset - t);
      approvalArrived.push(pushed[id] - boardOffset - t);
    }
    await board.close();
    for (const [id] of held) await client.call('process', { action: 'kill', sessionId: id }).catch(() => undefined);
  } finally {
    if (!page.isClosed()) await page.close();
    await client.call('process', { action: 'kill', sessionId: job.sessionId }).catch(() => undefined);
  }
  return { line, fromWrite, approval, approvalArrived, longTasks };
}

/**
 * (c) The daemon's CPU (utime + stime) over a window with no page open (the console unsubscribed)
 * and over one with a page open on the sessions view; `openFirst` alternates the order by round.
 */
async function measureCpu(context: BrowserContext, ui: ConsoleProc, daemonPid: number, windowMs: number, openFirst: boolean) {
  const window = async (open: boolean) => {
    const page = open ? await context.newPage() : undefined;
    if (page) {
      await page.goto(`${ui.origin}/#/`);
      await page.locator('table.sessions tbody tr').first().waitFor({ timeout: 30_000 });
    }
    await sleep(2000);
    const d0 = cpuMs(daemonPid);
    const c0 = cpuMs(ui.pid);
    const t0 = performance.now();
    await sleep(windowMs);
    const elapsed = performance.now() - t0;
    const daemon = ((cpuMs(daemonPid) - d0) / elapsed) * 100;
    const consoleCpu = ((cpuMs(ui.pid) - c0) / elapsed) * 100;
    await page?.close();
    return { daemon, consoleCpu };
  };
  const first = await window(openFirst);
  const second = await window(!openFirst);
  const [open, closed] = openFirst ? [first, second] : [second, first];
  return { open: open.daemon, closed: closed.daemon, consoleOpen: open.consoleCpu };
}

/** (d) What the browser downloads of script and style, gzipped as the bundle step weighs it. */
function pageWeightKb(): number {
  const dir = join(ROOT, 'dist', 'web');
  const bytes = ['app.js', 'app.css'].reduce((n, f) => n + gzipSync(readFileSync(join(dir, f)), { level: 9 }).length, 0);
  return round(bytes / 1024, 1);
}
