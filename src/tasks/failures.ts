/** How a task's failure is judged: fatal (no retry), a bug of ours, or a plain error's text. */
import type { Logger } from 'pino';
import { ROLE } from '../auth/principal.js';
import { publicMessage, VfsError } from '../errors.js';
import type { TaskRecord } from '../store/types.js';

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

/**
 * The error a task shows. Its creator reads it: a non-admin gets a backend failure's plain message
 * (publicMessage: the detail names remote addresses and host paths) and "internal error" for a
 * JS fault; the detail goes to the log for the admin.
 */
export function shownError(rec: TaskRecord, e: unknown, log: Logger): string {
  const text = errorText(e);
  if (rec.creator_role === ROLE.ADMIN) return text;
  const shown = e instanceof VfsError ? publicMessage(e) : JS_FAULTS.some((t) => e instanceof t) ? 'internal error' : text;
  if (shown !== text) log.warn({ err: e, id: rec.id }, 'task failed');
  return shown;
}
