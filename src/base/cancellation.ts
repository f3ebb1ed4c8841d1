/**
 * What a wait needs of a cancel: whether it came, and to be told once it does. An AbortSignal is
 * one; a request's own cancel is another, lighter one (rpc/connection.ts): no AbortController is
 * made for an exec that waits for its end.
 */
export interface Cancellation {
  readonly aborted: boolean;
  addEventListener(type: 'abort', listener: () => void, options?: { once?: boolean }): void;
  removeEventListener(type: 'abort', listener: () => void): void;
}
