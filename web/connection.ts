// The one place that holds the page's connection: the CSRF token, the stream of pushes, and the
// calls the page makes. Views read the store and call `act`; none of them speaks HTTP.

/** A session's row, with the host whose daemon it is on (the console adds it). */
export type Row = Record<string, any> & { sessionId: string; status: string; scope: string; host: string };
/** A persistent shell (SPEC §20) as shell.list shows it, with its host. */
export type ShellRow = { name: string; scope: string; state: 'idle' | 'busy'; cwd: string; commands: number; createdAt: string; lastUsedAt: string; sessionId: string | null; pid: number | null; host: string };
export type Approval = { sessionId: string; scope: string; name: string; command: string; cwd: string; host: string; interrupt?: Record<string, any> };
export interface DaemonView {
  connected: boolean;
  /** Reached, but it does not take the console as the operator: `problem` says why and what to set. */
  refused?: boolean;
  problem?: string;
  status?: Record<string, any>;
  host?: string;
}

/** A session's key in the page: sessions of two daemons may share an id. */
export const keyOf = (host: string, sessionId: string) => `${host}\n${sessionId}`;

export interface State {
  /** The stream to the console is open. */
  live: boolean;
  /** The console's own state (a stream it stopped or refused), for every host. */
  daemon: DaemonView;
  /** Each host's daemon as the console reaches it, in the order the console names them. */
  hosts: Map<string, DaemonView>;
  /** Every host's sessions, by keyOf(host, id). */
  sessions: Map<string, Row>;
  approvals: Approval[];
  /** Every host's persistent shells (SPEC §20). */
  shells: ShellRow[];
  /** When the sessions last changed (ms), so views re-render. */
  version: number;
}

/** CPU and memory samples of a session, as its rows were pushed: for its chart. */
export interface Usage {
  at: number[];
  cpuPercent: (number | null)[];
  memoryMiB: (number | null)[];
  lastCpuMs?: number;
}
const SAMPLES = 150;
export const usage = new Map<string, Usage>();

function sample(r: Row): void {
  const res = r.resources as { cpuMs?: number; memoryBytes?: number } | undefined;
  if (!res || r.status !== 'running') return;
  const at = Date.now() / 1000;
  const key = keyOf(r.host, r.sessionId);
  let u = usage.get(key);
  if (!u) usage.set(key, (u = { at: [], cpuPercent: [], memoryMiB: [] }));
  const prevAt = u.at[u.at.length - 1];
  const cpu = typeof res.cpuMs === 'number' && u.lastCpuMs !== undefined && prevAt !== undefined && at > prevAt ? Math.max(0, (res.cpuMs - u.lastCpuMs) / 10 / (at - prevAt)) : null;
  u.lastCpuMs = res.cpuMs;
  u.at.push(at);
  u.cpuPercent.push(cpu);
  u.memoryMiB.push(typeof res.memoryBytes === 'number' ? res.memoryBytes / 1048576 : null);
  if (u.at.length > SAMPLES) for (const k of ['at', 'cpuPercent', 'memoryMiB'] as const) u[k].shift();
}

export const state: State = { live: false, daemon: { connected: true }, hosts: new Map(), sessions: new Map(), approvals: [], shells: [], version: 0 };
/** Each host's approvals, as last pushed. */
const approvalsOf = new Map<string, Approval[]>();
/** Each host's shells, as last pushed. */
const shellsOf = new Map<string, ShellRow[]>();

const listeners = new Set<() => void>();
export function onChange(fn: () => void): () => void {
  listeners.add(fn);
  return () => listeners.delete(fn);
}
function changed(): void {
  state.version++;
  for (const fn of [...listeners]) fn();
}

let csrf: string | undefined;

/** The console refused or the daemon did: its message, to show as it is. */
export class ActionError extends Error {}

async function answer(res: Response): Promise<any> {
  const body = await res.json().catch(() => ({ error: `${res.status} ${res.statusText}` }));
  if (!res.ok) throw new ActionError(String(body.error ?? `${res.status} ${res.statusText}`));
  return body;
}

