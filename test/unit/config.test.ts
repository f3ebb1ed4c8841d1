import { existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { ConfigError, configCandidates, loadConfig, parseConfig } from '../../src/config/load.js';
import { ConfigSchema, ENV_VARS, otlpSignalUrl } from '../../src/config/schema.js';

/** The defaults of SPEC §3's table. */
const SPEC_DEFAULTS = {
  backgroundMs: 10_000,
  timeoutSec: 1800,
  cleanupMs: 1_800_000,
  maxOutputChars: 200_000,
  pendingMaxOutputChars: 30_000,
  notifyOnExit: true,
  notifyOnExitEmptySuccess: false,
  killGraceMs: 3000,
  maxSessions: 256,
  maxLogBytes: 67_108_864,
};

const ETC_CONFIG = '/etc/procctl/config.json';

let dir: string;
/** An environment that points every lookup into a temp dir, never the real home. */
let env: NodeJS.ProcessEnv;

beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'procctl-config-'));
  env = { HOME: join(dir, 'home'), XDG_CONFIG_HOME: join(dir, 'xdg') };
});
afterEach(() => rmSync(dir, { recursive: true, force: true }));

function writeJson(path: string, value: unknown): string {
  mkdirSync(join(path, '..'), { recursive: true });
  writeFileSync(path, typeof value === 'string' ? value : JSON.stringify(value));
  return path;
}

function configError(fn: () => unknown): ConfigError {
  try {
    fn();
  } catch (err) {
    expect(err).toBeInstanceOf(ConfigError);
    return err as ConfigError;
  }
  throw new Error('expected a ConfigError, nothing was thrown');
}

describe('parseConfig defaults', () => {
  it('fills every key of SPEC §3 from an empty object', () => {
    const c = parseConfig({});
    expect(c.tools.exec).toEqual(SPEC_DEFAULTS);
    expect(c.interrupt.enabled).toBe(true);
    expect(c.interrupt.timeoutSeconds).toBe(300);
    expect(c.approvals.rules).toEqual([]);
    expect(c.stateDir).toBeUndefined();
    expect(c.rpc.maxFrameBytes).toBe(1024 * 1024);
  });

  it('keeps the defaults of sibling keys when one key is given', () => {
    const c = parseConfig({ tools: { exec: { timeoutSec: 5 } } });
    expect(c.tools.exec).toEqual({ ...SPEC_DEFAULTS, timeoutSec: 5 });
  });

  it('accepts timeoutSec 0 (no timeout)', () => {
    expect(parseConfig({ tools: { exec: { timeoutSec: 0 } } }).tools.exec.timeoutSec).toBe(0);
  });

  it('accepts approval rules', () => {
    const rules = [
      { match: '^rm ', action: 'ask', reason: 'deletes files' },
      { match: 'shutdown', action: 'deny' },
    ];
    expect(parseConfig({ approvals: { rules } }).approvals.rules).toEqual(rules);
  });
});

describe('parseConfig clamps', () => {
  it.each([
    [0, 10],
    [9, 10],
    [10, 10],
    [5000, 5000],
    [120_000, 120_000],
    [120_001, 120_000],
    [10_000_000, 120_000],
  ])('backgroundMs %d → %d', (given, expected) => {
    expect(parseConfig({ tools: { exec: { backgroundMs: given } } }).tools.exec.backgroundMs).toBe(expected);
  });

  it.each([
    [0, 60_000],
    [59_999, 60_000],
    [60_000, 60_000],
    [600_000, 600_000],
    [10_800_000, 10_800_000],
    [10_800_001, 10_800_000],
  ])('cleanupMs %d → %d', (given, expected) => {
    expect(parseConfig({ tools: { exec: { cleanupMs: given } } }).tools.exec.cleanupMs).toBe(expected);
  });
});

