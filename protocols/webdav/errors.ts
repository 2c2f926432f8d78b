/**
 * WebDAV's wire answer for every VfsError code, in one table the compiler keeps complete, plus
 * DavError for protocol-level failures that have no VFS code (412 preconditions, 415, bad headers).
 */
import { isVfsError, type VfsErrorCode } from '../../src/errors.js';

export const STATUS_BY_CODE: Record<VfsErrorCode, number> = {
  NOT_FOUND: 404,
  EXISTS: 405, // MKCOL on an existing path; COPY/MOVE answer 412 (see statusOf)
  NOT_A_DIR: 409,
  IS_A_DIR: 405,
  NOT_EMPTY: 409,
  INVALID: 400,
  UNAUTHENTICATED: 401,
  FORBIDDEN: 403,
  READ_ONLY: 403,
  PASSWORD_REQUIRED: 403, // never 401 for a logged-in user: clients would re-prompt forever
  NOT_SUPPORTED: 405,
  CROSS_MOUNT: 502,
  LOCKED: 423,
  STORAGE_UNAVAILABLE: 502,
  UPSTREAM: 502,
  NO_SPACE: 507, // Insufficient Storage (RFC 4918 §11.5): clients say the disk is full
  INTERNAL: 500,
  TOO_MANY_ATTEMPTS: 429,
};

/** A failure decided by the adapter itself. `condition` is an RFC 4918 precondition element name. */
export class DavError extends Error {
  constructor(
    readonly status: number,
    message?: string,
    readonly condition?: string,
    /** XML content of the condition element (the `<D:href>`s of lock-token-submitted). */
    readonly detail?: string,
  ) {
    super(message ?? `HTTP ${status}`);
    this.name = 'DavError';
  }
}

/** The HTTP status for anything a method handler threw. EXISTS means 412 for COPY/MOVE (Overwrite). */
export function statusOf(e: unknown, method = ''): number {
  if (e instanceof DavError) return e.status;
  if (isVfsError(e)) {
    if (e.code === 'EXISTS' && (method === 'COPY' || method === 'MOVE')) return 412;
    if (e.code === 'INVALID' && e.message === 'range not satisfiable') return 416;
    return STATUS_BY_CODE[e.code];
  }
  return 500;
}
