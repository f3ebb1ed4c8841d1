import type { Dial } from '../transport/dial.js';
import { DaemonClient, RpcCallError, type Notification } from '../rpc/client.js';
import { operatorParams, type OperatorCredentials } from '../rpc/credential.js';
import { INVALID_PARAMS, METHOD_NOT_FOUND } from '../rpc/errors.js';
import { missedOutput } from '../rpc/missed-output.js';

/**
 * How the console speaks for the person: the operator's scope and credentials (SPEC §17), found
 * as the CLI finds them (rpc/credential.ts). The approver credential is never sent to the page.
 */
export type Operator = OperatorCredentials;

/** A daemon that does not take the console's credentials as the operator's: reached, but nothing can be shown or done there. */
export class OperatorRefused extends Error {
  constructor(why: string, fix: string) {
    super(`the daemon does not take the console as the operator: ${why.replace(/\.$/, '')}. To let it, ${fix}`);
    this.name = 'OperatorRefused';
  }
}

const isRefusal = (err: unknown): err is Error =>
  (err instanceof RpcCallError || (err instanceof Error && err.name === 'RpcCallError')) && (err as RpcCallError).kind === 'forbidden';

/** One open page's stream of pushes: the whole view, or one session's output. */
export interface Viewer {
  /** Set for a session view's stream: only that session's output goes to it. */
  sessionId?: string;
  send(event: string, data: unknown): void;
}

type Row = Record<string, unknown>;

/** How often the list is asked again while a page is open: CPU and memory move without events. */
const REFRESH_MS = 2000;
/**
 * The timed refresh asks only the newest this many sessions (the rows a page draws first). The
 * daemon keeps re-reading the usage of every session a client keeps asking about (runner/usage.ts),
 * so asking all of a thousand idle sessions every 2 s had it read a thousand cgroups a second.
 * Older rows move with the next whole list: any event asks one, and so does a changed total.
 */
const REFRESH_ROWS = 200;
/**
 * `daemon.status` sums the usage of every running session, which has the daemon hold and re-read
 * all of them for a few seconds after: with many sessions the timed refresh asks it this seldom
 * (events ask it at once), and the uptime shown moves that often.
 */
const STATUS_MS = 30_000;
/** Events come in bursts (a start, its output, its end): one list answers a burst. */
const SETTLE_MS = 25;

/**
 * The console's one link to a daemon: one connection, one `subscribe` while any page is open
 * (none when no page is, so a closed tab costs the daemon nothing), and what the pages show,
 * kept once and pushed to every page as it changes. Pages never reach the daemon themselves.
 */
export class DaemonLink {
  private client: DaemonClient | undefined;
  private subscription: string | undefined;
  private readonly viewers = new Set<Viewer>();
  /** The rows as last pushed, by session id (as JSON, to send only what changed). */
  private rows = new Map<string, string>();
  private approvals = '[]';
  /** The persistent shells (SPEC §20) as last pushed, as JSON. */
  private shells = '[]';
  private status: unknown;
  private problem: string | undefined;
  /** The last connection was refused as the operator (not a daemon that cannot be reached). */
  private refused = false;
  private timer: NodeJS.Timeout | undefined;
  private settle: NodeJS.Timeout | undefined;
  /** The events since the last list only added sessions (new held execs); undefined: none yet. */
  private burstAdds: boolean | undefined;
  private syncing: Promise<void> = Promise.resolve();
  /**
   * Where each running session's output stands as far as this link had it (from the subscribe
   * answer's outputChars, then each output event): after a restart the pages following a session
   * are sent what it printed while the link was down, from there (SPEC §19).
   */
  private readonly outputAt = new Map<string, number>();
  /** Output events of the new subscription while what was missed is read: sent after it. */
  private catching: Record<string, unknown>[] | undefined;
  private closing = false;
  private retryMs = 250;

  /** The credentials in force: read again at each connection, since a restarted daemon makes a new approver credential. */
  private operator: Operator = {};

  constructor(
    /** The host's name in the page (`local`, an ssh host, or the name given with `--host NAME=…`). */
    readonly host: string,
    private readonly dial: () => Promise<Dial>,
    private readonly credentials: () => Operator,
    /** What to set when the daemon refuses the credentials (rpc/credential.ts's operatorFix). */
    private readonly fix = 'set $PROCCTL_ADMIN_TOKEN to its adminToken',
  ) {}

  /** The params that make a call the operator's (and, for answers, the person's). */
  private auth(answer = false): Record<string, unknown> {
    return operatorParams(this.operator, answer);
  }

  /** Connect and check that the daemon takes the console as the operator; throws why not (an OperatorRefused when it refuses). */
  async start(): Promise<void> {
    await this.connect();
  }