describe('parseConfig errors', () => {
  it('refuses an unknown top-level key and names it', () => {
    const e = configError(() => parseConfig({ bogus: 1 }));
    expect(e.message).toContain('bogus');
    expect(e.message).toMatch(/unknown/i);
  });

  it('refuses an unknown nested key with its full path', () => {
    const e = configError(() => parseConfig({ tools: { exec: { backgroundMS: 5 } } }));
    expect(e.message).toContain('tools.exec.backgroundMS');
  });

  it('names the key, the value and what is allowed for a wrong type', () => {
    const e = configError(() => parseConfig({ tools: { exec: { maxOutputChars: 'lots' } } }));
    expect(e.message).toContain('tools.exec.maxOutputChars');
    expect(e.message).toContain('"lots"');
    expect(e.message).toMatch(/number/);
  });

  it('names the bound for a value out of range', () => {
    const e = configError(() => parseConfig({ tools: { exec: { maxOutputChars: 0 } } }));
    expect(e.message).toContain('tools.exec.maxOutputChars');
    expect(e.message).toContain('= 0');
    expect(e.message).toMatch(/>=\s*1/);
  });

  it('refuses a non-integer', () => {
    const e = configError(() => parseConfig({ tools: { exec: { killGraceMs: 1.5 } } }));
    expect(e.message).toContain('tools.exec.killGraceMs');
    expect(e.message).toContain('1.5');
    expect(e.message).toMatch(/int/i);
  });

  it('refuses an approval rule whose match is not a regular expression', () => {
    const e = configError(() => parseConfig({ approvals: { rules: [{ match: '(', action: 'ask' }] } }));
    expect(e.message).toContain('approvals.rules.0.match');
    expect(e.message).toContain('regular expression');
  });

  it('refuses an unknown approval action and lists the allowed ones', () => {
    const e = configError(() => parseConfig({ approvals: { rules: [{ match: 'x', action: 'maybe' }] } }));
    expect(e.message).toContain('approvals.rules.0.action');
    expect(e.message).toContain('"maybe"');
    for (const a of ['allow', 'deny', 'ask']) expect(e.message).toContain(a);
  });

  it('reports every problem, one per line', () => {
    const e = configError(() => parseConfig({ tools: { exec: { timeoutSec: -1, maxSessions: 0 } } }));
    const lines = e.message.split('\n');
    expect(lines).toHaveLength(2);
    expect(e.message).toContain('tools.exec.timeoutSec');
    expect(e.message).toContain('tools.exec.maxSessions');
  });

  it('names the file the value came from', () => {
    const e = configError(() => parseConfig({ tools: { exec: { timeoutSec: -1 } } }, new Map(), '/x/config.json'));
    expect(e.message).toContain('/x/config.json');
  });
});

describe('ENV_VARS', () => {
  it('covers every variable and alias of SPEC §3 with the documented default', () => {
    const byName = new Map(ENV_VARS.map((v) => [v.name, v]));
    const table: [string, string[], string, string][] = [
      ['PROCCTL_YIELD_MS', ['PI_BASH_YIELD_MS'], 'tools.exec.backgroundMs', '10000'],
      ['PROCCTL_TIMEOUT_SEC', [], 'tools.exec.timeoutSec', '1800'],
      ['PROCCTL_JOB_TTL_MS', ['PI_BASH_JOB_TTL_MS'], 'tools.exec.cleanupMs', '1800000'],
      ['PROCCTL_MAX_OUTPUT_CHARS', ['PI_BASH_MAX_OUTPUT_CHARS'], 'tools.exec.maxOutputChars', '200000'],
      ['PROCCTL_PENDING_MAX_OUTPUT_CHARS', ['OPENCLAW_BASH_PENDING_MAX_OUTPUT_CHARS'], 'tools.exec.pendingMaxOutputChars', '30000'],
      ['PROCCTL_NOTIFY_ON_EXIT', [], 'tools.exec.notifyOnExit', 'true'],
      ['PROCCTL_NOTIFY_ON_EXIT_EMPTY_SUCCESS', [], 'tools.exec.notifyOnExitEmptySuccess', 'false'],
      ['PROCCTL_KILL_GRACE_MS', [], 'tools.exec.killGraceMs', '3000'],
      ['PROCCTL_MAX_SESSIONS', [], 'tools.exec.maxSessions', '256'],
      ['PROCCTL_INTERRUPT', [], 'interrupt.enabled', 'true'],
      ['PROCCTL_INTERRUPT_TIMEOUT_SEC', [], 'interrupt.timeoutSeconds', '300'],
      ['PROCCTL_MAX_LOG_BYTES', [], 'tools.exec.maxLogBytes', '67108864'],
      ['PROCCTL_STATE_DIR', [], 'stateDir', ''],
    ];
    for (const [name, aliases, path, example] of table) {
      const v = byName.get(name);
      expect(v, name).toBeDefined();
      expect(v!.aliases, name).toEqual(aliases);
      expect(v!.path.join('.'), name).toBe(path);
      expect(v!.example, name).toBe(example);
    }
  });

  it('documents examples that parse to the schema defaults', () => {
    const defaults = ConfigSchema.parse({}) as Record<string, unknown>;
    for (const v of ENV_VARS) {
      if (v.example === '') continue;
      let node: unknown = defaults;
      for (const k of v.path) node = (node as Record<string, unknown>)[k];
      expect(String(node), v.name).toBe(v.example);
    }
  });
});

