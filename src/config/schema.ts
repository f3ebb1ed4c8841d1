import { z } from 'zod';
import { isIP } from 'node:net';
import { patternError } from './pattern.js';
import { SessionLimitsSchema } from '../base/session-limits.js';

export const SCOPE_NAME = /^[A-Za-z0-9_.:@-]{1,128}$/;
/** The scope that means every scope (an operator with the adminToken). */
export const ALL_SCOPES = '*';
/** What `sandbox.protect` keeps read-only by default (SPEC §12): what a person's later git, shell or editor would run. */
export const DEFAULT_PROTECT = ['.git/**/config', '.git/**/hooks', '.gitmodules', '.envrc', '.vscode', '.idea', '.bashrc', '.profile', '.zshrc', '.gitconfig', '.npmrc', '.mcp.json'];
/** Inherited variables withheld from sessions by default (SPEC §8). */
export const DEFAULT_EXCLUDE = [
  '*KEY*', '*SECRET*', '*TOKEN*', '*PASS*', '*_PWD', '*CREDENTIAL*', '*AUTH*', '*DSN*', '*COOKIE*', '*SESSION*', '*JWT*',
  '*PRIVATE*', '*WEBHOOK*', '*CONNECTION_STRING*', 'SSH_AUTH_SOCK', 'GPG_AGENT_INFO', 'KUBECONFIG', 'DOCKER_AUTH_CONFIG',
  'NETRC', 'SSLKEYLOGFILE',
];
/** What `env.inherit: "core"` passes (SPEC §8), plus `env.include`. */
export const CORE_ENV = ['HOME', 'USER', 'LOGNAME', 'PATH', 'SHELL', 'LANG', 'LC_*', 'TERM', 'TZ', 'TMPDIR'];

const clamp = (lo: number, hi: number) => (n: number) => Math.min(hi, Math.max(lo, n));
const int = (min = 0) => z.number().int().min(min);

const MIN_MEMORY_BYTES = 16 * 1024 * 1024;
const MIN_OPEN_FILES = 8;

export const YIELD_MS_RANGE = [10, 120_000] as const;
export const JOB_TTL_MS_RANGE = [60_000, 10_800_000] as const;

const Regex = z.string().refine((s) => {
  try {
    new RegExp(s);
    return true;
  } catch {
    return false;
  }
}, 'must be a valid regular expression');

/** A variable-name glob: `*` and `?` over letters, digits and `_`. */
const Glob = z.string().regex(/^[A-Za-z0-9_*?]+$/, 'must be a variable-name glob: letters, digits, _, * and ?');

/**
 * What an approval rule (or approvals.default) says about a command (SPEC §8, §16): run it, refuse
 * it, ask a person first, or run it at once with its changes held until a person applies them.
 */
export const ApprovalAction = z.enum(['allow', 'deny', 'ask', 'review']);
export type ApprovalAction = z.infer<typeof ApprovalAction>;
const Action = ApprovalAction;

/**
 * One approval rule (SPEC §8): `command`, an argument-vector prefix (globs per word; a word that
 * starts with `-` is an option that must be present, `|` between its spellings), or `match`, an
 * RE2 pattern tested against each simple command's text and the whole line; exactly one of them.
 */
const ApprovalRule = z
  .strictObject({
    match: z.string().optional(),
    command: z.array(z.string().min(1)).min(1).optional(),
    action: Action,
    reason: z.string().optional(),
    scopes: z.array(z.string().regex(SCOPE_NAME, 'a scope name is 1-128 letters, digits or _.:@-')).min(1).optional(),
  })
  .refine((r) => (r.match === undefined) !== (r.command === undefined), 'a rule has exactly one of match (a pattern) or command (an argument-vector prefix)');

/** Every rule's pattern must compile; an error names the rule by its position and pattern. */
const ApprovalRules = z.array(ApprovalRule).superRefine((rules, ctx) => {
  rules.forEach((rule, i) => {
    const error = rule.match === undefined ? undefined : patternError(rule.match);
    if (error !== undefined) {
      ctx.addIssue({ code: 'custom', path: [i, 'match'], message: `approval rule ${i} (match ${JSON.stringify(rule.match)}) is not a valid RE2 regular expression: ${error}` });
    }
  });
});

