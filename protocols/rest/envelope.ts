/**
 * AList's JSON envelope: HTTP 200 with `{code, message, data}` for successes and API errors alike.
 * Errors are mapped here once: VfsError codes through one table, fastify's own 4xx errors (bad JSON,
 * schema validation, body too large) to code 400 with a clear message, anything else to 500 with a
 * generic message (the cause goes to the log, never to the client). A non-admin's message for a
 * backend failure is the code's plain one (publicMessage): the detail names hosts and host paths.
 */
import type { FastifyError, FastifyReply, FastifyRequest } from 'fastify';
import { publicMessage, VfsError, type VfsErrorCode } from '../../src/errors.js';
import { can } from '../../src/auth/principal.js';

export interface Envelope<T = unknown> {
  code: number;
  message: string;
  data: T | null;
}

export function ok<T>(data: T | null = null): Envelope<T> {
  return { code: 200, message: 'success', data };
}

/** An API answer with a specific envelope code (the route decided it, e.g. 402 for 2FA). */
export class ApiError extends Error {
  constructor(readonly code: number, message: string, readonly data: unknown = null) {
    super(message);
    this.name = 'ApiError';
  }
}

/** VfsError code → envelope code (AList's observed codes). */
export const ENVELOPE_CODE: Record<VfsErrorCode, number> = {
  NOT_FOUND: 500,
  EXISTS: 403,
  NOT_A_DIR: 500,
  IS_A_DIR: 500,
  NOT_EMPTY: 500,
  INVALID: 400,
  UNAUTHENTICATED: 401,
  FORBIDDEN: 403,
  PASSWORD_REQUIRED: 403,
  READ_ONLY: 403,
  NOT_SUPPORTED: 500,
  CROSS_MOUNT: 500,
  STORAGE_UNAVAILABLE: 500,
  UPSTREAM: 500,
  NO_SPACE: 500,
  LOCKED: 423,
  TOO_MANY_ATTEMPTS: 429,
  INTERNAL: 500,
};

/** Codes logged as failures (their detail is in the log; non-admins see publicMessage). */
const SCRUB: ReadonlySet<VfsErrorCode> = new Set(['UPSTREAM', 'INTERNAL']);

export function toEnvelope(err: unknown, req: FastifyRequest): Envelope {
  if (err instanceof ApiError) return { code: err.code, message: err.message, data: err.data };
  if (err instanceof VfsError) {
    if (SCRUB.has(err.code)) {
      // A client that hung up mid-upload is its own doing, not a storage failure (WebDAV alike).
      // Its socket tells: the request stream is destroyed too once a body was read to its end, so
      // it hid every failure of a POST route from the log.
      if (req.raw.socket?.destroyed !== false) req.log.debug({ err }, 'client went away');
      else req.log.error({ err, cause: err.cause }, 'storage error');
    }
    if (err.code === 'NO_SPACE') req.log.warn({ path: err.path }, 'storage full');
    // Path escapes answer 403 like AList/OpenList, other invalid input 400.
    const code = err.code === 'INVALID' && err.message === 'access using relative path is not allowed' ? 403 : ENVELOPE_CODE[err.code];
    // Backend detail (a Local root's host path, a remote's address and user) is for admins: users,
    // the guest and /d callers get the code's plain message.
    const admin = req.principal !== null && req.principal !== undefined && can.isAdmin(req.principal);
    return { code, message: admin ? err.message : publicMessage(err), data: null };
  }
  const fe = err as FastifyError;
  if (fe && typeof fe.statusCode === 'number' && fe.statusCode >= 400 && fe.statusCode < 500) {
    if (fe.code === 'FST_ERR_CTP_BODY_TOO_LARGE') return { code: 400, message: 'request body too large', data: null };
    if (fe.validation) return { code: 400, message: `invalid request: ${fe.message}`, data: null };
    if (fe instanceof SyntaxError || fe.code === 'FST_ERR_CTP_INVALID_JSON_BODY') {
      return { code: 400, message: 'invalid request: malformed JSON body', data: null };
    }
    if (fe.code === 'FST_ERR_CTP_EMPTY_JSON_BODY') return { code: 400, message: 'invalid request: empty JSON body', data: null };
    if (fe.code === 'FST_ERR_CTP_INVALID_MEDIA_TYPE') return { code: 400, message: 'invalid request: unsupported content type', data: null };
    return { code: 400, message: `invalid request: ${fe.message}`, data: null };
  }
  req.log.error({ err }, 'unhandled error');
  return { code: 500, message: 'internal error', data: null };
}

export function errorHandler(err: unknown, req: FastifyRequest, reply: FastifyReply): void {
  void reply.code(200).type('application/json; charset=utf-8').send(toEnvelope(err, req));
}