/** Read from a host's daemon through the console (a page of output, held changes, a judgement, history). */
export async function read(path: string, params: Record<string, string | number | undefined>): Promise<any> {
  const q = new URLSearchParams(Object.entries(params).flatMap(([k, v]) => (v === undefined || v === '' ? [] : [[k, String(v)]])));
  return answer(await fetch(`/api/${path}?${q}`, { credentials: 'same-origin' }));
}

/** Ask a host's daemon to act on a session (write, kill, resume, apply …), as the operator. */
export async function act(host: string, action: string, sessionId: string, params: Record<string, unknown> = {}): Promise<any> {
  csrf ??= (await answer(await fetch('/api/session', { credentials: 'same-origin' }))).csrf;
  return answer(
    await fetch('/api/act', {
      method: 'POST',
      credentials: 'same-origin',
      headers: { 'content-type': 'application/json', 'x-csrf-token': csrf! },
      body: JSON.stringify({ ...params, action, sessionId, host }),
    }),
  );
}

/** The whole view's stream: sessions, approvals, the daemon; EventSource reconnects by itself. */
export function connect(): void {
  const es = new EventSource('/api/events');
  es.onopen = () => {
    state.live = true;
    changed();
  };
  es.onerror = () => {
    state.live = false;
    // A stream the console refused (a restarted console, whose cookie this browser does not have) is not retried.
    if (es.readyState === EventSource.CLOSED) state.daemon = { connected: false, problem: 'the console no longer knows this page (was procctl ui restarted?): open the link it printed' };
    changed();
  };
  es.addEventListener('daemon', (e) => {
    const d = JSON.parse((e as MessageEvent).data) as DaemonView;
    state.hosts = new Map(state.hosts).set(d.host ?? '', d);
    changed();
  });
  es.addEventListener('sessions', (e) => {
    const { upsert, remove, full, host } = JSON.parse((e as MessageEvent).data) as { upsert: Row[]; remove: string[]; full?: boolean; host: string };
    const next = new Map(state.sessions);
    // The whole of one host's sessions replaces that host's, not the others'.
    if (full) for (const [k, r] of next) if (r.host === host) next.delete(k);
    for (const r of upsert) {
      r.host = host;
      next.set(keyOf(host, r.sessionId), r);
      sample(r);
    }
    for (const id of remove) {
      next.delete(keyOf(host, id));
      usage.delete(keyOf(host, id));
    }
    state.sessions = next;
    changed();
  });
  es.addEventListener('approvals', (e) => {
    const { host, approvals } = JSON.parse((e as MessageEvent).data) as { host: string; approvals: Approval[] };
    approvalsOf.set(host, approvals.map((a) => ({ ...a, host })));
    state.approvals = [...approvalsOf.values()].flat();
    changed();
  });
  es.addEventListener('shells', (e) => {
    const { host, shells } = JSON.parse((e as MessageEvent).data) as { host: string; shells: ShellRow[] };
    shellsOf.set(host, shells.map((sh) => ({ ...sh, host })));
    state.shells = [...shellsOf.values()].flat();
    changed();
  });
  es.addEventListener('bye', () => {
    es.close();
    state.live = false;
    state.daemon = { connected: false, problem: 'the console stopped (procctl ui ended)' };
    changed();
  });
}

export interface OutputChunk {
  stream: string;
  data: string;
  offset?: number;
}

/** One session's live output, until the returned function closes it. */
export function followOutput(host: string, sessionId: string, onChunk: (c: OutputChunk) => void, onFollowing: () => void): () => void {
  const es = new EventSource(`/api/events?${new URLSearchParams({ session: sessionId, host })}`);
  es.addEventListener('output', (e) => onChunk(JSON.parse((e as MessageEvent).data)));
  es.addEventListener('following', () => onFollowing(), { once: true });
  es.addEventListener('bye', () => es.close());
  return () => es.close();
}
