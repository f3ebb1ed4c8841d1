import { describe, expect, it } from 'vitest';
import { ProcctlError } from '../../src/base/errors.js';
import { ExecParamsSchema } from '../../src/schema/exec.js';
import { parseParams } from '../../src/schema/parse.js';
import { PROCESS_ACTIONS, ProcessParamsSchema, normalizeSignal } from '../../src/schema/process.js';
import { toolDescriptions } from '../../src/schema/tools.js';

function invalidParams(fn: () => unknown): ProcctlError {
  try {
    fn();
  } catch (err) {
    expect(err).toBeInstanceOf(ProcctlError);
    expect((err as ProcctlError).kind).toBe('invalid');
    return err as ProcctlError;
  }
  throw new Error('expected the params to be refused');
}

const exec = (raw: unknown) => parseParams(ExecParamsSchema, raw, 'exec');
const proc = (raw: unknown) => parseParams(ProcessParamsSchema, raw, 'process');

describe('exec params', () => {
  it('accepts a command alone', () => {
    expect(exec({ command: 'ls' })).toEqual({ command: 'ls' });
  });

  it('accepts every documented param', () => {
    const all = {
      command: 'make',
      workdir: '/tmp',
      env: { A: '1' },
      yieldMs: 500,
      background: true,
      timeout: 0,
      pty: false,
      stdin: 'null',
      elevated: false,
      key: 'build',
      ifRunning: 'keep',
      name: 'build',
    };
    expect(exec(all)).toEqual(all);
  });

  it('requires command, naming the field', () => {
    const e = invalidParams(() => exec({}));
    expect(e.details).toMatchObject({ path: ['command'] });
    expect(e.message).toContain('command');
  });

  it('treats missing params like an empty object', () => {
    const e = invalidParams(() => exec(undefined));
    expect(e.details).toMatchObject({ path: ['command'] });
  });

  it('refuses an empty command', () => {
    const e = invalidParams(() => exec({ command: '' }));
    expect(e.message).toContain('command must not be empty');
  });

  it('refuses an unknown param, naming it and its path', () => {
    const e = invalidParams(() => exec({ command: 'ls', cwd: '/tmp' }));
    expect(e.details).toMatchObject({ path: ['cwd'], schema: true });
    expect(e.message).toBe('invalid exec params: cwd: unknown parameter "cwd"');
  });

  it('names every unknown param', () => {
    const e = invalidParams(() => exec({ command: 'ls', a: 1, b: 2 }));
    expect(e.message).toContain('unknown parameters "a", "b"');
  });

  it('refuses a wrong type with the path of the field', () => {
    const e = invalidParams(() => exec({ command: 'ls', yieldMs: 'soon' }));
    expect(e.details).toMatchObject({ path: ['yieldMs'] });
    expect(e.message).toMatch(/^invalid exec params: yieldMs: /);
  });

  it('gives the nested path for a bad env value', () => {
    const e = invalidParams(() => exec({ command: 'ls', env: { A: 1 } }));
    expect(e.details).toMatchObject({ path: ['env', 'A'] });
  });

  it.each([
    [{ stdin: 'inherit' }, 'stdin'],
    [{ ifRunning: 'wait' }, 'ifRunning'],
    [{ timeout: -1 }, 'timeout'],
    [{ name: 'x'.repeat(201) }, 'name'],
  ])('refuses %j', (extra, field) => {
    const e = invalidParams(() => exec({ command: 'ls', ...extra }));
    expect(e.details).toMatchObject({ path: [field] });
  });

  it('refuses params that are not an object', () => {
    const e = invalidParams(() => exec('ls'));
    expect(e.details).toMatchObject({ path: [] });
    expect(e.message).toMatch(/^invalid exec params: /);
  });
});

