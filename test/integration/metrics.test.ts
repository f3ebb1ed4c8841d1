import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { request } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startDaemon, waitFor, type TestDaemon } from '../helpers/daemon.js';
import { freePort } from '../helpers/net.js';
import type { TestClient } from '../helpers/rpc.js';

// Prometheus metrics (SPEC §18), scraped by a real Prometheus (Debian's package; .ci/run installs it).
const PROMETHEUS = ['/usr/bin/prometheus', '/usr/local/bin/prometheus'].find((p) => existsSync(p));
if (!PROMETHEUS) process.stderr.write('skipping the Prometheus scrape test: no prometheus binary (apt-get install -y prometheus)\n');

const ADMIN = 'metrics-admin';

function get(opts: { port?: number; socketPath?: string; path: string }): Promise<{ status: number; body: string; type: string }> {
  return new Promise((resolve, reject) => {
    const req = request({ host: '127.0.0.1', ...opts, timeout: 10_000 }, (res) => {
      let body = '';
      res.setEncoding('utf8').on('data', (d: string) => (body += d));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body, type: String(res.headers['content-type']) }));
    });
    req.on('error', reject);
    req.end();
  });
}

describe('metrics.listen', () => {
  let d: TestDaemon;
  let c: TestClient;
  let port: number;
  const dir = mkdtempSync(join(tmpdir(), 'procctl-metrics-'));
  let prom: ChildProcess | undefined;
  let promLog = '';
  const running: string[] = [];

  beforeAll(async () => {
    port = await freePort();
    d = await startDaemon({ config: { adminToken: ADMIN, metrics: { listen: `127.0.0.1:${port}` }, approvals: { rules: [{ match: 'metrics-deny', action: 'deny' }] } } });
    c = await d.client();
  });
  afterAll(async () => {
    for (const id of running) await c.process({ action: 'kill', sessionId: id }).catch(() => undefined);
    c?.close();
    await d?.stop();
    if (prom && prom.exitCode === null && prom.signalCode === null) {
      const gone = new Promise((r) => prom!.once('exit', r));
      prom.kill('SIGTERM');
      const t = setTimeout(() => prom!.kill('SIGKILL'), 20_000);
      await gone;
      clearTimeout(t);
    }
    rmSync(dir, { recursive: true, force: true });
  });

  it('serves the text format with the names of SPEC §18, counted from what happened', async () => {
    await c.exec({ command: 'echo one' });
    await c.exec({ command: 'echo metrics-deny' });
    const r = await get({ port, path: '/metrics' });
    expect(r.status).toBe(200);
    expect(r.type).toMatch(/^text\/plain; version=0\.0\.4/);
    for (const name of [
      'procctl_sessions',
      'procctl_exec_duration_seconds_bucket',
      'procctl_approvals_pending',
      'procctl_approvals_total',
      'procctl_denials_total',
      'procctl_network_denied_total',
      'procctl_changes_pending',
      'procctl_scope_cpu_seconds_total',
      'procctl_scope_memory_bytes',
      'process_resident_memory_bytes',
      'process_open_fds',
      'nodejs_eventloop_lag_seconds',
    ]) {
      expect(r.body).toMatch(new RegExp(`^# TYPE ${name.replace(/_bucket$/, '')} `, 'm'));
    }
    expect(r.body).toMatch(/^procctl_sessions\{state="completed",scope="default"\} 1$/m);
    expect(r.body).toMatch(/^procctl_denials_total\{rule="0"\} 1$/m);
    expect(r.body).toMatch(/^procctl_exec_duration_seconds_count\{scope="default"\} 2$/m);
    expect((await get({ port, path: '/other' })).status).toBe(404);
  });

  it('a metrics.listen that is not loopback or a socket path is refused at load, saying what it takes', async () => {
    await expect(startDaemon({ config: { metrics: { listen: '0.0.0.0:9464' } } })).rejects.toThrow(/metrics\.listen.*must be a loopback address with its port/);
  });

  it('serves on a Unix socket path, 0600', async () => {
    const path = join(dir, 'metrics.sock');
    const u = await startDaemon({ config: { metrics: { listen: path } } });
    try {
      const r = await get({ socketPath: path, path: '/metrics' });
      expect(r.status).toBe(200);
      expect(r.body).toMatch(/^# TYPE procctl_sessions gauge$/m);
      expect(statSync(path).mode & 0o777).toBe(0o600);
    } finally {
      await u.stop();
    }
  });

  it.skipIf(!PROMETHEUS)('a real Prometheus scrapes it, and PromQL answers the running sessions', async () => {
    const N = 3;
    for (let i = 0; i < N; i++) {
      const r = await c.exec({ command: 'sleep 300', background: true, scope: 'metrics-run' });
      expect(r.status).toBe('running');
      running.push(r.sessionId);
    }
    const promPort = await freePort();
    const config = join(dir, 'prometheus.yml');
    writeFileSync(config, `global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\nscrape_configs:\n  - job_name: procctl\n    static_configs:\n      - targets: ['127.0.0.1:${port}']\n`);
    prom = spawn(PROMETHEUS!, [`--config.file=${config}`, `--storage.tsdb.path=${join(dir, 'tsdb')}`, `--web.listen-address=127.0.0.1:${promPort}`, '--log.level=warn'], { stdio: ['ignore', 'pipe', 'pipe'] });
    prom.stdout!.setEncoding('utf8').on('data', (x: string) => (promLog += x));
    prom.stderr!.setEncoding('utf8').on('data', (x: string) => (promLog += x));
    const query = encodeURIComponent('sum(procctl_sessions{state="running",scope="metrics-run"})');
    const value = await waitFor(
      async () => {
        if (prom!.exitCode !== null) throw new Error(`prometheus exited ${prom!.exitCode}: ${promLog}`);
        try {
          const r = await get({ port: promPort, path: `/api/v1/query?query=${query}` });
          const body = JSON.parse(r.body);
          const v = body?.data?.result?.[0]?.value?.[1];
          return v === String(N) ? v : undefined;
        } catch {
          return undefined;
        }
      },
      { timeoutMs: 60_000, everyMs: 250, what: `Prometheus to answer ${N} running sessions` },
    );
    expect(value).toBe(String(N));
    const up = JSON.parse((await get({ port: promPort, path: `/api/v1/query?query=${encodeURIComponent('up{job="procctl"}')}` })).body);
    expect(up.data.result[0].value[1]).toBe('1');
  });
});
