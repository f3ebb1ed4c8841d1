import { randomBytes } from 'node:crypto';
import { closeSync, constants, openSync, rmSync, unlinkSync, writeSync } from 'node:fs';

/** Where the daemon-made approver credential lives: beside the socket, in its 0700 directory (SPEC §8). */
export const approverFile = (socketPath: string) => `${socketPath}.approver`;

/**
 * Make this start's approver credential: a random token in `<socket>.approver`, 0600, which
 * `procctl` and `procctl mcp` run by the same user read themselves. Whatever was at that name is
 * replaced, never followed. A sandboxed job sees neither the file nor its directory.
 */
export function makeApproverCredential(socketPath: string): string {
  const token = randomBytes(32).toString('base64url');
  const file = approverFile(socketPath);
  try {
    unlinkSync(file);
  } catch {
    // none there yet
  }
  const fd = openSync(file, constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL | constants.O_NOFOLLOW, 0o600);
  try {
    writeSync(fd, `${token}\n`);
  } finally {
    closeSync(fd);
  }
  return token;
}

export function removeApproverCredential(socketPath: string): void {
  rmSync(approverFile(socketPath), { force: true });
}