/** The whole daemon configuration (SPEC §3). Every key has a default; unknown keys are refused. */
/** A destination a sandboxed job may reach by name (SPEC §12): `registry.npmjs.org`, `*.example.com`, or an IP address. */
const HostPattern = z
  .string()
  .transform((h) => h.toLowerCase())
  .refine((h) => isIP(h) !== 0 || /^(\*\.)?[a-z0-9_]([a-z0-9_-]*[a-z0-9_])?(\.[a-z0-9_]([a-z0-9_-]*[a-z0-9_])?)*$/.test(h), {
    message: 'must be a host name (registry.npmjs.org), *.domain (any name under it) or an IP address, without scheme, port or path',
  });

/**
 * A credential a sandboxed job uses and never sees (SPEC §21): the proxy writes `value` into
 * `header` of requests to `hosts`; the job holds a placeholder in `$PROCCTL_CRED_<name>`.
 */
export const CredentialSchema = z
  .strictObject({
    name: z.string().regex(/^[A-Za-z0-9_]{1,64}$/, 'a credential name is 1-64 letters, digits or _: it becomes the variable PROCCTL_CRED_<name>'),
    hosts: z.array(HostPattern).min(1, 'name at least one host the credential is sent to'),
    header: z
      .string()
      .regex(/^[A-Za-z0-9!#$%&'*+.^_`|~-]+$/, 'a header name is letters, digits and !#$%&\'*+.^_`|~-')
      .refine((h) => !HOP_HEADERS.has(h.toLowerCase()), { message: 'must not be a header the proxy itself manages (host, content-length, transfer-encoding, connection, proxy-*); use Authorization or an API key header' })
      .default('Authorization'),
    value: z.string().min(1).regex(/^[^\r\n\0]*$/, 'a header value has no line breaks').optional(),
    valueFile: z.string().regex(/^\//, 'must be an absolute path').optional(),
    valueEnv: z.string().regex(/^[A-Za-z_][A-Za-z0-9_]*$/, 'must be the name of one of the daemon\'s environment variables').optional(),
    scopes: z.array(z.string().regex(SCOPE_NAME, 'a scope name is 1-128 letters, digits or _.:@-')).min(1).optional(),
  })
  .refine((c) => [c.value, c.valueFile, c.valueEnv].filter((v) => v !== undefined).length === 1, {
    message: 'a credential takes exactly one of value (the value itself), valueFile (a file holding it) or valueEnv (a variable of the daemon\'s holding it)',
  });
export type Credential = z.output<typeof CredentialSchema>;

/** Headers a credential cannot name: the proxy sets them itself. */
const HOP_HEADERS = new Set(['host', 'content-length', 'transfer-encoding', 'connection', 'keep-alive', 'upgrade', 'te', 'trailer', 'proxy-authorization', 'proxy-connection', 'proxy-authenticate']);

/** `sandbox.network`: all (true), none (false), or by name through the daemon's proxy. */
export const NetworkSchema = z.union([
  z.boolean(),
  z
    .strictObject({
      allow: z.array(HostPattern).default([]),
      deny: z.array(HostPattern).default([]),
      /** Credentials the proxy writes into requests to their hosts (SPEC §21); their hosts are allowed. */
      credentials: z.array(CredentialSchema).default([]),
      /** A PEM file of the CAs the proxy trusts for the credentials' hosts, instead of the system's roots. */
      upstreamCa: z.string().regex(/^\//, 'must be an absolute path to a PEM file').optional(),
    })
    .superRefine((n, ctx) => {
      if (n.allow.length === 0 && n.credentials.length === 0) ctx.addIssue({ code: 'custom', path: ['allow'], message: 'name at least one destination, or set network to false' });
      const seen = new Set<string>();
      n.credentials.forEach((c, i) => {
        const key = c.name.toUpperCase();
        if (seen.has(key)) ctx.addIssue({ code: 'custom', path: ['credentials', i, 'name'], message: `credential name "${c.name}" is used twice: each gets its own variable PROCCTL_CRED_<name>` });
        seen.add(key);
      });
    }),
]);
export type NetworkPolicy = z.output<typeof NetworkSchema>;

/** A session's writes to the workspaces: straight in, or held for review (SPEC §16). */
export const ChangesMode = z.enum(['direct', 'review']);
export type ChangesMode = z.infer<typeof ChangesMode>;

export const ConfigSchema = z.strictObject({
  tools: z
    .strictObject({
      exec: z
        .strictObject({
          backgroundMs: int().default(10_000).transform(clamp(...YIELD_MS_RANGE)),
          timeoutSec: int().max(2_147_483).default(1800),
          cleanupMs: int().default(1_800_000).transform(clamp(...JOB_TTL_MS_RANGE)),
          maxOutputChars: int(1).default(200_000),
          pendingMaxOutputChars: int(1).default(30_000),
          notifyOnExit: z.boolean().default(true),
          notifyOnExitEmptySuccess: z.boolean().default(false),
          killGraceMs: int().default(3000),
          maxSessions: int(1).default(256),
          maxLogBytes: int().default(64 * 1024 * 1024),
        })
        .prefault({}),
    })
    .prefault({}),
  interrupt: z
    .strictObject({
      enabled: z.boolean().default(true),
      timeoutSeconds: int(1).default(300),
      promptPatterns: z.array(Regex).default([]),
    })
    .prefault({}),
  approvals: z
    .strictObject({
      rules: ApprovalRules.default([]),
      /** What a simple command no rule matches gets: "ask" makes the rules an allowlist; "review" holds every command's changes for a person. */
      default: Action.default('allow'),
      /** Add the built-in list of read-only commands as allowed (policy/safe.ts). */
      safe: z.boolean().default(false),
      /**
       * What a part that cannot be judged without running it gets (a name from an expansion, eval of
       * a variable, a shell reading stdin): "ask" when unset. Set, it makes the policy judge commands
       * even with no rules (SPEC §8), so no default here: the policy must see whether it was written.
       */
      unanalyzable: Action.optional(),
      timeoutSeconds: int(1).max(2_147_483).default(300),
      /** Who may answer an approval (SPEC §8): a request carrying this token as `approverToken`; stored as `sha256:<hex>`. */
      approverToken: z.string().min(1).optional(),
    })
    .prefault({}),
  env: z
    .strictObject({
      exclude: z.array(Glob).default(DEFAULT_EXCLUDE),
      include: z.array(Glob).default([]),
      /** "all": the daemon's environment less what is excluded; "core": only CORE_ENV and env.include. */
      inherit: z.enum(['all', 'core']).default('all'),
    })
    .prefault({}),
  stateDir: z.string().min(1).optional(),
  /**
   * What a crash of the daemon (no hand-over: SIGKILL, the OOM killer, a fault) does to running
   * sessions (SPEC §19, docs/durability.md): "keep" lets them run for crashGraceMs while the guardian
   * holds their descriptors, for the next daemon to adopt, then kills them if none came; "kill" kills them at once.
   */
  durability: z
    .strictObject({
      onCrash: z.enum(['keep', 'kill']).default('keep'),
      crashGraceMs: int().max(86_400_000).default(30_000),
    })
    .prefault({}),
  /** Scope name → its policy (SPEC §8): token, background sessions, elevated mode. */
  scopes: z
    .record(
      z.string().regex(SCOPE_NAME, 'a scope name is 1-128 letters, digits or _.:@-'),
      z.strictObject({
        token: z.string().min(1).optional(),
        background: z.boolean().default(true),
        elevated: z.enum(['deny', 'ask', 'allow']).default('deny'),
        /** This scope's sessions' network, replacing sandbox.network (SPEC §12). */
        network: NetworkSchema.optional(),
        /** The trees this scope's sessions may write (workspace-write), replacing sandbox.workspaces. */
        workspaces: z.array(z.string().regex(/^\//, 'must be an absolute path')).optional(),
        /** Approvals of this scope may be answered by its own clients, without the approver credential. */
        selfApprove: z.boolean().default(false),
        /** This scope's per-session limits, replacing limits.session key by key (SPEC §15). */
        limits: SessionLimitsSchema.optional(),
        /** Whether this scope's sessions write the workspace directly or hold their changes for review, replacing sandbox.changes (SPEC §16). */
        changes: ChangesMode.optional(),
      }),
    )
    .default({}),
  /** Refuse every scope the config does not list under `scopes` (SPEC §8). */
  strictScopes: z.boolean().default(false),
  /** With scope "*", a request carrying this token sees and acts on every scope. */
  adminToken: z.string().min(1).optional(),
  /** How non-elevated sessions are confined (SPEC §12, src/sandbox/). */
  sandbox: z
    .strictObject({
      mode: z.enum(['off', 'workspace-write', 'read-only']).default('off'),
      network: NetworkSchema.default(false),
      writable: z.array(z.string().regex(/^\//, 'must be an absolute path')).default([]),
      /** The trees sessions may write in workspace-write, set by the operator (SPEC §12); a scope's list replaces it. */
      workspaces: z.array(z.string().regex(/^\//, 'must be an absolute path')).default([]),
      /** Kept read-only at any depth of every writable tree: names, or `.git/**\/NAME` inside any git directory. */
      protect: z.array(z.string().min(1)).default(DEFAULT_PROTECT),
      /** Size of each session's private /tmp and /dev/shm. */
      tmpBytes: int(1024 * 1024).default(1024 * 1024 * 1024),
      user: z.string().regex(/^[A-Za-z0-9_][A-Za-z0-9_.-]*\$?$/, 'must be a user name or a numeric uid').optional(),
      /** Let sandboxed jobs make Unix sockets (refused by a seccomp filter otherwise): for tools that need their own. */
      allowUnixSockets: z.boolean().default(false),
      /** "review": sessions' writes to the workspaces are held on an overlay until applied (SPEC §16); an exec's `changes` overrides it. */
      changes: ChangesMode.default('direct'),
    })
    .prefault({}),
  /** Resource limits of every non-elevated session (SPEC §12); none by default. */
  limits: z
    .strictObject({
      cpuSeconds: int(1).optional(),
      memoryBytes: z.number().int().min(MIN_MEMORY_BYTES, `must be at least ${MIN_MEMORY_BYTES} (16 MiB): below that not even the shell starts`).optional(),
      openFiles: z.number().int().min(MIN_OPEN_FILES, `must be at least ${MIN_OPEN_FILES}: stdio and the sandbox's own descriptors need them`).optional(),
      processes: int(1).optional(),
      fileSizeBytes: int(1).optional(),
      /** Limits of each session as a whole, on its cgroup (SPEC §15). */
      session: SessionLimitsSchema.prefault({}),
    })
    .prefault({}),
  /** Sessions as cgroups (SPEC §15, src/cgroup/): which way, and a v2 subtree the daemon may divide. */
  cgroups: z
    .strictObject({
      mode: z.enum(['auto', 'v2', 'v1', 'off']).default('auto'),
      root: z.string().regex(/^\//, 'must be an absolute path').optional(),
    })
    .prefault({}),
  rpc: z
    .strictObject({
      maxFrameBytes: int(1024).default(1024 * 1024),
      /** Connections one uid may hold open at once: a flood of them cannot take every descriptor. */
      maxConnectionsPerUid: int(1).default(256),
      /** Bytes one uid's connections may hold in incomplete frames together. */
      maxPartialBytesPerUid: int(1024).default(64 * 1024 * 1024),
      /** An incomplete frame with no byte more for this long closes its connection. */
      partialFrameTimeoutMs: int(100).default(30_000),
    })
    .prefault({}),
  /** The audit trail (SPEC §18, src/audit/): one record per event under `<stateDir>/audit`, bounded by size and age. */
  audit: z
    .strictObject({
      enabled: z.boolean().default(true),
      /** The whole trail's size; the oldest whole files go first. */
      maxBytes: int(64 * 1024).default(256 * 1024 * 1024),
      /** Records older than this many days go, by whole files. */
      days: int(1).default(90),
    })
    .prefault({}),
  /** Prometheus metrics (SPEC §18): `listen` a loopback host:port or a Unix socket path; unset, off. */
  metrics: z
    .strictObject({
      listen: z
        .string()
        .refine((v) => metricsAddress(v) !== undefined, {
          message: 'must be a loopback address with its port (127.0.0.1:9464, [::1]:9464, localhost:9464) or an absolute Unix socket path (/run/procctl/metrics.sock)',
        })
        .optional(),
    })
    .prefault({}),
  /** OpenTelemetry export (SPEC §18, docs/telemetry.md): sessions as spans and the metrics, over OTLP/HTTP; no endpoint, off. */
  telemetry: z
    .strictObject({
      otlp: z
        .strictObject({
          endpoint: z
            .string()
            .superRefine((v, ctx) => {
              const why = otlpEndpointProblem(v);
              if (why !== undefined) ctx.addIssue({ code: 'custom', message: why });
            })
            .optional(),
          /** Sent with every export, as an OTLP receiver's authentication usually wants (`authorization`, `x-api-key`). */
          headers: z
            .record(
              z.string().regex(/^[A-Za-z0-9!#$%&'*+.^_`|~-]+$/, 'a header name is letters, digits and !#$%&\'*+.^_`|~-'),
              z.string().regex(/^[^\r\n\0]*$/, 'a header value has no line breaks'),
            )
            .default({}),
          /** How often batched spans and a reading of the metrics are sent. */
          intervalMs: int(100).max(3_600_000).default(10_000),
        })
        .prefault({}),
    })
    .prefault({}),
  /** Persistent shells (SPEC §20): an idle one is closed after idleMs; a scope has at most max. */
  shells: z
    .strictObject({
      idleMs: int(1000).default(1_800_000),
      max: int(1).default(8),
    })
    .prefault({}),
  log: z
    .strictObject({ level: z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']).default('info') })
    .prefault({}),
});

export type Config = z.output<typeof ConfigSchema>;

/** Where `metrics.listen` serves: a loopback host and port, or a Unix socket path; undefined when it is neither. */
export function metricsAddress(v: string): { host: string; port: number } | { path: string } | undefined {
  if (v.startsWith('/')) return { path: v };
  const m = /^(?:\[([^\]]+)\]|([^:]+)):(\d{1,5})$/.exec(v);
  if (!m) return undefined;
  const host = m[1] ?? m[2];
  const port = Number(m[3]);
  if (port < 1 || port > 65535) return undefined;
  const loopback = host === 'localhost' || host === '::1' || (isIP(host) === 4 && host.startsWith('127.'));
  return loopback ? { host, port } : undefined;
}

/**
 * Why `telemetry.otlp.endpoint` cannot be used, or undefined when it can: the http(s) base URL of an
 * OTLP/HTTP receiver, to which the daemon adds /v1/traces and /v1/metrics itself.
 */
export function otlpEndpointProblem(v: string): string | undefined {
  const fix = 'give the http:// or https:// base URL of an OTLP/HTTP receiver, such as http://127.0.0.1:4318 (procctld adds /v1/traces and /v1/metrics), or leave telemetry.otlp.endpoint out to send nothing';
  // `localhost:4318` parses as a URL of scheme "localhost:": say what is missing instead.
  if (!/^[a-z][a-z0-9+.-]*:\/\//i.test(v)) return `it has no http:// or https:// in front: ${fix}`;
  let url: URL;
  try {
    url = new URL(v);
  } catch {
    return `not a URL: ${fix}`;
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') return `${url.protocol} is not OTLP/HTTP: ${fix}`;
  if (url.search || url.hash) return `a query or fragment has no place in it: ${fix}`;
  if (/\/v1\/(traces|metrics|logs)\/?$/.test(url.pathname)) return `it names one signal's path (${url.pathname}): ${fix}`;
  return undefined;
}

/** Where each signal goes: the endpoint's path with /v1/traces or /v1/metrics after it (the OTLP/HTTP convention for a base URL). */
export function otlpSignalUrl(endpoint: string, signal: 'traces' | 'metrics'): string {
  const url = new URL(endpoint);
  url.pathname = `${url.pathname.replace(/\/+$/, '')}/v1/${signal}`;
  return url.href;
}
export type ExecConfig = Config['tools']['exec'];

type Kind = 'int' | 'bool' | 'string';
export interface EnvVar {
  name: string;
  aliases: string[];
  path: string[];
  kind: Kind;
  /** The default as written in .env.example. */
  example: string;
}

/** Every environment variable that overrides a config key, with its aliases (SPEC §3). */
export const ENV_VARS: EnvVar[] = [
  { name: 'PROCCTL_YIELD_MS', aliases: ['PI_BASH_YIELD_MS'], path: ['tools', 'exec', 'backgroundMs'], kind: 'int', example: '10000' },
  { name: 'PROCCTL_TIMEOUT_SEC', aliases: [], path: ['tools', 'exec', 'timeoutSec'], kind: 'int', example: '1800' },
  { name: 'PROCCTL_JOB_TTL_MS', aliases: ['PI_BASH_JOB_TTL_MS'], path: ['tools', 'exec', 'cleanupMs'], kind: 'int', example: '1800000' },
  { name: 'PROCCTL_MAX_OUTPUT_CHARS', aliases: ['PI_BASH_MAX_OUTPUT_CHARS'], path: ['tools', 'exec', 'maxOutputChars'], kind: 'int', example: '200000' },
  { name: 'PROCCTL_PENDING_MAX_OUTPUT_CHARS', aliases: ['OPENCLAW_BASH_PENDING_MAX_OUTPUT_CHARS'], path: ['tools', 'exec', 'pendingMaxOutputChars'], kind: 'int', example: '30000' },
  { name: 'PROCCTL_NOTIFY_ON_EXIT', aliases: [], path: ['tools', 'exec', 'notifyOnExit'], kind: 'bool', example: 'true' },
  { name: 'PROCCTL_NOTIFY_ON_EXIT_EMPTY_SUCCESS', aliases: [], path: ['tools', 'exec', 'notifyOnExitEmptySuccess'], kind: 'bool', example: 'false' },
  { name: 'PROCCTL_KILL_GRACE_MS', aliases: [], path: ['tools', 'exec', 'killGraceMs'], kind: 'int', example: '3000' },
  { name: 'PROCCTL_MAX_SESSIONS', aliases: [], path: ['tools', 'exec', 'maxSessions'], kind: 'int', example: '256' },
  { name: 'PROCCTL_MAX_LOG_BYTES', aliases: [], path: ['tools', 'exec', 'maxLogBytes'], kind: 'int', example: '67108864' },
  { name: 'PROCCTL_INTERRUPT', aliases: [], path: ['interrupt', 'enabled'], kind: 'bool', example: 'true' },
  { name: 'PROCCTL_INTERRUPT_TIMEOUT_SEC', aliases: [], path: ['interrupt', 'timeoutSeconds'], kind: 'int', example: '300' },
  { name: 'PROCCTL_STATE_DIR', aliases: [], path: ['stateDir'], kind: 'string', example: '' },
  { name: 'PROCCTL_ON_CRASH', aliases: [], path: ['durability', 'onCrash'], kind: 'string', example: 'keep' },
  { name: 'PROCCTL_CRASH_GRACE_MS', aliases: [], path: ['durability', 'crashGraceMs'], kind: 'int', example: '30000' },
  { name: 'PROCCTL_MAX_FRAME_BYTES', aliases: [], path: ['rpc', 'maxFrameBytes'], kind: 'int', example: '1048576' },
  { name: 'PROCCTL_LOG_LEVEL', aliases: [], path: ['log', 'level'], kind: 'string', example: 'info' },
];