describe('loadConfig from the environment', () => {
  it.skipIf(existsSync(ETC_CONFIG))('gives the defaults with no file and no variables', () => {
    const { config, file } = loadConfig(undefined, env);
    expect(file).toBeUndefined();
    expect(config.tools.exec).toEqual(SPEC_DEFAULTS);
  });

  it('reads every primary variable', () => {
    const file = writeJson(join(dir, 'c.json'), {});
    const { config } = loadConfig(file, {
      ...env,
      PROCCTL_YIELD_MS: '2500',
      PROCCTL_TIMEOUT_SEC: '0',
      PROCCTL_JOB_TTL_MS: '90000',
      PROCCTL_MAX_OUTPUT_CHARS: '1234',
      PROCCTL_PENDING_MAX_OUTPUT_CHARS: '567',
      PROCCTL_NOTIFY_ON_EXIT: 'false',
      PROCCTL_NOTIFY_ON_EXIT_EMPTY_SUCCESS: '1',
      PROCCTL_KILL_GRACE_MS: '250',
      PROCCTL_MAX_SESSIONS: '3',
      PROCCTL_MAX_LOG_BYTES: '4096',
      PROCCTL_INTERRUPT: 'off',
      PROCCTL_INTERRUPT_TIMEOUT_SEC: '7',
      PROCCTL_STATE_DIR: '/var/lib/x',
    });
    expect(config.tools.exec).toEqual({
      backgroundMs: 2500,
      timeoutSec: 0,
      cleanupMs: 90_000,
      maxOutputChars: 1234,
      pendingMaxOutputChars: 567,
      notifyOnExit: false,
      notifyOnExitEmptySuccess: true,
      killGraceMs: 250,
      maxSessions: 3,
      maxLogBytes: 4096,
    });
    expect(config.interrupt.enabled).toBe(false);
    expect(config.interrupt.timeoutSeconds).toBe(7);
    expect(config.stateDir).toBe('/var/lib/x');
  });

  it('reads the frame limit and log level variables', () => {
    const file = writeJson(join(dir, 'c.json'), {});
    const { config } = loadConfig(file, { ...env, PROCCTL_MAX_FRAME_BYTES: '4096', PROCCTL_LOG_LEVEL: 'debug' });
    expect(config.rpc.maxFrameBytes).toBe(4096);
    expect(config.log.level).toBe('debug');
    const e = configError(() => loadConfig(file, { ...env, PROCCTL_LOG_LEVEL: 'loud' }));
    expect(e.message).toContain('log.level');
    expect(e.message).toContain('$PROCCTL_LOG_LEVEL');
    expect(e.message).toContain('debug');
  });

  it.each([
    ['PI_BASH_YIELD_MS', '777', 'backgroundMs', 777],
    ['PI_BASH_JOB_TTL_MS', '120000', 'cleanupMs', 120_000],
    ['PI_BASH_MAX_OUTPUT_CHARS', '999', 'maxOutputChars', 999],
    ['OPENCLAW_BASH_PENDING_MAX_OUTPUT_CHARS', '888', 'pendingMaxOutputChars', 888],
  ] as const)('honours the alias %s', (name, value, key, expected) => {
    const file = writeJson(join(dir, 'c.json'), {});
    expect(loadConfig(file, { ...env, [name]: value }).config.tools.exec[key]).toBe(expected);
  });

  it('prefers the primary name over its alias', () => {
    const file = writeJson(join(dir, 'c.json'), {});
    const { config } = loadConfig(file, { ...env, PROCCTL_YIELD_MS: '111', PI_BASH_YIELD_MS: '222' });
    expect(config.tools.exec.backgroundMs).toBe(111);
  });

  it('ignores an empty variable', () => {
    const file = writeJson(join(dir, 'c.json'), { tools: { exec: { timeoutSec: 42 } } });
    expect(loadConfig(file, { ...env, PROCCTL_TIMEOUT_SEC: '' }).config.tools.exec.timeoutSec).toBe(42);
  });

  it('overrides the file, keeping the file for the keys it does not set', () => {
    const file = writeJson(join(dir, 'c.json'), { tools: { exec: { timeoutSec: 42, killGraceMs: 9 } } });
    const { config } = loadConfig(file, { ...env, PROCCTL_TIMEOUT_SEC: '5' });
    expect(config.tools.exec.timeoutSec).toBe(5);
    expect(config.tools.exec.killGraceMs).toBe(9);
  });

  it('clamps values from the environment too', () => {
    const file = writeJson(join(dir, 'c.json'), {});
    const { config } = loadConfig(file, { ...env, PROCCTL_YIELD_MS: '1', PROCCTL_JOB_TTL_MS: '99999999' });
    expect(config.tools.exec.backgroundMs).toBe(10);
    expect(config.tools.exec.cleanupMs).toBe(10_800_000);
  });

  it.each(['1', 'true', 'TRUE', 'yes', 'on', ' true '])('reads %j as true', (text) => {
    const file = writeJson(join(dir, 'c.json'), {});
    expect(loadConfig(file, { ...env, PROCCTL_NOTIFY_ON_EXIT_EMPTY_SUCCESS: text }).config.tools.exec.notifyOnExitEmptySuccess).toBe(true);
  });

  it.each(['0', 'false', 'No', 'off'])('reads %j as false', (text) => {
    const file = writeJson(join(dir, 'c.json'), {});
    expect(loadConfig(file, { ...env, PROCCTL_NOTIFY_ON_EXIT: text }).config.tools.exec.notifyOnExit).toBe(false);
  });

  it('names the variable, its value and what is allowed for a bad number', () => {
    const file = writeJson(join(dir, 'c.json'), {});
    const e = configError(() => loadConfig(file, { ...env, PROCCTL_MAX_OUTPUT_CHARS: 'ten' }));
    expect(e.message).toContain('tools.exec.maxOutputChars');
    expect(e.message).toContain('"ten"');
    expect(e.message).toContain('$PROCCTL_MAX_OUTPUT_CHARS');
    expect(e.message).toMatch(/number/);
    expect(e.message).not.toContain(file);
  });

  it('names the alias actually used', () => {
    const file = writeJson(join(dir, 'c.json'), {});
    const e = configError(() => loadConfig(file, { ...env, OPENCLAW_BASH_PENDING_MAX_OUTPUT_CHARS: '0' }));
    expect(e.message).toContain('$OPENCLAW_BASH_PENDING_MAX_OUTPUT_CHARS');
    expect(e.message).toContain('tools.exec.pendingMaxOutputChars');
  });

  it('refuses a boolean variable it cannot read', () => {
    const file = writeJson(join(dir, 'c.json'), {});
    const e = configError(() => loadConfig(file, { ...env, PROCCTL_INTERRUPT: 'maybe' }));
    expect(e.message).toContain('interrupt.enabled');
    expect(e.message).toContain('"maybe"');
    expect(e.message).toContain('$PROCCTL_INTERRUPT');
    expect(e.message).toMatch(/boolean/);
  });

  it('refuses a fractional number in a variable', () => {
    const file = writeJson(join(dir, 'c.json'), {});
    const e = configError(() => loadConfig(file, { ...env, PROCCTL_KILL_GRACE_MS: '1.5' }));
    expect(e.message).toContain('$PROCCTL_KILL_GRACE_MS');
  });
});

