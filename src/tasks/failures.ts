/** How a task's failure is judged: fatal (no retry), a bug of ours, or a plain error's text. */

/** An error a retry cannot help with (e.g. the task's storage was deleted): the task fails at once. */
export class FatalTaskError extends Error {
  readonly fatal = true;
}

export function isFatal(e: unknown): boolean {
  return e instanceof FatalTaskError || (typeof e === 'object' && e !== null && (e as { fatal?: unknown }).fatal === true);
}

/** Errors that are bugs, not failures of the task: their text (`Cannot read properties of undefined`) is ours. */
export const JS_FAULTS = [TypeError, ReferenceError, RangeError, SyntaxError];

export function errorText(e: unknown): string {
  if (e instanceof Error) return e.message || e.name;
  return String(e);
}