  /**
   * One host of several that could not be started: shown as disconnected with why, and tried
   * again (backing off) while the others are served.
   */
  startLater(why: unknown): void {
    const client = this.client;
    this.client = undefined;
    client?.close();
    this.problem = why instanceof Error ? why.message : String(why);
    this.refused = why instanceof OperatorRefused;
    this.reconnectLater();
  }

  /**
   * Connect, and ask once as the operator: a daemon that refuses the credentials is not shown as
   * connected (with an empty table), but as refused, with what to set; it is tried again, since
   * a restarted local daemon makes a new credential beside its socket.
   */
  private async connect(): Promise<void> {
    const client = await DaemonClient.over(await this.dial(), (n) => this.onNotification(n));
    this.operator = this.credentials();
    try {
      await client.call('process', { action: 'list', limit: 1, ...this.auth() });
    } catch (err) {
      client.close();
      this.refused = isRefusal(err);
      throw isRefusal(err) ? new OperatorRefused(err.message, this.fix) : err;
    }
    this.client = client;
    this.problem = undefined;
    this.refused = false;
    this.retryMs = 250;
    void client.closed.then((why) => {
      if (this.client !== client) return;
      this.client = undefined;
      this.subscription = undefined;
      // Subscribed again on the next connection (a restart closes every one): its timer with it.
      clearInterval(this.timer);
      if (this.closing) return;
      this.problem = why.message;
      this.broadcast('daemon', this.daemonView());
      this.reconnectLater();
    });
  }

  private reconnectLater(): void {
    setTimeout(async () => {
      if (this.closing || this.client) return;
      try {
        await this.connect();
        if (this.closing) return (this.client as DaemonClient | undefined)?.close();
        this.broadcast('daemon', this.daemonView());
        this.sync();
      } catch (err) {
        const was = JSON.stringify(this.daemonView());
        this.problem = err instanceof Error ? err.message : String(err);
        if (JSON.stringify(this.daemonView()) !== was) this.broadcast('daemon', this.daemonView());
        // A refusal is not mended by trying often: its credentials change only when a local daemon restarts.
        this.retryMs = Math.min(this.retryMs * 2, this.refused ? 30_000 : 5000);
        this.reconnectLater();
      }
    }, this.retryMs).unref();
  }

  /** Call the daemon as the operator. */
  call<T = any>(method: string, params: Record<string, unknown>, answer = false): Promise<T> {
    const client = this.client;
    if (!client) return Promise.reject(new Error(`the daemon cannot be reached: ${this.problem ?? 'not connected'}`));
    // The audit trail names the console as the client a person acted through (SPEC §18).
    const sent = { ...params, ...this.auth(answer), client: CONSOLE_CLIENT };
    return client.call<T>(method, sent).catch((err: unknown) => {
      // A daemon from before the audit trail refuses `client` by name: asked again without it.
      if (!(err instanceof RpcCallError && err.code === INVALID_PARAMS && (err.data?.path as unknown[] | undefined)?.[0] === 'client')) throw err;
      const { client: _client, ...without } = sent;
      return client.call<T>(method, without);
    });
  }

  /** Call the daemon in one scope (policy.check judges in a scope, not in "*"), with the adminToken where one is set. */
  callIn<T = any>(scope: string, method: string, params: Record<string, unknown>): Promise<T> {
    if (!this.client) return Promise.reject(new Error(`the daemon cannot be reached: ${this.problem ?? 'not connected'}`));
    return this.client.call<T>(method, { ...params, scope, ...(this.operator.adminToken ? { token: this.operator.adminToken } : {}) });
  }

  /** A page opened a stream: it gets the whole view at once, then what changes. */
  add(viewer: Viewer): () => void {
    this.viewers.add(viewer);
    if (viewer.sessionId === undefined) {
      viewer.send('daemon', this.daemonView());
      viewer.send('sessions', { upsert: [...this.rows.values()].map((r) => JSON.parse(r)), remove: [], full: true, host: this.host });
      viewer.send('approvals', { host: this.host, approvals: JSON.parse(this.approvals) });
      viewer.send('shells', { host: this.host, shells: JSON.parse(this.shells) });
    }
    this.sync();
    // A session's page reads its log once this link's subscription is live (`following`): output
    // printed after that read comes on the stream, and none falls between the two.
    if (viewer.sessionId !== undefined) void this.syncing.then(() => viewer.send('following', {}));
    return () => {
      this.viewers.delete(viewer);
      this.sync();
    };
  }

  private get watched(): boolean {
    return this.viewers.size > 0 && !this.closing;
  }

