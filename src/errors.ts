/**
 * The one error type that crosses layers. Drivers map their native failures into a VfsError code;
 * the VFS throws VfsError; each protocol adapter maps a code to its wire answer in exactly one
 * `Record<VfsErrorCode, ...>` table, so adding a code does not compile until every table handles it.
 *
 * Messages are for people and must never carry secrets, host paths outside a storage, or stack traces:
 * adapters may show `message` to clients; `cause` is kept for logs only.
 */
export const VFS_ERROR_CODES = [
  'NOT_FOUND', // the path (or a parent) does not exist, or is hidden from this principal
  'EXISTS', // the target exists and the operation may not replace it
  'NOT_A_DIR', // a directory was required (listing a file, a file used as a parent)
  'IS_A_DIR', // a file was required (reading or uploading over a directory)
  'NOT_EMPTY', // removing a non-empty directory where that is not allowed
  'INVALID', // a bad name or path: `..`, `/` in a name, NUL, a bad regex, a bad option
  'UNAUTHENTICATED', // no valid identity
  'FORBIDDEN', // identity known, permission bit missing
  'PASSWORD_REQUIRED', // a meta path password is required and was not given (or is wrong)
  'READ_ONLY', // write denied by the write bit / meta write rule
  'NOT_SUPPORTED', // the driver lacks the capability
  'CROSS_MOUNT', // a move between two storages
  'STORAGE_UNAVAILABLE', // the storage failed to init or is disabled
  'UPSTREAM', // the driver's backend failed (I/O, network)
  'NO_SPACE', // the storage is full (or the user's quota there is used up)
  'LOCKED', // a WebDAV lock held by someone else
  'TOO_MANY_ATTEMPTS', // login throttled
  'INTERNAL', // a bug
] as const;

export type VfsErrorCode = (typeof VFS_ERROR_CODES)[number];

export class VfsError extends Error {
  readonly code: VfsErrorCode;
  readonly path?: string;
  /** What anyone may read when `message` is detailed (see publicMessage); default: the code's message. */
  readonly publicText?: string;

  constructor(code: VfsErrorCode, message?: string, opts: { path?: string; cause?: unknown; publicText?: string } = {}) {
    // A missing path is an answer, not a fault (every upload looks up its target first): no stack
    // trace is captured for it (measured: ~3% of a 1 KiB WebDAV PUT's CPU).
    const limit = Error.stackTraceLimit;
    if (code === 'NOT_FOUND') Error.stackTraceLimit = 0;
    super(message ?? defaultMessage(code), opts.cause === undefined ? undefined : { cause: opts.cause });
    Error.stackTraceLimit = limit;
    this.name = 'VfsError';
    this.code = code;
    this.path = opts.path;
    this.publicText = opts.publicText;
  }
}

/**
 * Codes whose message may carry backend detail: a storage's status (its host root folder), a remote's
 * address and user name, a tool's address. That detail is the admin's to read; anyone else gets
 * publicMessage.
 */
const DETAILED: ReadonlySet<VfsErrorCode> = new Set(['STORAGE_UNAVAILABLE', 'UPSTREAM', 'INTERNAL']);

/** The message for a non-admin: the message itself, or for a detailed code its public text. */
export function publicMessage(e: VfsError): string {
  return DETAILED.has(e.code) ? (e.publicText ?? defaultMessage(e.code)) : e.message;
}

/**
 * STORAGE_UNAVAILABLE's message for a storage the admin disabled; one that failed to init (its
 * remote down at startup) carries its init error instead. An Alias tells the two apart.
 */
export const STORAGE_DISABLED_MESSAGE = 'storage not init: disabled';

export function isVfsError(e: unknown, code?: VfsErrorCode): e is VfsError {
  return e instanceof VfsError && (code === undefined || e.code === code);
}

/** Wrap anything thrown by foreign code: VfsErrors pass through, the rest become UPSTREAM/INTERNAL. */
export function toVfsError(e: unknown, fallback: VfsErrorCode = 'INTERNAL'): VfsError {
  if (e instanceof VfsError) return e;
  return new VfsError(fallback, undefined, { cause: e });
}

function defaultMessage(code: VfsErrorCode): string {
  switch (code) {
    case 'NOT_FOUND': return 'object not found';
    case 'EXISTS': return 'file exists';
    case 'NOT_A_DIR': return 'not a folder';
    case 'IS_A_DIR': return 'not a file';
    case 'NOT_EMPTY': return 'directory not empty';
    case 'INVALID': return 'invalid request';
    case 'UNAUTHENTICATED': return 'unauthenticated';
    case 'FORBIDDEN': return 'permission denied';
    case 'PASSWORD_REQUIRED': return 'password is incorrect or you have no permission';
    case 'READ_ONLY': return 'permission denied';
    case 'NOT_SUPPORTED': return 'not implement';
    case 'CROSS_MOUNT': return "can't move files between two storages, try to copy";
    case 'STORAGE_UNAVAILABLE': return 'storage not available';
    case 'UPSTREAM': return 'storage backend error';
    case 'NO_SPACE': return 'no space left on the storage';
    case 'LOCKED': return 'locked';
    case 'TOO_MANY_ATTEMPTS':
      return 'Too many unsuccessful sign-in attempts have been made using an incorrect username or password, Try again later.';
    case 'INTERNAL': return 'internal error';
  }
}

/** Map a Node.js fs error (errno code) to a VfsError. Used by the Local driver and anything on node:fs. */
export function fromErrno(e: unknown, path?: string): VfsError {
  if (e instanceof VfsError) return e;
  const code = (e as NodeJS.ErrnoException | undefined)?.code;
  switch (code) {
    case 'ENOENT': return new VfsError('NOT_FOUND', undefined, { path, cause: e });
    case 'EEXIST': return new VfsError('EXISTS', undefined, { path, cause: e });
    case 'ENOTDIR': return new VfsError('NOT_A_DIR', undefined, { path, cause: e });
    case 'EISDIR': return new VfsError('IS_A_DIR', undefined, { path, cause: e });
    case 'ENOTEMPTY': return new VfsError('NOT_EMPTY', undefined, { path, cause: e });
    case 'EACCES':
    case 'EPERM': return new VfsError('FORBIDDEN', undefined, { path, cause: e });
    case 'EROFS': return new VfsError('READ_ONLY', undefined, { path, cause: e });
    case 'EINVAL': return new VfsError('INVALID', undefined, { path, cause: e });
    case 'ENAMETOOLONG': return new VfsError('INVALID', 'file name too long', { path, cause: e });
    case 'EXDEV': return new VfsError('CROSS_MOUNT', undefined, { path, cause: e });
    case 'ENOSPC':
    case 'EDQUOT': return new VfsError('NO_SPACE', undefined, { path, cause: e });
    case 'ELOOP': return new VfsError('NOT_FOUND', undefined, { path, cause: e });
    default: return new VfsError('UPSTREAM', undefined, { path, cause: e });
  }
}
