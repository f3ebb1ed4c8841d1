import type { Socket } from 'node:net';

/** Join two streams both ways; either end closing or failing closes the other. */
export function splice(a: Socket, b: Socket): void {
  a.pipe(b);
  b.pipe(a);
  const close = () => {
    a.destroy();
    b.destroy();
  };
  a.on('error', close).on('close', close);
  b.on('error', close).on('close', close);
}
