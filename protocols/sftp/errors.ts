/**
 * VfsError code → SFTP v3 status: the ONE table for this adapter (architecture §4.1). A new code in
 * src/errors.ts does not compile until it is mapped here. v3 has only a handful of statuses, so most
 * codes become FAILURE and keep their message (the OpenSSH client prints it).
 */
import ssh2 from 'ssh2';
import { isVfsError, type VfsErrorCode } from '../../src/errors.js';

export const STATUS = ssh2.utils.sftp.STATUS_CODE;

export interface SftpStatus {
  code: number;
  /** Send the VfsError's message with the status (FAILURE), or a fixed one (scrubbed codes). */
  message: 'error' | string;
}

const FAIL_WITH_MESSAGE: SftpStatus = { code: STATUS.FAILURE, message: 'error' };

export const SFTP_STATUS: Record<VfsErrorCode, SftpStatus> = {
  NOT_FOUND: { code: STATUS.NO_SUCH_FILE, message: 'No such file' },
  EXISTS: FAIL_WITH_MESSAGE,
  NOT_A_DIR: FAIL_WITH_MESSAGE,
  IS_A_DIR: FAIL_WITH_MESSAGE,
  NOT_EMPTY: FAIL_WITH_MESSAGE,
  INVALID: FAIL_WITH_MESSAGE,
  // Cannot happen after login (the session has a principal); answered like FORBIDDEN if it does.
  UNAUTHENTICATED: { code: STATUS.PERMISSION_DENIED, message: 'Permission denied' },
  FORBIDDEN: { code: STATUS.PERMISSION_DENIED, message: 'Permission denied' },
  READ_ONLY: { code: STATUS.PERMISSION_DENIED, message: 'Permission denied' },
  // SFTP cannot carry a meta path password, so a protected folder is simply out of reach.
  PASSWORD_REQUIRED: { code: STATUS.PERMISSION_DENIED, message: 'Permission denied (password-protected folder)' },
  NOT_SUPPORTED: { code: STATUS.OP_UNSUPPORTED, message: 'Operation unsupported' },
  CROSS_MOUNT: { code: STATUS.OP_UNSUPPORTED, message: "can't move files between two storages, try to copy" },
  LOCKED: FAIL_WITH_MESSAGE,
  TOO_MANY_ATTEMPTS: FAIL_WITH_MESSAGE,
  // Backend details stay in the log, never on the wire.
  STORAGE_UNAVAILABLE: { code: STATUS.FAILURE, message: 'storage not available' },
  UPSTREAM: { code: STATUS.FAILURE, message: 'storage backend error' },
  // v3 has no status for it (v5's NO_SPACE_ON_FILESYSTEM): the message says it.
  NO_SPACE: FAIL_WITH_MESSAGE,
  INTERNAL: { code: STATUS.FAILURE, message: 'internal error' },
};

/** The status and message to answer for anything a handler threw. */
export function statusOf(e: unknown): { code: number; message: string } {
  if (!isVfsError(e)) return { code: STATUS.FAILURE, message: 'internal error' };
  const s = SFTP_STATUS[e.code];
  return { code: s.code, message: s.message === 'error' ? e.message : s.message };
}