describe('loadConfig from a file', () => {
  it('names the file for a bad value in it', () => {
    const file = writeJson(join(dir, 'c.json'), { tools: { exec: { maxSessions: -3 } } });
    const e = configError(() => loadConfig(file, env));
    expect(e.message).toContain('tools.exec.maxSessions');
    expect(e.message).toContain('-3');
    expect(e.message).toContain(file);
  });

  it('names the file for an unknown key in it', () => {
    const file = writeJson(join(dir, 'c.json'), { tools: { exec: { yieldMs: 5 } } });
    const e = configError(() => loadConfig(file, env));
    expect(e.message).toContain('tools.exec.yieldMs');
    expect(e.message).toContain(file);
  });

  it('refuses a file that is not JSON, naming it', () => {
    const file = writeJson(join(dir, 'c.json'), '{ nope');
    const e = configError(() => loadConfig(file, env));
    expect(e.message).toContain(file);
    expect(e.message).toMatch(/JSON/);
  });

  it.each([['[]'], ['null'], ['42'], ['"x"']])('refuses a file holding %s', (text) => {
    const file = writeJson(join(dir, 'c.json'), text);
    const e = configError(() => loadConfig(file, env));
    expect(e.message).toContain(file);
    expect(e.message).toMatch(/object/);
  });

  it('refuses an explicit file that does not exist', () => {
    const missing = join(dir, 'missing.json');
    const e = configError(() => loadConfig(missing, env));
    expect(e.message).toContain(missing);
  });

  it('refuses a $PROCCTL_CONFIG that does not exist', () => {
    const missing = join(dir, 'missing.json');
    const e = configError(() => loadConfig(undefined, { ...env, PROCCTL_CONFIG: missing }));
    expect(e.message).toContain(missing);
  });
});