  /** Subscribe when the first page opens, unsubscribe when the last closes; one change at a time. */
  private sync(): void {
    this.syncing = this.syncing.then(async () => {
      const client = this.client;
      if (!client) return;
      try {
        if (this.watched && this.subscription === undefined) {
          this.catching = [];
          const answer = await client.call('subscribe', this.auth());
          this.subscription = answer.subscription;
          await this.catchUp(client, (answer.outputChars as Record<string, number> | undefined) ?? {});
          this.timer = setInterval(() => void this.refresh(true), REFRESH_MS);
          await this.refresh();
        } else if (!this.watched && this.subscription !== undefined) {
          const subscription = this.subscription;
          this.subscription = undefined;
          this.outputAt.clear();
          clearInterval(this.timer);
          await client.call('unsubscribe', { subscription });
        }
      } catch (err) {
        this.problem = err instanceof Error ? err.message : String(err);
      } finally {
        this.caughtUp();
      }
    });
  }

  /**
   * A new subscription: the pages following a session get what it printed since the output this
   * link had of it (none the first time: a page reads the log itself when it opens); then the
   * held events, each character once.
   */
  private async catchUp(client: DaemonClient, outputChars: Record<string, number>): Promise<void> {
    const followed = new Set([...this.viewers].map((v) => v.sessionId).filter((id) => id !== undefined));
    for (const id of followed) {
      const from = this.outputAt.get(id);
      if (from === undefined) continue;
      const { events } = await missedOutput((limit) => client.call('process', { action: 'log', sessionId: id, limit, ...this.auth() }), id, from);
      for (const e of events) this.output(e);
    }
    // Sessions no page follows: their output stands where the daemon says now.
    for (const id of [...this.outputAt.keys()]) if (!followed.has(id) && !(id in outputChars)) this.outputAt.delete(id);
    for (const [id, chars] of Object.entries(outputChars)) if (!followed.has(id) || !this.outputAt.has(id)) this.outputAt.set(id, chars);
  }

  private caughtUp(): void {
    const held = this.catching ?? [];
    this.catching = undefined;
    for (const e of held) this.output(e);
  }

  /** An output event to the pages following its session, past what they were sent already (by offset). */
  private output(event: Record<string, unknown>): void {
    const id = String(event.sessionId);
    const offset = Number(event.offset);
    const data = String(event.data ?? '');
    if (Number.isFinite(offset)) {
      const at = this.outputAt.get(id);
      if (at !== undefined && offset + data.length <= at) return;
      if (at !== undefined && offset < at) event = { ...event, data: data.slice(at - offset), offset: at };
      this.outputAt.set(id, offset + data.length);
    }
    for (const v of this.viewers) if (v.sessionId === id) v.send('output', event);
  }

  private onNotification(n: Notification): void {
    if (n.method !== 'event' || n.params.subscription !== this.subscription) return;
    const { subscription: _s, ...event } = n.params;
    if (event.type === 'output') {
      if (this.catching) this.catching.push(event);
      else this.output(event);
      return;
    }
    // A session begun since the subscription has its output from the first character.
    if (event.type === 'started' && !this.outputAt.has(String(event.sessionId))) this.outputAt.set(String(event.sessionId), 0);
    if (event.type === 'exited') this.outputAt.delete(String(event.sessionId));
    this.broadcast('event', { ...event, host: this.host });
    // A person is waiting on this one: the event carries what its card shows, so it is pushed at
    // once, without a call that could wait behind a list the daemon is reading; the list asked
    // after it is what holds (one answered meanwhile goes with it).
    if (event.type === 'approval_required') {
      this.approvalCame(event);
      void this.approvalsNow().catch(() => undefined);
    }
    // What an event changes in the table (status, interrupt, readiness) comes with the next list.
    // A burst of new held execs only adds the newest rows: the newest page shows them (the
    // daemon reads no list of a thousand between one approval and the next).
    const added = event.type === 'approval_required' && !this.rows.has(String(event.sessionId));
    this.burstAdds = (this.burstAdds ?? true) && added;
    clearTimeout(this.settle);
    this.settle = setTimeout(() => {
      const adds = this.burstAdds === true;
      this.burstAdds = undefined;
      void this.refresh(false, adds);
    }, SETTLE_MS);
  }

  private broadcast(name: string, data: unknown): void {
    for (const v of this.viewers) if (v.sessionId === undefined) v.send(name, data);
  }

  /** What the page shows of this host: `refused` when the daemon was reached but not as the operator (`problem` says what to set). */
  private daemonView() {
    const connected = this.client !== undefined;
    return { connected, ...(!connected && this.refused ? { refused: true } : {}), problem: this.problem, status: this.status, host: this.host };
  }

  private refreshing: Promise<void> | undefined;
  /** When the daemon's status was last read. */
  private statusAt = 0;
  private again = false;

