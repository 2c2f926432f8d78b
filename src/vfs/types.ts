/**
 * The VFS contract every protocol adapter codes against. All paths are *user paths*: what the client
 * sent, relative to the principal's base_path (the VFS joins base_path once and refuses escapes).
 * Every method takes the caller's AccessContext first and enforces, inside the VFS and nowhere else:
 * base_path containment, meta rules (hide, password, write, readme/header) and permission bits.
 *
 * Errors: only VfsError (src/errors.ts). Hidden or missing paths are NOT_FOUND; a path password that
 * is missing or wrong is PASSWORD_REQUIRED; a missing permission bit is FORBIDDEN; write refused by
 * the write bit / meta write is READ_ONLY; a driver without the capability is NOT_SUPPORTED; a move
 * between storages is CROSS_MOUNT; a storage that failed to init is STORAGE_UNAVAILABLE.
 */
import type { Readable, Writable } from 'node:stream';
import type { AccessContext } from '../auth/principal.js';
import type { ByteRange, Capabilities, DriverConfigFlags, Link, StorageLease, ThumbSource } from '../../drivers/types.js';
import type { PositionalReader } from './positional.js';

/** A file or folder as the VFS shows it: the driver's Obj plus where it is in the tree. */
export interface Entry {
  name: string;
  size: number;
  isDir: boolean;
  modified: Date;
  created?: Date;
  hashes?: Readonly<Record<string, string>>;
  thumb?: string;
  /** The storage makes thumbnails of this file for listings (Obj.hasThumb; VfsApi.thumbnail). */
  hasThumb?: boolean;
  /** Absolute virtual path, base_path included (what AList signs and what search stores). */
  vpath: string;
  /** A virtual folder standing for a mount point below (or above) storages. */
  virtual?: boolean;
}

/** What adapters may know about the storage serving a path (never its driver instance). */
export interface StorageInfo {
  id: number;
  /** Where the storage sits in the tree: its mount path without a `.balance` suffix. */
  mountPath: string;
  driverName: string;
  config: DriverConfigFlags;
  capabilities: Capabilities;
  webdavPolicy: string;
  downProxyUrl: string;
  webProxy: boolean;
  enableSign: boolean;
}

/** Meta-derived facts for a folder, as fs/list reports them. */
export interface DirFacts {
  readme: string;
  header: string;
  /** May this principal create/upload in the folder (write bit or meta write). */
  write: boolean;
  /** The folder's meta password applies here (signs are then required on /d and /p). */
  passwordProtected: boolean;
}

export interface Listing {
  /** The folder itself. */
  dir: Entry;
  /** Visible children: hidden entries removed, mount points merged in as virtual folders. */
  entries: Entry[];
  storage?: StorageInfo;
  facts: DirFacts;
}

export interface ReadResult {
  entry: Entry;
  /** The bytes as a stream (opened on first access). Use either this or sendTo, not both. */
  readonly stream: Readable;
  /**
   * Write the bytes into `dest` and end it: for sockets and HTTP responses (whose write callback
   * means the chunk is no longer needed). Local files are copied with a few reused buffers, which
   * spares the GC a new buffer per chunk; other links are piped from `stream`.
   */
  sendTo(dest: Writable): Promise<void>;
  /** The byte range actually served (inclusive end). */
  start: number;
  end: number;
  /**
   * The storage instances the bytes come from (an Alias's target too), for readers that keep going
   * for long (a copy task): withdrawn, the bytes still flowing come from a storage the admin took out
   * of the tree. The VFS always gives it; stand-ins of the VFS in unit tests may not.
   */
  lease?: StorageLease;
}

export interface PutOptions {
  size?: number;
  modified?: Date;
  /** false: fail with EXISTS when the target exists. Default true (replace). */
  overwrite?: boolean;
  hashes?: Record<string, string>;
  onProgress?(bytes: number): void;
  /** Handed to the driver as PutArgs.release: body chunks it is done with (memory to reuse). */
  release?(chunk: Buffer): void;
  /**
   * false: the parent folder must already exist; a missing parent, or a file in its place, fails
   * with NOT_A_DIR (path: the parent) instead of being created. Default true (`mkdir -p`). Lets
   * WebDAV answer 409 from the lookups put makes anyway instead of stat-ing the parent first.
   */
  parents?: boolean;
  /**
   * Told once, after every check passed and before the body is written, whether the target
   * existed (it is being replaced) or not (it is being created): WebDAV's 204 vs 201, known from
   * the lookup put makes anyway. `lease` is the storage instance the upload runs on (the VFS always
   * gives it; stand-ins of the VFS in unit tests may not).
   */
  onTarget?(existed: boolean, lease?: StorageLease): void;
  /**
   * The storage (id and mount path) the caller resolved the folder to earlier (a task's pin): the put
   * is refused (STORAGE_UNAVAILABLE) when the path now resolves to another one or none, and aborted,
   * landing nothing, when that storage is deleted, disabled or changed while the body streams (the
   * caller has no client waiting for it; a plain put finishes on the old instance).
   */
  onlyOn?: { id: number; mountPath: string };
}

