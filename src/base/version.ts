import { readFileSync } from 'node:fs';

/** The package version, read once from procctl's package.json above the build (src/base/, dist/src/base/ or the CLI bundle). */
export function packageVersion(): string {
  for (const rel of ['../../package.json', '../../../package.json', '../package.json']) {
    try {
      const pkg = JSON.parse(readFileSync(new URL(rel, import.meta.url), 'utf8'));
      if (pkg.name === 'procctl') return pkg.version as string;
    } catch {
      // try the next layout
    }
  }
  return '0.0.0';
}
