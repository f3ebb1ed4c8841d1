/** Strip terminal control sequences and carriage returns, keeping the text a person would see. */
export function plainText(text: string): string {
  return text
    .replace(/\x1b\[[0-?]*[ -/]*[@-~]/g, '')
    .replace(/\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)/g, '')
    .replace(/\x1b[()*+][0-9A-Za-z]/g, '')
    .replace(/\x1b[@-_0-9=>]/g, '')
    .replace(/\r\n/g, '\n')
    .replace(/\r/g, '\n');
}

/** The last non-blank line, trimmed at the end. */
export function lastLine(text: string): string {
  const lines = plainText(text).split('\n');
  for (let i = lines.length - 1; i >= 0; i--) if (lines[i].trim()) return lines[i].trimEnd();
  return '';
}

/**
 * Did the command leave a prompt on the line it waits on? Not when its output is empty or ends
 * with a newline: a program reading from a pipe often prints no question at all (bash's
 * `read -p` shows its prompt only on a terminal), and under a terminal it would have.
 */
export function promptShown(tail: string): boolean {
  const lines = plainText(tail).split('\n');
  return lines[lines.length - 1].trim() !== '';
}

/**
 * The phrases agent frameworks watch for when a tool asks for confirmation (SPEC §7): a last
 * line holding one of them, as whole words and in any case, is a yes/no question.
 */
export const CONFIRM_PHRASES = [
  'please confirm',
  'do you confirm',
  'are you sure',
  'shall i proceed',
  'would you like me to proceed',
  'do you want to proceed',
  'do you want me to',
  'should i go ahead',
  'confirm before',
  'confirmation required',
  'waiting for your confirmation',
  'need your approval',
];
const phrase = (p: string) => new RegExp(`\\b${p.replace(/ /g, '\\s+')}\\b`, 'i');

const CONFIRM = [
  ...CONFIRM_PHRASES.map(phrase),
  /\[\s*y\s*\/\s*n\s*\]/i,
  /\(\s*y\s*\/\s*n\s*\)/i,
  /\(\s*yes\s*\/\s*no\s*\)/i,
  /\[\s*yes\s*\/\s*no\s*\]/i,
  /\bproceed\s*\?/i,
  /\bdo you want to continue\b/i,
  /\bcontinue\s*\?/i,
  /\boverwrite\b.*\?/i,
];
const SECRET = /\b(password|passphrase|passcode|pass phrase|token|secret|api key|pin)\b[^\n]*[:?]\s*$/i;
/** A line that ends like a question or a field: `Name: `, `Continue? `, `> `, `#? `. */
const GENERIC = /([:?>#$]|\]|\))\s*$/;
const MENU_ITEM = /^\s*\(?(\d{1,2})[).:]\s+(\S.*)$/;

export type InterruptKind = 'confirm' | 'secret' | 'select' | 'text';

export interface PromptInfo {
  kind: InterruptKind;
  /** The prompt text (the last line). */
  reason: string;
  options?: { value: string; label: string }[];
  /** A recognised prompt (not only a line that ends in `:` or `?`). */
  recognised: boolean;
}

/** Does the last line look like a prompt? Recognised patterns, the config's extra ones, or a generic ending. */
export function looksLikePrompt(line: string, extra: RegExp[]): 'recognised' | 'generic' | undefined {
  if (!line) return undefined;
  if (CONFIRM.some((re) => re.test(line)) || SECRET.test(line) || extra.some((re) => re.test(line))) return 'recognised';
  return GENERIC.test(line) ? 'generic' : undefined;
}

/** Numbered options just above the prompt line (`1) staging`, `2. prod`). */
function menuOptions(lines: string[]): { value: string; label: string }[] {
  const options: { value: string; label: string }[] = [];
  for (let i = lines.length - 2; i >= 0 && options.length < 50; i--) {
    const m = MENU_ITEM.exec(lines[i]);
    if (!m) {
      if (!lines[i].trim() && options.length === 0) continue;
      break;
    }
    options.unshift({ value: m[1], label: m[2].trim() });
  }
  return options.length >= 2 ? options : [];
}

/** What the session is asking, from the end of its output. */
export function classifyPrompt(tail: string, extra: RegExp[] = []): PromptInfo {
  const lines = plainText(tail)
    .split('\n')
    .map((l) => l.trimEnd());
  while (lines.length && !lines[lines.length - 1].trim()) lines.pop();
  const reason = lines[lines.length - 1] ?? '';
  const recognised = looksLikePrompt(reason, extra) === 'recognised';
  if (SECRET.test(reason)) return { kind: 'secret', reason, recognised: true };
  if (CONFIRM.some((re) => re.test(reason))) return { kind: 'confirm', reason, recognised: true };
  const options = menuOptions(lines);
  if (options.length) return { kind: 'select', reason, options, recognised: true };
  return { kind: 'text', reason, recognised };
}

/** Compile the config's extra prompt patterns; a bad one is skipped (the config schema checks them too). */
export function compilePatterns(patterns: string[]): RegExp[] {
  const out: RegExp[] = [];
  for (const p of patterns) {
    try {
      out.push(new RegExp(p, 'i'));
    } catch {
      // validated at config load
    }
  }
  return out;
}
