import { readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import ts from 'typescript';
import { describe, expect, it } from 'vitest';

/**
 * The layers of docs/architecture.md, held: every import in src/ (type-only ones too) must run
 * down the table on that page, and no file may import itself back through others.
 */

const ROOT = resolve(import.meta.dirname, '..', '..');
const SRC = join(ROOT, 'src');

interface Layers {
  /** Layer → the layers it may import ("leaves" expanded). */
  allowed: Map<string, Set<string>>;
  /** Exact file → file edges allowed besides. */
  entries: Set<string>;
}

/** The table between the `<!-- layers -->` markers of docs/architecture.md. */
function readLayers(): Layers {
  const doc = readFileSync(join(ROOT, 'docs', 'architecture.md'), 'utf8');
  const start = doc.indexOf('<!-- layers');
  const end = doc.indexOf('<!-- /layers -->');
  if (start < 0 || end < 0) throw new Error('docs/architecture.md has no <!-- layers --> table');
  const rows = doc
    .slice(start, end)
    .split('\n')
    .filter((l) => l.startsWith('| `'))
    .map((l) => l.split('|').slice(1, 3));
  const names = (cell: string) => [...cell.matchAll(/`([^`]+)`/g)].map((m) => m[1].replace(/\/$/, ''));
  const leaves = names(rows[0][0]);
  const allowed = new Map<string, Set<string>>();
  const entries = new Set<string>();
  for (const [who, what] of rows) {
    const [mayImport, entryPart = ''] = what.split('entry points');
    const targets = new Set(names(mayImport));
    if (/\bleaves\b/.test(mayImport)) for (const leaf of leaves) targets.add(leaf);
    for (const m of entryPart.matchAll(/`([^`]+)` → `([^`]+)`/g)) entries.add(`${m[1]} -> ${m[2]}`);
    for (const layer of names(who)) allowed.set(layer, targets);
  }
  return { allowed, entries };
}

function sourceFiles(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    const path = join(dir, name);
    if (statSync(path).isDirectory()) return sourceFiles(path);
    return path.endsWith('.ts') ? [path] : [];
  });
}

/** A file's layer: its top folder under src/, or the file itself for a top-level file. */
const layerOf = (file: string) => {
  const rel = relative(SRC, file);
  return rel.includes('/') ? rel.split('/')[0] : rel;
};

/** Every relative import of every file of src/, as resolved source paths. */
function importGraph(): Map<string, string[]> {
  const graph = new Map<string, string[]>();
  for (const file of sourceFiles(SRC)) {
    const { importedFiles } = ts.preProcessFile(readFileSync(file, 'utf8'), true, true);
    const targets = importedFiles
      .map((i) => i.fileName)
      .filter((name) => name.startsWith('.'))
      .map((name) => resolve(dirname(file), name).replace(/\.js$/, '.ts'));
    graph.set(file, targets);
  }
  return graph;
}

/** Each circle of the graph once, as the files around it. */
function circles(graph: Map<string, string[]>): string[][] {
  const found: string[][] = [];
  const state = new Map<string, 'open' | 'done'>();
  const stack: string[] = [];
  const visit = (file: string) => {
    state.set(file, 'open');
    stack.push(file);
    for (const next of graph.get(file) ?? []) {
      if (state.get(next) === 'open') found.push(stack.slice(stack.indexOf(next)).map((f) => relative(SRC, f)));
      else if (!state.has(next)) visit(next);
    }
    stack.pop();
    state.set(file, 'done');
  };
  for (const file of graph.keys()) if (!state.has(file)) visit(file);
  return found;
}

/** Edges that run against the table, as `from -> to` (paths under src/). */
export function violations(graph: Map<string, string[]>, layers: Layers): string[] {
  const out: string[] = [];
  for (const [file, targets] of graph) {
    const from = layerOf(file);
    for (const target of targets) {
      const to = layerOf(target);
      if (from === to) continue;
      const edge = `${relative(SRC, file)} -> ${relative(SRC, target)}`;
      if (layers.allowed.get(from)?.has(to) || layers.entries.has(edge)) continue;
      out.push(edge);
    }
  }
  return out;
}

describe('the layers of docs/architecture.md', () => {
  const layers = readLayers();
  const graph = importGraph();

  it('place every folder and top-level file of src/', () => {
    const unplaced = [...new Set([...graph.keys()].map(layerOf))].filter((l) => !layers.allowed.has(l));
    expect(unplaced, 'add them to the table in docs/architecture.md').toEqual([]);
  });

  it('hold: no import runs up the table', () => {
    expect(violations(graph, layers)).toEqual([]);
  });

  it('hold: no file imports itself back through others', () => {
    expect(circles(graph)).toEqual([]);
  });

  it('are checked for real: an import that climbs, or a circle, is found', () => {
    const climbing = new Map(graph);
    const config = join(SRC, 'config', 'schema.ts');
    climbing.set(config, [...(graph.get(config) ?? []), join(SRC, 'tools', 'exec.ts')]);
    expect(violations(climbing, layers)).toEqual(['config/schema.ts -> tools/exec.ts']);
    expect(circles(climbing).length).toBeGreaterThan(0);
  });
});