describe('config file resolution', () => {
  it('lists the candidates in SPEC order', () => {
    expect(configCandidates(undefined, env)).toEqual([
      { path: join(dir, 'xdg', 'procctl', 'config.json'), required: false },
      { path: ETC_CONFIG, required: false },
    ]);
  });

  it('falls back to $HOME/.config without XDG_CONFIG_HOME', () => {
    const paths = configCandidates(undefined, { HOME: join(dir, 'home') }).map((c) => c.path);
    expect(paths).toEqual([join(dir, 'home', '.config', 'procctl', 'config.json'), ETC_CONFIG]);
  });

  it('an explicit file or $PROCCTL_CONFIG is the only candidate, and required', () => {
    expect(configCandidates('/a.json', { ...env, PROCCTL_CONFIG: '/b.json' })).toEqual([{ path: '/a.json', required: true }]);
    expect(configCandidates(undefined, { ...env, PROCCTL_CONFIG: '/b.json' })).toEqual([{ path: '/b.json', required: true }]);
  });

  it('explicit beats $PROCCTL_CONFIG beats $XDG_CONFIG_HOME', () => {
    const explicit = writeJson(join(dir, 'explicit.json'), { tools: { exec: { timeoutSec: 1 } } });
    const fromEnv = writeJson(join(dir, 'env.json'), { tools: { exec: { timeoutSec: 2 } } });
    const xdg = writeJson(join(dir, 'xdg', 'procctl', 'config.json'), { tools: { exec: { timeoutSec: 3 } } });

    const withVar = { ...env, PROCCTL_CONFIG: fromEnv };
    expect(loadConfig(explicit, withVar)).toMatchObject({ file: explicit, config: { tools: { exec: { timeoutSec: 1 } } } });
    expect(loadConfig(undefined, withVar)).toMatchObject({ file: fromEnv, config: { tools: { exec: { timeoutSec: 2 } } } });
    expect(loadConfig(undefined, env)).toMatchObject({ file: xdg, config: { tools: { exec: { timeoutSec: 3 } } } });
  });

  it('uses $HOME/.config/procctl/config.json when XDG_CONFIG_HOME is unset', () => {
    const file = writeJson(join(dir, 'home', '.config', 'procctl', 'config.json'), { tools: { exec: { killGraceMs: 17 } } });
    const { config, file: used } = loadConfig(undefined, { HOME: join(dir, 'home') });
    expect(used).toBe(file);
    expect(config.tools.exec.killGraceMs).toBe(17);
  });

  it('reports a broken XDG file instead of skipping it', () => {
    const xdg = writeJson(join(dir, 'xdg', 'procctl', 'config.json'), '{');
    const e = configError(() => loadConfig(undefined, env));
    expect(e.message).toContain(xdg);
  });
});

