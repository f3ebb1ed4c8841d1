import { z } from 'zod';
import { SHELL_NAME } from './exec.js';

/** `shell.list` takes nothing; `shell.close` the shell's name (SPEC §20). */
export const ShellListParamsSchema = z.strictObject({});
export const ShellCloseParamsSchema = z.strictObject({
  name: z.string().regex(SHELL_NAME, 'name must be a shell name: 1-64 letters, digits, ".", "_" or "-"').describe('The shell to close; a command running in it ends with it.'),
});
