/**
 * Who is acting. Built from a user record once per request (REST, WebDAV) or per session (SFTP) and
 * passed to every VFS call inside an AccessContext. Callers never test raw permission bits: they use
 * the named predicates below, so a bit's meaning is written down exactly once.
 */

/** AList's permission bits (alist-compat section 3). */
export const PERM = {
  SEE_HIDDEN: 1 << 0,
  NO_PASSWORD: 1 << 1,
  OFFLINE_DOWNLOAD: 1 << 2,
  WRITE: 1 << 3,
  RENAME: 1 << 4,
  MOVE: 1 << 5,
  COPY: 1 << 6,
  REMOVE: 1 << 7,
  WEBDAV_READ: 1 << 8,
  WEBDAV_MANAGE: 1 << 9,
  SFTP_READ: 1 << 10,
  SFTP_MANAGE: 1 << 11,
  ARCHIVE_READ: 1 << 12,
  ARCHIVE_DECOMPRESS: 1 << 13,
} as const;

export const ROLE = { GENERAL: 0, GUEST: 1, ADMIN: 2 } as const;
export type Role = (typeof ROLE)[keyof typeof ROLE];

/** A new admin: everything AList 3.45 gives (0x30FF) plus WebDAV and SFTP (decision 4). */
export const ADMIN_DEFAULT_PERMISSION = 0x30ff | PERM.WEBDAV_READ | PERM.WEBDAV_MANAGE | PERM.SFTP_READ | PERM.SFTP_MANAGE;

export type Protocol = 'rest' | 'webdav' | 'sftp' | 'internal';

export interface Principal {
  readonly userId: number;
  readonly username: string;
  readonly role: Role;
  /** Normalised VPath every user path is joined to. */
  readonly basePath: string;
  readonly permission: number;
  readonly disabled: boolean;
  /** Has a TOTP secret. */
  readonly otp: boolean;
  /** The user's pwd_ts when the principal was built (credential caches compare it). */
  readonly pwdTs: number;
}

const has = (p: Principal, bit: number) => (p.permission & bit) !== 0;

export const can = {
  seeHidden: (p: Principal) => has(p, PERM.SEE_HIDDEN),
  skipPassword: (p: Principal) => has(p, PERM.NO_PASSWORD),
  offlineDownload: (p: Principal) => has(p, PERM.OFFLINE_DOWNLOAD),
  write: (p: Principal) => has(p, PERM.WRITE),
  rename: (p: Principal) => has(p, PERM.RENAME),
  move: (p: Principal) => has(p, PERM.MOVE),
  copy: (p: Principal) => has(p, PERM.COPY),
  remove: (p: Principal) => has(p, PERM.REMOVE),
  webdavRead: (p: Principal) => has(p, PERM.WEBDAV_READ),
  webdavManage: (p: Principal) => has(p, PERM.WEBDAV_MANAGE),
  sftpRead: (p: Principal) => has(p, PERM.SFTP_READ),
  sftpManage: (p: Principal) => has(p, PERM.SFTP_MANAGE),
  isAdmin: (p: Principal) => p.role === ROLE.ADMIN,
  isGuest: (p: Principal) => p.role === ROLE.GUEST,
  /** May this principal log in over the protocol at all (REST needs nothing beyond being enabled). */
  login: (p: Principal, proto: Protocol) =>
    !p.disabled && (proto === 'webdav' ? has(p, PERM.WEBDAV_READ) : proto === 'sftp' ? has(p, PERM.SFTP_READ) : true),
  /** The protocol's own "manage" bit, needed on top of the operation bit for any write (decision 3). */
  manageOn: (p: Principal, proto: Protocol) =>
    proto === 'webdav' ? has(p, PERM.WEBDAV_MANAGE) : proto === 'sftp' ? has(p, PERM.SFTP_MANAGE) : true,
};

/** Everything a VFS call needs to know about the caller. The first argument of every VFS method. */
export interface AccessContext {
  readonly principal: Principal;
  readonly protocol: Protocol;
  readonly ip: string;
  /** Meta path password sent with the request (REST body/header); WebDAV and SFTP have none. */
  readonly password?: string;
  readonly signal?: AbortSignal;
  /**
   * The request served, when a protocol makes several contexts for one (a /d link looked at as the
   * link principal, then opened signed): in a `.balance` group every read of it gets one member, and
   * it takes one turn. Default: the context itself.
   */
  readonly request?: object;
}
