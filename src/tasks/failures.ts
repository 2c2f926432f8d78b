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
 * JS fault; the admin reads the detail in the log (logFailure).
 */
export function shownError(rec: TaskRecord, e: unknown): string {
  const text = errorText(e);
  if (rec.creator_role === ROLE.ADMIN) return text;
  return e instanceof VfsError ? publicMessage(e) : JS_FAULTS.some((t) => e instanceof t) ? 'internal error' : text;
}

/** A URL's password and query (a signed link's token) in a task name stay out of the log. */
const URL_SECRETS = /\b([a-z][a-z0-9+.-]*:\/\/)(?:[^/\s@]*@)?([^\s?#)]*)(?:[?#][^\s)]*)?/gi;

/**
 * Log a task's final failure, once (not each attempt a retry follows): the admin running the server
 * under systemd otherwise saw nothing of it. The error's text, not its stack: a backend failure is
 * expected (its text says it all); a JS fault is a bug of ours and keeps its stack.
 */
export function logFailure(rec: TaskRecord, e: unknown, log: Logger): void {
  const task = rec.name.replace(URL_SECRETS, '$1$2');
  const fault = JS_FAULTS.some((t) => e instanceof t);
  log.warn({ id: rec.id, kind: rec.kind, task, error: errorText(e), ...(fault ? { err: e } : {}) }, 'task failed');
}
