/**
 * A pending interrupt (SPEC §7: a question a running command waits on; §8: an approval; §16: held
 * changes waiting for a person) as an
 * MCP form elicitation, and the person's answer back as the `input` of `process resume`. Pure:
 * the server decides when to ask, this only says what to ask and how to read the answer.
 */

/** The interrupt as the daemon reports it (`interrupt` of an exec, poll or list result). */
export interface InterruptView {
  id: string;
  kind: 'confirm' | 'text' | 'secret' | 'select' | 'approval' | 'changes';
  reason: string;
  fields: { name: string; type: 'confirm' | 'text' | 'secret' | 'select'; label: string; required: boolean; options?: { value: string; label: string }[] }[];
  expiresAt: string;
}

/** What a form elicitation asks for: a flat object of primitive properties (the MCP restriction). */
export interface ElicitationForm {
  message: string;
  requestedSchema: {
    type: 'object';
    properties: Record<string, Record<string, unknown>>;
    required: string[];
  };
}

/** The answer `process resume` takes. */
export type ResumeInput = { confirm: boolean } | { text: string };

/**
 * The question to put to the person. confirm → boolean, text and secret → string (a secret is
 * marked as such in its description: MCP forms have no password type), select → an enum of its
 * option values, titled by their labels.
 */
export function elicitationFor(interrupt: InterruptView, session: { sessionId: string; name?: string; command?: string }): ElicitationForm {
  const field = interrupt.fields[0];
  const name = field?.name ?? 'answer';
  let property: Record<string, unknown>;
  const type: string = field?.type ?? interrupt.kind;
  switch (type) {
    case 'confirm':
    case 'approval':
    case 'changes':
      property = { type: 'boolean', title: field?.label ?? 'Confirm', description: interrupt.reason };
      break;
    case 'select':
      property = {
        type: 'string',
        title: field.label,
        oneOf: (field.options ?? []).map((o) => ({ const: o.value, title: o.label })),
      };
      break;
    case 'secret':
      property = { type: 'string', title: field.label, description: 'A secret: it is sent to the command only, never shown in its output or the log.' };
      break;
    default:
      property = { type: 'string', title: field?.label ?? 'Answer' };
  }
  const who = session.name ? `${session.name} (session ${session.sessionId})` : `session ${session.sessionId}`;
  const message =
    interrupt.kind === 'approval'
      ? `A command needs your approval before it runs: ${session.command ?? who}\nWhy: ${interrupt.reason}`
      : interrupt.kind === 'changes'
        ? `${who} ran in review mode; what it changed waits for your approval before it reaches the workspace (yes applies, no discards):\n${interrupt.reason}`
        : `${who} is waiting for input: ${interrupt.reason}`;
  return { message, requestedSchema: { type: 'object', properties: { [name]: property }, required: [name] } };
}

/**
 * The person's accepted content as the `input` of `process resume`, or a reason it cannot be
 * (nothing given, a value of the wrong type, an option that is not offered).
 */
export function resumeInputFrom(interrupt: InterruptView, content: Record<string, unknown> | undefined): ResumeInput | { problem: string } {
  const field = interrupt.fields[0];
  const name = field?.name ?? 'answer';
  const value = content?.[name];
  const type = field?.type ?? (interrupt.kind === 'approval' || interrupt.kind === 'changes' ? 'confirm' : interrupt.kind);
  if (type === 'confirm') {
    return typeof value === 'boolean' ? { confirm: value } : { problem: `the answer to "${name}" must be true or false` };
  }
  if (typeof value !== 'string') return { problem: `the answer to "${name}" must be text` };
  if (type === 'select' && !(field.options ?? []).some((o) => o.value === value)) {
    return { problem: `"${value}" is not one of the options of "${name}"` };
  }
  return { text: value };
}
