// The changes of a review session (SPEC §16): read the upper directory, plan an apply, apply,
// undo, and keep the review's state. Three steps kept apart; the plan is the table between them.
export { read, totals, type ReadOptions } from './upper.js';
export { diff, MAX_DIFF_BYTES, DEFAULT_DIFF_LINES, type DiffPage } from './diff.js';
export { plan, REFUSALS, type PlanOptions } from './plan.js';
export { apply, type ApplyOptions, type ApplyResult } from './apply.js';
export { undo, type UndoOptions, type UndoResult } from './undo.js';
export { ReviewStore, ReviewRecordSchema, ReviewStateSchema, type ReviewRecord, type ReviewState } from './store.js';
export { fromBytes, toBytes, shown, unsafeName, type RelPath } from './paths.js';
export type { XattrFormat } from './overlay.js';
export * from './types.js';
