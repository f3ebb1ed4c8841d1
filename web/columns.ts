// The sessions table's column widths. Each row is its own grid on the same columns (so a cell that
// changes lays out its row, not the table: docs/benchmarks.md), and a grid row cannot size a column
// by the other rows' cells as a table does. So the widths are worked out here, from the text the
// shown rows hold, measured in the cells' own fonts: a column that must not wrap (an id, a status,
// a scope) is as wide as its widest value, and the others share what is left.

export interface Column<R> {
  /** The class of its cells (th and td). */
  cls: string;
  head: string;
  /** Its text in a row (what is measured); absent for a column of fixed width (`widest`). */
  text?: (row: R) => string;
  /** Never wraps: as wide as its widest value, in this font. */
  fit?: 'text' | 'bold' | 'code';
  /**
   * With `fit`, wraps past this many rem: at its spaces and after each "/", never inside a word
   * (as wide as its widest word, where that is wider).
   */
  wrapsPast?: number;
  /** The widest value it can show, for a column whose text changes without its row (a ticking runtime). */
  widest?: string;
  /** Wraps, and takes this share of the room the fitted columns leave, at least `minRem` wide. */
  share?: number;
  minRem?: number;
  /** Left out when no shown row has a value in it. */
  optional?: boolean;
  /** Only in the fleet view. */
  fleet?: boolean;
  /** Where the columns do not fit the room beside it, it goes on a line of its own under them. */
  stacks?: boolean;
}

export interface Layout {
  /** The grid's columns and the table's least width (it scrolls sideways below that). */
  style: Record<string, string>;
  /** The classes of the columns left out. */
  hidden: string[];
  /** The `stacks` column is on a line of its own, the room being too narrow for it beside the others. */
  stacked: boolean;
}

let fonts: Record<'text' | 'bold' | 'code' | 'head', string> | undefined;
let ctx: CanvasRenderingContext2D | null | undefined;
let rem = 16;
const measured = new Map<string, number>();

/** The fonts the cells are drawn in, read once from the page's own style. */
function fontsOf(): typeof fonts {
  const cell = document.createElement('td');
  const code = document.createElement('code');
  const head = document.createElement('th');
  const table = document.createElement('table');
  table.className = 'sessions';
  table.style.visibility = 'hidden';
  const row = table.insertRow();
  row.append(cell, head);
  cell.append(code);
  document.body.append(table);
  const font = (e: Element, weight?: string) => {
    const s = getComputedStyle(e);
    return `${weight ?? s.fontWeight} ${s.fontSize} ${s.fontFamily}`;
  };
  const out = { text: font(cell), bold: font(cell, '600'), code: font(code), head: font(head) };
  rem = parseFloat(getComputedStyle(document.documentElement).fontSize) || 16;
  table.remove();
  return out;
}

/** The width of a text in one of the cells' fonts, in CSS pixels (kept: the same values recur). */
function width(text: string, font: keyof NonNullable<typeof fonts>): number {
  if (!text) return 0;
  const key = `${font}\n${text}`;
  let w = measured.get(key);
  if (w === undefined) {
    fonts ??= fontsOf();
    ctx ??= document.createElement('canvas').getContext('2d');
    if (!ctx) return text.length * rem * 0.6;
    ctx.font = fonts![font];
    w = ctx.measureText(text).width;
    if (measured.size > 5000) measured.clear();
    measured.set(key, w);
  }
  return w;
}

let last: { key: string; layout: Layout } | undefined;

/**
 * The widths of the columns for these rows in `room` pixels (0: not known yet); the same object
 * while they do not change.
 */
export function columnsOf<R>(columns: Column<R>[], rows: R[], fleet: boolean, room: number): Layout {
  const shown = columns.filter((c) => fleet || !c.fleet);
  const hidden: string[] = [];
  const tracks: { px?: number; minPx: number; css: string; stacks: boolean }[] = [];
  const pad = rem; // a cell's padding, 0.5rem each side
  for (const c of shown) {
    let widest = c.widest ? width(c.widest, c.fit ?? 'text') : 0;
    let any = c.widest !== undefined;
    let words = 0;
    if (c.text && (c.fit || c.optional)) {
      for (const r of rows) {
        const t = c.text(r);
        if (!t) continue;
        any = true;
        if (!c.fit) continue;
        widest = Math.max(widest, width(t, c.fit));
        if (c.wrapsPast !== undefined) words = Math.max(words, ...t.split(/ |(?<=\/)/).map((w) => width(w, c.fit!)));
      }
    }
    if (c.optional && !any) {
      hidden.push(c.cls);
      continue;
    }
    if (c.fit) {
      if (c.wrapsPast !== undefined) widest = Math.min(widest, Math.max(words, c.wrapsPast * rem));
      // The heading wraps at its spaces, never inside a word.
      const head = Math.max(...c.head.split(' ').map((w) => width(w, 'head')));
      const px = Math.ceil(Math.max(widest, head) + pad + 1);
      tracks.push({ px, minPx: px, css: `${px}px`, stacks: false });
    } else {
      const min = c.minRem ?? 4;
      tracks.push({ minPx: min * rem, css: `minmax(${min}rem, ${c.share ?? 1}fr)`, stacks: c.stacks === true });
    }
  }
  const least = (list: typeof tracks) => Math.ceil(list.reduce((n, t) => n + t.minPx, 0));
  const stacked = room > 0 && least(tracks) > room && tracks.some((t) => t.stacks);
  const used = stacked ? tracks.filter((t) => !t.stacks) : tracks;
  const cols = used.map((t) => t.css).join(' ');
  const key = `${cols}|${hidden.join(' ')}|${stacked ? room : ''}`;
  if (last?.key === key) return last.layout;
  // Stacked, the command's line keeps to the room shown even where the figures beside it scroll.
  const style: Record<string, string> = { '--cols': cols, minWidth: `${least(used)}px`, ...(stacked ? { '--room': `${room}px` } : {}) };
  last = { key, layout: { style, hidden, stacked } };
  return last.layout;
}
