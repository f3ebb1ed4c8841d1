import { ProcctlError, type ErrorKind } from '../base/errors.js';

export const PARSE_ERROR = -32700;
export const INVALID_REQUEST = -32600;
export const METHOD_NOT_FOUND = -32601;
export const INVALID_PARAMS = -32602;
export const INTERNAL_ERROR = -32603;

/** Application error codes, one per kind, within -32000..-32099 (SPEC §4). */
export const KIND_CODES: Record<ErrorKind, number> = {
  not_found: -32001,
  conflict: -32002,
  invalid: -32003,
  forbidden: -32004,
  limit: -32005,
  unavailable: -32006,
  restarting: -32007,
};

export interface RpcError {
  code: number;
  message: string;
  data?: Record<string, unknown>;
}

/** The JSON-RPC error for anything a handler threw; only this layer knows the codes. */
export function toRpcError(err: unknown): RpcError {
  if (err instanceof ProcctlError) {
    const { schema, ...details } = err.details ?? {};
    const code = schema ? INVALID_PARAMS : KIND_CODES[err.kind];
    return { code, message: err.message, data: { kind: err.kind, ...details } };
  }
  const message = err instanceof Error ? err.message : String(err);
  return { code: INTERNAL_ERROR, message: `internal error: ${message}` };
}