  /**
   * Ask the list, the approvals and the status once (a refresh asked meanwhile runs once after, in
   * full); `timed`: the newest rows only; `adds`: sessions were only added, the newest rows show them.
   */
  private async refresh(timed = false, adds = false): Promise<void> {
    if (this.refreshing) {
      this.again = true;
      return this.refreshing;
    }
    this.refreshing = this.load(timed, adds).finally(() => (this.refreshing = undefined));
    await this.refreshing;
    if (this.again) {
      this.again = false;
      await this.refresh();
    }
  }

  private async load(timed = false, adds = false): Promise<void> {
    if (!this.client || !this.watched) return;
    // Few sessions cost little to read: then everything is asked each time.
    const many = timed && this.rows.size > REFRESH_ROWS;
    const newest = (timed || adds) && this.rows.size > REFRESH_ROWS;
    try {
      // Each is pushed as it answers, the cheap approvals first: a new approval does not wait for
      // the list of every session (tens of ms with a thousand) to be read, sent and compared.
      await Promise.all([
        this.approvalsNow(),
        this.list(newest),
        this.shellsNow(),
        many && Date.now() - this.statusAt < STATUS_MS ? undefined : this.client.call('daemon.status', {}).then((status) => {
          this.statusAt = Date.now();
          if (JSON.stringify(status) !== JSON.stringify(this.status)) {
            this.status = status;
            this.broadcast('daemon', this.daemonView());
          }
        }),
      ]);
    } catch (err) {
      this.problem = err instanceof Error ? err.message : String(err);
    }
  }

  /** An approval_required event: its approval added to those pushed, in approvals.list's form (oldest first). */
  private approvalCame(event: Record<string, unknown>): void {
    const approvals = JSON.parse(this.approvals) as Row[];
    if (approvals.some((a) => a.sessionId === event.sessionId)) return;
    approvals.push({ sessionId: event.sessionId, scope: event.scope, name: event.name, command: event.command, cwd: event.cwd, interrupt: event.interrupt });
    this.approvals = JSON.stringify(approvals);
    this.broadcast('approvals', { host: this.host, approvals });
  }

  /** Ask the persistent shells and push them if they changed; a daemon from before shells has none. */
  private async shellsNow(): Promise<void> {
    const answer = await this.call<{ shells: Row[] }>('shell.list', {}).catch((err: unknown) => {
      if (err instanceof RpcCallError && err.code === METHOD_NOT_FOUND) return { shells: [] };
      throw err;
    });
    const a = JSON.stringify(answer.shells);
    if (a !== this.shells) {
      this.shells = a;
      this.broadcast('shells', { host: this.host, shells: answer.shells });
    }
  }

  /** Ask the approvals waiting and push them if they changed. */
  private async approvalsNow(): Promise<void> {
    const { approvals } = await this.call<{ approvals: Row[] }>('approvals.list', {}, true);
    const a = JSON.stringify(approvals);
    if (a !== this.approvals) {
      this.approvals = a;
      this.broadcast('approvals', { host: this.host, approvals });
    }
  }

  /**
   * Ask the list, all of it or the newest rows, and push what changed. The newest rows stand for
   * the list when the total is the rows known plus the new ones among them; else (a session went,
   * or more came than the page holds) all of it is asked.
   */
  private async list(newest: boolean): Promise<void> {
    if (newest) {
      const page = await this.call<{ sessions: Row[]; total: number }>('process', { action: 'list', limit: REFRESH_ROWS });
      const added = page.sessions.filter((s) => !this.rows.has(String(s.sessionId))).length;
      // A known row in the page: every newer session, so every one added, is in it too.
      if (page.total === this.rows.size + added && added < page.sessions.length) return this.pushRows(page.sessions, true);
    }
    this.pushRows((await this.call<{ sessions: Row[] }>('process', { action: 'list' })).sessions);
  }

  /** Push the rows that changed since the last push (runtime and tail move on their own: the page keeps them); `some`: the others stay. */
  private pushRows(sessions: Row[], some = false): void {
    const next = some ? new Map(this.rows) : new Map<string, string>();
    const upsert: Row[] = [];
    for (const s of sessions) {
      const { runtimeMs: _r, tail: _t, ...row } = s;
      const json = JSON.stringify(row);
      next.set(String(s.sessionId), json);
      if (this.rows.get(String(s.sessionId)) !== json) upsert.push(row);
    }
    const remove = [...this.rows.keys()].filter((id) => !next.has(id));
    this.rows = next;
    if (upsert.length || remove.length) this.broadcast('sessions', { upsert, remove, host: this.host });
  }

  close(): void {
    this.closing = true;
    clearInterval(this.timer);
    clearTimeout(this.settle);
    for (const v of this.viewers) v.send('bye', {});
    this.viewers.clear();
    this.client?.close();
  }
}

/** How the console introduces itself to the daemon's audit trail. */
const CONSOLE_CLIENT = { kind: 'console', name: 'procctl ui' };
