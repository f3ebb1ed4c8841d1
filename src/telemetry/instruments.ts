import type { Counter, Histogram, Meter } from '@opentelemetry/api';
import type { AuditEvent } from '../audit/events.js';
import { approvalsPending, changesPending, sessionsByState } from '../metrics/held.js';
import type { Registry } from '../session/registry.js';

/** The same buckets as the Prometheus histogram, so the two read alike. */
const EXEC_BUCKETS = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120];

/**
 * The daemon's metrics as OpenTelemetry instruments (SPEC §18, docs/telemetry.md): what the
 * registry holds is observed at each reading, what happened is counted from the audit events.
 * Names follow the Prometheus ones (docs/metrics.md) in OpenTelemetry's dotted style.
 */
export class Instruments {
  private readonly execDuration: Histogram;
  private readonly approvals: Counter;
  private readonly denials: Counter;
  private readonly networkDenied: Counter;

  constructor(meter: Meter, sessions: Registry) {
    meter
      .createObservableGauge('procctl.sessions', { description: 'Sessions the daemon holds, by state and scope.', unit: '{session}' })
      .addCallback((r) => {
        for (const c of sessionsByState(sessions)) r.observe(c.n, { state: c.state, scope: c.scope });
      });
    meter
      .createObservableGauge('procctl.approvals.pending', { description: 'Approvals waiting for a person: commands to run, and held changes to apply.', unit: '{approval}' })
      .addCallback((r) => r.observe(approvalsPending(sessions)));
    meter
      .createObservableGauge('procctl.changes.pending', { description: 'Review sessions whose changes wait to be applied or discarded.', unit: '{session}' })
      .addCallback((r) => r.observe(changesPending(sessions)));
    this.execDuration = meter.createHistogram('procctl.exec.duration', {
      description: 'How long an exec request took to answer (its result, running, or a question), by scope.',
      unit: 's',
      advice: { explicitBucketBoundaries: EXEC_BUCKETS },
    });
    this.approvals = meter.createCounter('procctl.approvals', { description: 'Approvals answered, by answer (approve, deny).', unit: '{approval}' });
    this.denials = meter.createCounter('procctl.denials', { description: 'Commands the approval rules denied, by the rule that decided ("none": approvals.default or a part that cannot be judged).', unit: '{command}' });
    this.networkDenied = meter.createCounter('procctl.network.denied', { description: "Connections sandboxed sessions' network proxy refused, by scope (counted when the session ends).", unit: '{connection}' });
  }

  take(e: AuditEvent): void {
    switch (e.type) {
      case 'exec_request':
        return this.execDuration.record(e.seconds, { scope: e.scope });
      case 'answer':
        return this.approvals.add(1, { answer: e.answer });
      case 'decision':
        if (e.action === 'deny') this.denials.add(1, { rule: e.rule === null ? 'none' : String(e.rule) });
        return;
      case 'network_refused':
        return this.networkDenied.add(1, { scope: e.scope });
    }
  }
}