/**
 * The storage instance an upload runs on (PutOptions.onTarget), or those a read's bytes come from
 * (ReadResult.lease), for callers that keep acting on them over time: an SFTP upload handle's every
 * WRITE and its CLOSE are new requests; a copy task streams for as long as the file takes.
 */
export type { StorageLease };

export interface RemoveOptions {
  /**
   * rmdir(2) semantics (SFTP RMDIR): a folder is removed only when its storage holds nothing in it,
   * counting entries this principal cannot see (meta hide) and entries the driver's listing skips
   * (Local dotfiles, upload temp files); otherwise NOT_EMPTY. Files are removed as usual.
   */
  onlyEmpty?: boolean;
}

export interface MkdirOptions {
  /**
   * false: the parent folder must already exist (as put's `parents: false`): a missing parent, or a
   * file in its place, fails with NOT_A_DIR (path: the parent). Default true (`mkdir -p`).
   */
  parents?: boolean;
}

export interface TransferOptions {
  /** Replace an existing target (files; folders are refused with EXISTS). Default false. */
  overwrite?: boolean;
}

export interface VfsApi {
  /** The entry at a path (folders, files, virtual mount folders, the root). */
  stat(ctx: AccessContext, path: string): Promise<Entry>;
  /** A folder's visible children and facts. `refresh` bypasses the listing cache (needs write). */
  list(ctx: AccessContext, path: string, opts?: { refresh?: boolean }): Promise<Listing>;
  /** Facts of the folder at `path` without listing it (readme, header, write). */
  facts(ctx: AccessContext, path: string): Promise<DirFacts>;
  /**
   * The storage serving a path, undefined above all mounts. In a `.balance` group: for `write` (the
   * default) the one writes go to, what tasks pin; for `read` the member the reads of this `ctx` get.
   */
  storageOf(ctx: AccessContext, path: string, purpose?: 'read' | 'write'): Promise<StorageInfo | undefined>;
  /**
   * A file's bytes (optionally a range) as a stream, from any link kind. Consume or destroy the
   * result: until then its storage's driver instance is kept, even after the storage is edited.
   */
  read(ctx: AccessContext, path: string, range?: ByteRange): Promise<ReadResult>;
  /** A file for reads at any offset into the caller's buffers (SFTP READ); close it when done (see read). */
  openReader(ctx: AccessContext, path: string): Promise<{ entry: Entry; reader: PositionalReader }>;
  /**
   * A PNG thumbnail of a file (AList's `/d…?type=thumb`), made of a picture or a video frame as
   * `source` says. Undefined when the storage's driver makes none, or the file stands for its own
   * (an svg): the caller then serves the file, as AList does. Checked like read().
   */
  thumbnail(ctx: AccessContext, path: string, source: ThumbSource): Promise<{ entry: Entry; size?: number; stream: Readable } | undefined>;
  /** The driver's link for a file (REST/WebDAV redirects); read() is the way to get bytes. */
  link(ctx: AccessContext, path: string): Promise<{ entry: Entry; link: Link; storage: StorageInfo }>;
  /** Create a folder and missing parents; an existing folder is fine, an existing file is EXISTS. */
  mkdir(ctx: AccessContext, path: string, opts?: MkdirOptions): Promise<Entry>;
  /**
   * Move or rename `src` to the full path `dst`. Same parent: a rename (rename bit). Other parent:
   * a move (move bit, plus rename bit when the name changes). Across storages: CROSS_MOUNT, unless
   * both ends are one place seen through an Alias (FORBIDDEN; INVALID for a folder into itself).
   */
  moveTo(ctx: AccessContext, src: string, dst: string, opts?: TransferOptions): Promise<Entry>;
  /** Copy `src` to the full path `dst` (copy bit). Same storage only here; across storages: CROSS_MOUNT (as moveTo). */
  copyTo(ctx: AccessContext, src: string, dst: string, opts?: TransferOptions): Promise<Entry>;
  /**
   * The refusals a move or copy would answer for what it is (permission bits, the storage's
   * capabilities, hidden entries a folder would expose), without doing it; a move or copy between
   * storages checks what the copy and removal it becomes need. For adapters that must remove an
   * existing destination first (WebDAV, RFC 4918 §9.8.4): a refusal after that lost the destination.
   */
  checkTransfer(kind: 'move' | 'copy', ctx: AccessContext, src: string, dst: string): Promise<void>;
  /** Remove a file or folder (remove bit). A storage root or virtual folder cannot be removed. */
  remove(ctx: AccessContext, path: string, opts?: RemoveOptions): Promise<void>;
  /** Stream a file into place atomically, creating missing parent folders. */
  put(ctx: AccessContext, path: string, body: Readable, opts?: PutOptions): Promise<Entry>;
  /** Set a file's mtime (write permission). */
  setModified(ctx: AccessContext, path: string, modified: Date): Promise<void>;
  /** Space figures of the storage serving a path, when its driver knows them. */
  usage(ctx: AccessContext, path: string): Promise<{ total?: number; free?: number; used?: number }>;
}
