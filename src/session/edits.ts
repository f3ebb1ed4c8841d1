/**
 * Counts every change, to any session, of what a list shows of it: its revision (its state, its
 * review, its ports, ...) and its output count. A figure made from many sessions (a page of
 * `process list`, tools/process/list.ts) that saw this count unchanged needs no look at any of them
 * to know it is still true. One count for the whole process: a change anywhere makes every kept
 * figure look again, which only costs the look it would have made anyway.
 */
let count = 0;

/** A session's revision or output count moved. */
export function sessionEdited(): void {
  count++;
}

/** The count now: equal to one taken before, no session changed since. */
export function sessionEdits(): number {
  return count;
}
