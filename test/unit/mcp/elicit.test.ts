import { describe, expect, it } from 'vitest';
import { elicitationFor, resumeInputFrom, type InterruptView } from '../../../src/mcp/elicit.js';

const question = (type: InterruptView['fields'][0]['type'], extra: Partial<InterruptView['fields'][0]> = {}): InterruptView => ({
  id: 'int_1',
  kind: type,
  reason: 'the last line',
  fields: [{ name: type, type, label: 'the last line', required: true, ...extra }],
  expiresAt: '2026-11-23T00:00:00.000Z',
});

describe('an interrupt as an elicitation', () => {
  it.each([
    ['confirm', { type: 'boolean' }],
    ['text', { type: 'string' }],
    ['secret', { type: 'string' }],
  ] as const)('%s becomes %j', (type, shape) => {
    const form = elicitationFor(question(type), { sessionId: 'abc' });
    expect(form.requestedSchema).toMatchObject({ type: 'object', properties: { [type]: shape }, required: [type] });
    expect(form.message).toContain('the last line');
  });

  it('select becomes an enum of its option values, titled by their labels', () => {
    const form = elicitationFor(question('select', { options: [{ value: '1', label: 'Apples' }, { value: '2', label: 'Pears' }] }), { sessionId: 'abc' });
    expect(form.requestedSchema.properties.select).toEqual({
      type: 'string',
      title: 'the last line',
      oneOf: [
        { const: '1', title: 'Apples' },
        { const: '2', title: 'Pears' },
      ],
    });
  });

  it('an approval is a boolean, and its message names the command and why', () => {
    const approval: InterruptView = {
      id: 'apr_1',
      kind: 'approval',
      reason: 'changes production',
      fields: [{ name: 'confirm', type: 'confirm', label: 'Run this command? ./deploy.sh', required: true }],
      expiresAt: '2026-11-23T00:00:00.000Z',
    };
    const form = elicitationFor(approval, { sessionId: 'abc', command: './deploy.sh' });
    expect(form.requestedSchema.properties.confirm.type).toBe('boolean');
    expect(form.message).toContain('./deploy.sh');
    expect(form.message).toContain('changes production');
    expect(resumeInputFrom(approval, { confirm: false })).toEqual({ confirm: false });
  });
});

describe('the answer as resume input', () => {
  it('takes the value of the right type, and says what is wrong otherwise', () => {
    expect(resumeInputFrom(question('confirm'), { confirm: true })).toEqual({ confirm: true });
    expect(resumeInputFrom(question('confirm'), { confirm: 'yes' })).toHaveProperty('problem');
    expect(resumeInputFrom(question('text'), { text: 'Ada' })).toEqual({ text: 'Ada' });
    expect(resumeInputFrom(question('secret'), { secret: 'hunter2' })).toEqual({ text: 'hunter2' });
    expect(resumeInputFrom(question('text'), {})).toHaveProperty('problem');
    const menu = question('select', { options: [{ value: '1', label: 'Apples' }] });
    expect(resumeInputFrom(menu, { select: '1' })).toEqual({ text: '1' });
    expect(resumeInputFrom(menu, { select: '9' })).toEqual({ problem: '"9" is not one of the options of "select"' });
  });
});
