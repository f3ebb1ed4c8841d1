import { realpathSync } from 'node:fs';
import { under } from './bwrap.js';

/** The operator's workspaces for a scope (SPEC §12): the scope's own list replaces the global one. */
export function workspacesOf(config: { sandbox: { workspaces: string[] }; scopes: Record<string, { workspaces?: string[] }> }, scope: string): { list: string[]; key: string } {
  const own = Object.hasOwn(config.scopes, scope) ? config.scopes[scope].workspaces : undefined;
  return own ? { list: own, key: `scopes.${scope}.workspaces` } : { list: config.sandbox.workspaces, key: 'sandbox.workspaces' };
}

/** A path with its symbolic links resolved, or undefined when it does not exist. */
function real(path: string): string | undefined {
  try {
    return realpathSync(path);
  } catch {
    return undefined;
  }
}

/**
 * What a session may write in workspace-write: the operator's workspaces and `sandbox.writable`
 * (each resolved through symbolic links, so a link cannot lead a bind elsewhere), never the
 * request's workdir as such. A workdir outside them runs read-only there, and `note` says so for
 * the answer's first line.
 */
export function writableTrees(
  workspaces: { list: string[]; key: string },
  extra: readonly string[],
  workdir: string,
): { writable: string[]; workspaces: string[]; note?: string } {
  const trees = workspaces.list.map(real).filter((p): p is string => p !== undefined);
  if (trees.length === 0) {
    return { writable: [], workspaces: [], note: `the sandbox is workspace-write but no workspace is configured (${workspaces.key}): it runs read-only; an operator adds the trees agents may write to ${workspaces.key}` };
  }
  const writable = [...trees, ...extra.map(real).filter((p): p is string => p !== undefined)];
  const at = real(workdir) ?? workdir;
  if (writable.some((w) => under(at, w))) return { writable, workspaces: trees };
  return { writable, workspaces: trees, note: `${workdir} is outside the workspaces (${workspaces.list.join(', ')}): it runs read-only there; run it in a workspace, or an operator adds it to ${workspaces.key}` };
}