describe('process params', () => {
  it.each(PROCESS_ACTIONS)('accepts action %s', (action) => {
    expect(proc({ action, sessionId: 'abc' })).toEqual({ action, sessionId: 'abc' });
  });

  it('accepts the log, write and kill params', () => {
    expect(proc({ action: 'log', sessionId: 's', offset: 0, limit: 10 })).toEqual({ action: 'log', sessionId: 's', offset: 0, limit: 10 });
    expect(proc({ action: 'write', sessionId: 's', data: 'y\n', eof: true })).toMatchObject({ data: 'y\n', eof: true });
    expect(proc({ action: 'kill', sessionId: 's', signal: 'SIGINT', graceMs: 100, reason: 'done' })).toMatchObject({ signal: 'SIGINT' });
    expect(proc({ action: 'kill', all: true })).toEqual({ action: 'kill', all: true });
  });

  it('refuses an unknown action, listing the actions', () => {
    const e = invalidParams(() => proc({ action: 'explode', sessionId: 'x' }));
    expect(e.details).toMatchObject({ path: ['action'], schema: true });
    for (const a of PROCESS_ACTIONS) expect(e.message).toContain(a);
    expect(e.message).toMatch(/^invalid process params: action: unknown action/);
  });

  it('refuses a missing action, listing the actions', () => {
    const e = invalidParams(() => proc({ sessionId: 'x' }));
    expect(e.details).toMatchObject({ path: ['action'] });
    for (const a of PROCESS_ACTIONS) expect(e.message).toContain(a);
  });

  it('refuses an unknown param, naming it', () => {
    const e = invalidParams(() => proc({ action: 'poll', sessionId: 'x', wait: 5 }));
    expect(e.details).toMatchObject({ path: ['wait'] });
    expect(e.message).toContain('unknown parameter "wait"');
  });

  it.each([
    [{ offset: -1 }, 'offset'],
    [{ offset: 1.5 }, 'offset'],
    [{ limit: 'all' }, 'limit'],
    [{ timeout: -5 }, 'timeout'],
    [{ graceMs: -1 }, 'graceMs'],
    [{ sessionId: '' }, 'sessionId'],
  ])('refuses %j', (extra, field) => {
    const e = invalidParams(() => proc({ action: 'log', sessionId: 'x', ...extra }));
    expect(e.details).toMatchObject({ path: [field] });
  });

  it('accepts signal names with or without SIG, in any case', () => {
    for (const signal of ['SIGTERM', 'term', 'Kill', 'SIGhup', 'INT']) {
      expect(proc({ action: 'kill', sessionId: 'x', signal }).signal).toBe(signal);
    }
  });

  it('refuses an unknown signal', () => {
    const e = invalidParams(() => proc({ action: 'kill', sessionId: 'x', signal: 'SIGNOPE' }));
    expect(e.details).toMatchObject({ path: ['signal'] });
    expect(e.message).toContain('unknown signal');
  });

  it('normalises signal names', () => {
    expect(normalizeSignal('term')).toBe('SIGTERM');
    expect(normalizeSignal('SIGkill')).toBe('SIGKILL');
    expect(normalizeSignal('Int')).toBe('SIGINT');
  });
});

describe('toolDescriptions', () => {
  const tools = toolDescriptions();
  const byName = Object.fromEntries(tools.map((t) => [t.name, t]));

  it('describes exec and process', () => {
    expect(tools.map((t) => t.name)).toEqual(['exec', 'process']);
    for (const t of tools) expect(t.description.length).toBeGreaterThan(20);
  });

  it('gives exec a JSON Schema object requiring only command and refusing unknown params', () => {
    const s = byName.exec.inputSchema as Record<string, any>;
    expect(s.$schema).toMatch(/json-schema\.org/);
    expect(s.type).toBe('object');
    expect(s.required).toEqual(['command']);
    expect(s.additionalProperties).toBe(false);
    expect(Object.keys(s.properties).sort()).toEqual(
      ['background', 'changes', 'command', 'elevated', 'env', 'ifRunning', 'key', 'limits', 'name', 'notify', 'pty', 'shell', 'stdin', 'timeout', 'waitFor', 'workdir', 'yieldMs', 'yieldOnQuietMs'].sort(),
    );
    // waitFor: one of four strict shapes; notify: a word or {match}.
    expect(s.properties.waitFor.anyOf.map((o: any) => Object.keys(o.properties).sort())).toEqual([['host', 'port'], ['output'], ['http', 'status'], ['file']]);
    expect(s.properties.notify.anyOf[0]).toMatchObject({ enum: ['exit', 'failure', 'never'] });
    expect(s.properties.command).toMatchObject({ type: 'string', minLength: 1 });
    expect(s.properties.stdin).toMatchObject({ enum: ['pipe', 'null'] });
    expect(s.properties.ifRunning).toMatchObject({ enum: ['replace', 'reject', 'keep'] });
    expect(s.properties.env).toMatchObject({ type: 'object', additionalProperties: { type: 'string' } });
    expect(typeof s.properties.yieldMs.description).toBe('string');
  });

  it('gives process a JSON Schema object with the action enum', () => {
    const s = byName.process.inputSchema as Record<string, any>;
    expect(s.type).toBe('object');
    expect(s.required).toEqual(['action']);
    expect(s.additionalProperties).toBe(false);
    expect(s.properties.action.enum).toEqual([...PROCESS_ACTIONS]);
    expect(s.properties.offset).toMatchObject({ type: 'integer', minimum: 0 });
    expect(s.properties.signal.type).toBe('string');
  });

  it('is plain JSON', () => {
    expect(JSON.parse(JSON.stringify(tools))).toEqual(tools);
  });
});