describe('loadConfig: environment over a broken file', () => {
  it('still reports a file section of the wrong type when a variable sets a key below it', () => {
    const file = writeJson(join(dir, 'c.json'), { tools: 5 });
    const e = configError(() => loadConfig(file, { ...env, PROCCTL_TIMEOUT_SEC: '5' }));
    expect(e.message).toContain('tools');
    expect(e.message).toContain(file);
  });
});

describe('scopes and tokens', () => {
  it('scopeTokens is refused with its replacement named', () => {
    expect(() => parseConfig({ scopeTokens: { ci: 'x' } })).toThrow(/config key scopeTokens was replaced: write each scope's token as scopes\.NAME\.token/);
  });

  it('a scope defaults to background sessions allowed and elevated denied', () => {
    expect(parseConfig({ scopes: { ci: { token: 'sha256:' + 'a'.repeat(64) } } }).scopes.ci).toEqual({ token: 'sha256:' + 'a'.repeat(64), background: true, elevated: 'deny', selfApprove: false });
  });

  it('refuses a bad scope name, an unknown policy value and an unknown key, naming them', () => {
    expect(() => parseConfig({ scopes: { 'bad name': {} } })).toThrow(/scopes/);
    expect(() => parseConfig({ scopes: { ci: { elevated: 'sometimes' } } })).toThrow(/invalid config scopes\.ci\.elevated = "sometimes"/);
    expect(() => parseConfig({ scopes: { ci: { tokne: 'x' } } })).toThrow(/unknown config key scopes\.ci\.tokne/);
  });
});

describe('telemetry.otlp', () => {
  it('is off by default, with no headers and a 10 s interval', () => {
    expect(parseConfig({}).telemetry).toEqual({ otlp: { headers: {}, intervalMs: 10_000 } });
  });

  it('takes an http(s) base URL and sends each signal under it', () => {
    const c = parseConfig({ telemetry: { otlp: { endpoint: 'https://otel.example.com:4318/prefix/', headers: { authorization: 'Bearer x' } } } });
    expect(c.telemetry.otlp.endpoint).toBe('https://otel.example.com:4318/prefix/');
    expect(otlpSignalUrl(c.telemetry.otlp.endpoint!, 'traces')).toBe('https://otel.example.com:4318/prefix/v1/traces');
    expect(otlpSignalUrl('http://127.0.0.1:4318', 'metrics')).toBe('http://127.0.0.1:4318/v1/metrics');
  });

  it.each([
    ['127.0.0.1:4318', /no http:\/\/ or https:\/\/ in front/],
    ['localhost:4318', /no http:\/\/ or https:\/\/ in front/],
    ['http://', /not a URL/],
    ['grpc://127.0.0.1:4317', /grpc: is not OTLP\/HTTP/],
    ['http://127.0.0.1:4318/v1/traces', /names one signal's path \(\/v1\/traces\)/],
    ['http://127.0.0.1:4318/?x=1', /query or fragment/],
  ])('refuses the endpoint %s, naming the key and the fix', (endpoint, why) => {
    const e = configError(() => parseConfig({ telemetry: { otlp: { endpoint } } }));
    expect(e.message).toContain(`invalid config telemetry.otlp.endpoint = ${JSON.stringify(endpoint)}`);
    expect(e.message).toMatch(why);
    expect(e.message).toContain('such as http://127.0.0.1:4318 (procctld adds /v1/traces and /v1/metrics)');
  });

  it('refuses a header with a line break, and an unknown key under otlp', () => {
    expect(configError(() => parseConfig({ telemetry: { otlp: { headers: { 'x-key': 'a\r\nb' } } } })).message).toContain('telemetry.otlp.headers.x-key');
    expect(configError(() => parseConfig({ telemetry: { otlp: { url: 'http://x' } } })).message).toContain('unknown config key telemetry.otlp.url');
  });
});
