import { accessSync, constants, statSync } from 'node:fs';
import { delimiter, join } from 'node:path';

/** A file this process may execute (a directory with its x bit is not one). */
export function isExecutable(path: string): boolean {
  try {
    accessSync(path, constants.X_OK);
    return statSync(path).isFile();
  } catch {
    return false;
  }
}

/** Where a program of this name would run from, as a shell finds it (a name with a `/` as it is; an empty PATH entry is `.`), or undefined. */
export function findProgram(name: string, path: string | undefined): string | undefined {
  if (name.includes('/')) return isExecutable(name) ? name : undefined;
  return (path ?? '')
    .split(delimiter)
    .map((dir) => join(dir || '.', name))
    .find(isExecutable);
}
