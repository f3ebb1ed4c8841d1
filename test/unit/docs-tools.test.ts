import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
// @ts-expect-error: a plain ES module script, without type declarations
import { renderToolsDoc, TOOLS_DOC } from '../../scripts/docs-tools.mjs';
import { toolDescriptions } from '../../src/schema/tools.js';

describe('docs/tools.md', () => {
  it('is what `npm run docs:tools` generates from the schemas tools.list returns', () => {
    const fresh = renderToolsDoc(toolDescriptions());
    // On a difference: run `npm run docs:tools` and commit docs/tools.md.
    expect(readFileSync(TOOLS_DOC, 'utf8')).toBe(fresh);
  });

  it('names every parameter of every tool', () => {
    const doc = readFileSync(TOOLS_DOC, 'utf8');
    for (const t of toolDescriptions()) {
      expect(doc).toContain(`## \`${t.name}\``);
      for (const name of Object.keys((t.inputSchema.properties ?? {}) as object)) expect(doc).toContain(`| \`${name}\` |`);
    }
  });
});
