import { describe, expect, it } from 'vitest';
import { ConfigError, parseConfig } from '../../../src/config/load.js';
import { compileRules, decide, type ApprovalRuleConfig } from '../../../src/policy/approvals.js';
import { patternError } from '../../../src/config/pattern.js';

const rules = (list: ApprovalRuleConfig[]) => compileRules(list);

describe('decide', () => {
  const compiled = rules([
    { match: '^git status', action: 'allow' },
    { match: '\\brm\\s+-rf\\b', action: 'deny', reason: 'recursive delete' },
    { match: '^git ', action: 'ask', reason: 'git changes things' },
    { match: 'deploy', action: 'deny', scopes: ['ci', 'bots'] },
    { match: '(?i)^SUDO\\b', action: 'ask' },
  ]);

  it.each([
    ['ls -la', undefined],
    ['git status --short', 'allow'],
    ['git status; rm -rf /', 'allow'],
    ['cd x && rm -rf build', 'deny'],
    ['rm -rfv x', undefined],
    ['git push', 'ask'],
    ['sudo apt install x', 'ask'],
    ['Sudo whoami', 'ask'],
    ['pseudo x', undefined],
  ])('%s → %s', (command, action) => {
    expect(decide(compiled, command, 'default')?.action).toBe(action);
  });

  it('first match wins, and the decision names the rule', () => {
    const d = decide(compiled, 'git commit && rm -rf .', 'default');
    expect(d).toMatchObject({ action: 'deny', rule: { index: 1, match: '\\brm\\s+-rf\\b', reason: 'recursive delete' } });
  });

  it('a rule with scopes applies only in those scopes', () => {
    expect(decide(compiled, './deploy.sh', 'ci')?.action).toBe('deny');
    expect(decide(compiled, './deploy.sh', 'bots')?.action).toBe('deny');
    expect(decide(compiled, './deploy.sh', 'default')).toBeUndefined();
  });

  it('matches anywhere in the command, across lines only where the pattern says so', () => {
    const c = rules([
      { match: 'b.c', action: 'deny' },
      { match: '^second', action: 'ask' },
      { match: '(?m)^third', action: 'ask', reason: 'm' },
    ]);
    expect(decide(c, 'abxc', 's')?.action).toBe('deny');
    expect(decide(c, 'b\nc', 's')).toBeUndefined();
    expect(decide(c, 'first\nsecond', 's')).toBeUndefined();
    expect(decide(c, 'first\nthird', 's')?.rule.reason).toBe('m');
  });

  it('no rules: no decision', () => {
    expect(decide(rules([]), 'anything', 'default')).toBeUndefined();
  });

  it('a catastrophic pattern answers on a long command', () => {
    const c = rules([{ match: '^(a+)+$', action: 'deny' }]);
    const long = `${'a'.repeat(200_000)}!`;
    expect(decide(c, long, 'default')).toBeUndefined();
    expect(decide(c, 'a'.repeat(200_000), 'default')?.action).toBe('deny');
  });
});

describe('compileRules', () => {
  it('compiles a config once and keeps it', () => {
    const list: ApprovalRuleConfig[] = [{ match: 'x', action: 'deny' }];
    expect(compileRules(list)).toBe(compileRules(list));
    expect(compileRules([...list])).not.toBe(compileRules(list));
  });
});

describe('patterns', () => {
  it.each(['(?=x)', '(?!x)', '(?<=x)y', '(a)\\1', '[', 'a**', 'x{1001}'])('%s is not RE2', (p) => {
    expect(patternError(p)).toEqual(expect.any(String));
  });

  it.each(['^rm\\s', '(?i)drop\\s+table', '(?P<verb>\\w+)', '[[:alpha:]]+', '\\pL', '(?s)a.b'])('%s is RE2', (p) => {
    expect(patternError(p)).toBeUndefined();
  });

  it('an invalid pattern in the config names the rule by position and pattern', () => {
    let err: unknown;
    try {
      parseConfig({ approvals: { rules: [{ match: 'ok', action: 'allow' }, { match: '(?=x)y', action: 'deny' }] } });
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(ConfigError);
    const message = (err as Error).message;
    expect(message).toContain('approvals.rules.1.match');
    expect(message).toContain('approval rule 1');
    expect(message).toContain('"(?=x)y"');
  });

  it('the config takes scopes and a timeout, with a default of 300 s', () => {
    const c = parseConfig({ approvals: { rules: [{ match: 'x', action: 'ask', scopes: ['ci'] }] } });
    expect(c.approvals.timeoutSeconds).toBe(300);
    expect(c.approvals.rules[0].scopes).toEqual(['ci']);
    expect(parseConfig({ approvals: { timeoutSeconds: 1 } }).approvals.timeoutSeconds).toBe(1);
    expect(() => parseConfig({ approvals: { timeoutSeconds: 0 } })).toThrow(ConfigError);
    expect(() => parseConfig({ approvals: { rules: [{ match: 'x', action: 'ask', scopes: [] }] } })).toThrow(ConfigError);
    expect(() => parseConfig({ approvals: { rules: [{ match: 'x', action: 'ask', scopes: ['no spaces'] }] } })).toThrow(ConfigError);
  });
});
