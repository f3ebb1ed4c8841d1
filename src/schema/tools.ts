import { z } from 'zod';
import { ExecParamsSchema } from './exec.js';
import { ProcessParamsSchema } from './process.js';

export interface ToolDescription {
  name: 'exec' | 'process';
  description: string;
  inputSchema: Record<string, unknown>;
}

/** The two tools as an agent harness sees them, with JSON Schema derived from the zod schemas. */
export function toolDescriptions(): ToolDescription[] {
  return [
    { name: 'exec', description: ExecParamsSchema.description ?? '', inputSchema: z.toJSONSchema(ExecParamsSchema, { io: 'input' }) },
    { name: 'process', description: ProcessParamsSchema.description ?? '', inputSchema: z.toJSONSchema(ProcessParamsSchema, { io: 'input' }) },
  ];
}
