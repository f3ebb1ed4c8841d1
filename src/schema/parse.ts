import type { z } from 'zod';
import { ProcctlError } from '../base/errors.js';

/** Validate params at the boundary; a failure names the field, the problem and its path. */
export function parseParams<S extends z.ZodType>(schema: S, raw: unknown, what: string): z.output<S> {
  const result = schema.safeParse(raw ?? {});
  if (result.success) return result.data;
  const issue = result.error.issues[0];
  let path = issue.path.map(String);
  let message = issue.message;
  if (issue.code === 'unrecognized_keys') {
    path = [...path, issue.keys[0]];
    message = `unknown parameter${issue.keys.length > 1 ? 's' : ''} ${issue.keys.map((k) => `"${k}"`).join(', ')}`;
  }
  const where = path.length ? `${path.join('.')}: ` : '';
  throw new ProcctlError('invalid', `invalid ${what} params: ${where}${message}`, { path, schema: true });
}
