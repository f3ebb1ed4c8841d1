import { chmodSync, lstatSync, unlinkSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { Logger } from 'pino';
import { collectDefaultMetrics, Counter, Gauge, Histogram, Registry as PromRegistry } from 'prom-client';
import type { AuditBus, AuditEvent } from '../audit/events.js';
import { metricsAddress } from '../config/schema.js';
import { sessionResources } from '../runner/cgroup.js';
import type { Registry } from '../session/registry.js';
import { approvalsPending, changesPending, sessionsByState } from './held.js';

/**
 * The daemon's Prometheus metrics (SPEC §18, docs/metrics.md), with prom-client. What the
 * registry holds now (sessions by state, pending approvals and changes, what running sessions
 * use) is read when scraped; what happened (answers, denials, refusals, exec latency) is counted
 * from the same events the audit trail is written from.
 */
export class Metrics {
  readonly registry = new PromRegistry();
  private server: Server | undefined;
  private unlisten: (() => void) | undefined;
  /** CPU seconds of ended sessions, by scope: the counter's part that no running session holds any more. */
  private readonly endedCpu = new Map<string, number>();
  private readonly execDuration: Histogram<'scope'>;
  private readonly approvals: Counter<'answer'>;
  private readonly denials: Counter<'rule'>;
  private readonly networkDenied: Counter<'scope'>;
  private readonly credentialUses: Counter<'scope' | 'credential'>;
  private readonly credentialElsewhere: Counter<'scope'>;

  constructor(sessions: Registry, bus: AuditBus) {
    const registers = [this.registry];
    new Gauge({
      name: 'procctl_sessions',
      help: 'Sessions the daemon holds, by state and scope.',
      labelNames: ['state', 'scope'],
      registers,
      collect() {
        this.reset();
        for (const c of sessionsByState(sessions)) this.set({ state: c.state, scope: c.scope }, c.n);
      },
    });
    new Gauge({
      name: 'procctl_approvals_pending',
      help: 'Approvals waiting for a person: commands to run, and held changes to apply.',
      registers,
      collect() {
        this.set(approvalsPending(sessions));
      },
    });
    new Gauge({
      name: 'procctl_changes_pending',
      help: 'Review sessions whose changes wait to be applied or discarded.',
      registers,
      collect() {
        this.set(changesPending(sessions));
      },
    });
    new Gauge({
      name: 'procctl_scope_memory_bytes',
      help: "Memory the running sessions of a scope use now, from their cgroups (sessions without one are not counted).",
      labelNames: ['scope'],
      registers,
      collect() {
        this.reset();
        const by = new Map<string, number>();
        for (const s of sessions.running()) {
          const r = sessionResources(s);
          if (r) by.set(s.scope, (by.get(s.scope) ?? 0) + r.memoryBytes);
        }
        for (const [scope, v] of by) this.set({ scope }, v);
      },
    });
    const endedCpu = this.endedCpu;
    const cpuSeen = new Map<string, number>();
    new Counter({
      name: 'procctl_scope_cpu_seconds_total',
      help: "CPU time a scope's sessions used, from their cgroups: the ended ones' and the running ones' so far.",
      labelNames: ['scope'],
      registers,
      collect() {
        const now = new Map(endedCpu);
        for (const s of sessions.running()) {
          const r = sessionResources(s);
          if (r) now.set(s.scope, (now.get(s.scope) ?? 0) + r.cpuMs / 1000);
        }
        // A counter only goes up: a running session's last sample can be ahead of its final figure by a little.
        for (const [scope, v] of now) {
          const seen = cpuSeen.get(scope) ?? 0;
          if (v > seen) {
            this.inc({ scope }, v - seen);
            cpuSeen.set(scope, v);
          }
        }
      },
    });
    this.execDuration = new Histogram({
      name: 'procctl_exec_duration_seconds',
      help: 'How long an exec request took to answer (its result, running, or a question), by scope.',
      labelNames: ['scope'],
      buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120],
      registers,
    });
    this.approvals = new Counter({ name: 'procctl_approvals_total', help: 'Approvals answered, by answer (approve, deny).', labelNames: ['answer'], registers });
    this.denials = new Counter({ name: 'procctl_denials_total', help: 'Commands the approval rules denied, by the rule that decided ("none": approvals.default or a part that cannot be judged).', labelNames: ['rule'], registers });
    this.networkDenied = new Counter({ name: 'procctl_network_denied_total', help: "Connections sandboxed sessions' network proxy refused, by scope (counted as they happen).", labelNames: ['scope'], registers });
    this.credentialUses = new Counter({ name: 'procctl_credential_uses_total', help: 'Requests the network proxy wrote a credential into (SPEC §21), by scope and credential name.', labelNames: ['scope', 'credential'], registers });
    this.credentialElsewhere = new Counter({ name: 'procctl_credential_elsewhere_total', help: "Requests refused for carrying a credential's placeholder to a host not its own, by scope.", labelNames: ['scope'], registers });
    collectDefaultMetrics({ register: this.registry });
    this.unlisten = bus.listen((e) => this.count(e));
  }

  private count(e: AuditEvent): void {
    switch (e.type) {
      case 'exec_request':
        this.execDuration.observe({ scope: e.scope }, e.seconds);
        return;
      case 'answer':
        this.approvals.inc({ answer: e.answer });
        return;
      case 'decision':
        if (e.action === 'deny') this.denials.inc({ rule: e.rule === null ? 'none' : String(e.rule) });
        return;
      case 'network_refused':
        this.networkDenied.inc({ scope: e.scope });
        if (e.reason.startsWith('credential_elsewhere')) this.credentialElsewhere.inc({ scope: e.scope });
        return;
      case 'credential_used':
        this.credentialUses.inc({ scope: e.scope, credential: e.name });
        return;
      case 'end':
        if (e.resources) this.endedCpu.set(e.scope, (this.endedCpu.get(e.scope) ?? 0) + e.resources.cpuMs / 1000);
    }
  }

  /** Serve `/metrics` on `listen` (a loopback host:port, or a Unix socket path made 0600). */
  async listen(listen: string, log: Logger): Promise<void> {
    const where = metricsAddress(listen);
    if (!where) throw new Error(`metrics.listen "${listen}" is neither a loopback host:port nor an absolute socket path`);
    const server = createServer((req, res) => {
      if (req.method !== 'GET' || (req.url ?? '').split('?')[0] !== '/metrics') {
        res.writeHead(404, { 'content-type': 'text/plain' }).end('procctl serves /metrics here\n');
        return;
      }
      this.registry.metrics().then(
        (text) => res.writeHead(200, { 'content-type': this.registry.contentType }).end(text),
        (err: Error) => {
          log.error({ err: err.message }, 'metrics could not be collected');
          res.writeHead(500, { 'content-type': 'text/plain' }).end(`metrics could not be collected: ${err.message}\n`);
        },
      );
    });
    if ('path' in where) removeStaleSocket(where.path);
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      if ('path' in where) server.listen(where.path, resolve);
      else server.listen(where.port, where.host, resolve);
    });
    if ('path' in where) chmodSync(where.path, 0o600);
    this.server = server;
    log.info({ metrics: listen }, 'serving Prometheus metrics at /metrics');
  }

  async close(): Promise<void> {
    this.unlisten?.();
    const server = this.server;
    this.server = undefined;
    if (!server) return;
    server.closeAllConnections();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  }
}

/** A socket left by a run that did not stop cleanly is replaced; anything else at the path is not touched. */
function removeStaleSocket(path: string): void {
  try {
    if (lstatSync(path).isSocket()) unlinkSync(path);
  } catch {
    // nothing there
  }
}
