/**
 * The driver contract. A driver turns one backend (a disk, a bucket, a remote server) into objects and
 * byte streams; it never sees mount paths, users, permissions or meta rules — the VFS owns those.
 *
 * Paths given to and returned by drivers are *driver paths*: absolute within the storage (`/` is the
 * storage's root as configured, e.g. Local's root_folder_path), normalised by `src/paths.ts`, never
 * containing `..`. Every Obj a driver returns carries its driver path, so later calls can find it.
 *
 * Required: `init`, `drop`, `list`, `link`. Everything else is optional: implement the method and the
 * capability exists (see `capabilitiesOf`). Never implement a method only to throw "not supported".
 *
 * Error contract (checked by drivers/conformance): throw `VfsError` with
 *   NOT_FOUND  when the object or a parent is missing,
 *   EXISTS     when creating over an existing name (mkdir over a file, rename/move/copy onto an entry),
 *   NOT_A_DIR  when listing a file or using a file as a parent,
 *   IS_A_DIR   when linking/putting over a directory,
 *   NOT_EMPTY  when removing a folder that holds anything with `onlyEmpty`,
 *   UPSTREAM   for backend I/O failures (keep the native error as `cause`),
 *   INVALID    for names the backend cannot hold.
 */
import type { Readable } from 'node:stream';
import type { Logger } from 'pino';

/** A plain, immutable record describing one file or folder. No methods: it caches and serialises. */
export interface Obj {
  readonly name: string;
  /** Driver path (see above). The root folder's path is `/` and its name is ''. */
  readonly path: string;
  /** Bytes; 0 for folders. */
  readonly size: number;
  readonly isDir: boolean;
  readonly modified: Date;
  readonly created?: Date;
  /** Backend id, for id-based backends. */
  readonly id?: string;
  /** Known content hashes, lowercase hex keyed by algorithm (`md5`, `sha1`, `sha256`). */
  readonly hashes?: Readonly<Record<string, string>>;
  /** A thumbnail address the backend gives (none does yet). */
  readonly thumb?: string;
  /**
   * The driver's `thumbnail` makes pictures of this file and listings are to offer them (Local
   * with its `thumbnail` option on and ffmpeg installed). REST shows AList's
   * `/d…?type=thumb` address for it when the file is an image or a video by its name.
   */
  readonly hasThumb?: boolean;
}

export interface ByteRange {
  /** First byte, inclusive. */
  start: number;
  /** Last byte, inclusive; undefined = to the end. */
  end?: number;
}

/**
 * How to fetch a file's bytes. `vfs/link.ts` turns any kind into a range-readable stream, so adapters
 * never branch on it except REST/WebDAV redirects (only `url` links may be handed to clients).
 */
export type Link = (
  | { kind: 'url'; url: string; headers?: Record<string, string>; expiresAt?: Date }
  | { kind: 'range'; size: number; open(range: ByteRange | undefined, signal?: AbortSignal): Promise<Readable> }
  | { kind: 'file'; path: string; size: number }
) & {
  /**
   * The storage instances the bytes come from, on a link got through the tree (TreeAccess.link: an
   * Alias's target). Set by the VFS, never by a driver; a driver passing such a link on keeps it, so
   * a reader opened through the Alias stops when the target storage is taken out of the tree.
   */
  lease?: StorageLease;
};

/**
 * Storage instances that work kept open over time (an SFTP handle, a copy task) runs on. The admin
 * deleting, disabling, moving or re-optioning one of them withdraws it: its files are no longer
 * where the tree says.
 */
export interface StorageLease {
  /** Throws STORAGE_UNAVAILABLE (naming the storage) once one of them is withdrawn. */
  check(): void;
  /** Call `fn` with that error when one is withdrawn (at once if one is); returns the unsubscribe function. */
  onWithdrawn(fn: (reason: unknown) => void): () => void;
}

export interface CallArgs {
  signal?: AbortSignal;
}

/**
 * What a thumbnail is made of, by the file's name and the image_types / video_types settings
 * (the adapter knows them, drivers do not): a picture, or a frame of a video; undefined for neither.
 */
export type ThumbSource = 'image' | 'video' | undefined;

export interface ThumbArgs extends CallArgs {
  source: ThumbSource;
}

/** `list`'s arguments. */
export interface ListArgs extends CallArgs {
  /**
   * The user asked to refresh this listing: a driver that lists other storages' folders (Alias)
   * refreshes theirs too, so their cached listings do not answer in its place (AList's Refresh).
   */
  refresh?: boolean;
}

export interface RemoveArgs extends CallArgs {
  /**
   * rmdir(2) semantics: a folder that holds anything in the backend (including entries `list`
   * skips, such as dotfiles or temp files) is refused with NOT_EMPTY and left untouched; an empty
   * folder is removed. Files are removed as usual. Default false (remove the whole tree).
   */
  onlyEmpty?: boolean;
}

export interface PutArgs extends CallArgs {
  /** Final name inside `dstDir` (already validated). */
  name: string;
  /** Byte count when known; undefined for streams of unknown length. */
  size?: number;
  /** mtime to set on the new file (upload's Last-Modified, X-OC-Mtime). */
  modified?: Date;
  hashes?: Record<string, string>;
  onProgress?(bytesWritten: number): void;
  /**
   * Optional, for speed: call it with a chunk of the body once nothing of the driver's references
   * it any more (written to disk), and the uploader may reuse that memory for a later chunk. A
   * driver that never calls it is correct too (chunks are then left to the garbage collector).
   */
  release?(chunk: Buffer): void;
  /**
   * The upload must not replace anything: an entry that appeared under the name while the body was
   * coming (another client's upload) makes the put fail with EXISTS and stay unwritten. Drivers
   * whose backend can place a file without replacing (Local: link(2)) do it in that final step;
   * others check just before it. The VFS has already refused a name taken when the put began.
   */
  noReplace?: boolean;
  /**
   * Given only to drivers that set `checksPutTarget`: called once the put's own checks passed and
   * before any of the body is read, with whether a file is being replaced (true) or created.
   */
  onTarget?(existed: boolean): void;
}

/**
 * A mounted backend instance. Optional methods define capabilities. Writes must be atomic where the
 * backend allows: a `put` that fails or is aborted (signal, stream error) leaves nothing under the
 * final name and no temporary file behind. `put` replaces an existing file of the same name.
 */
export interface Driver {
  /** Connect/validate. Throwing here puts the storage in error status; it must not hang (honour signal). */
  init(signal: AbortSignal): Promise<void>;
  /** Release connections and handles. Must not throw. */
  drop(): Promise<void>;
  /** Children of a folder, in the backend's order. */
  list(dir: Obj, args: ListArgs): Promise<Obj[]>;
  /** How to read a file. */
  link(file: Obj, args: CallArgs): Promise<Link>;

  /**
   * A small PNG picture of a file (AList's Link with type `thumb`); undefined when the file itself
   * stands for its thumbnail (Local's svg). Without the method, a thumbnail request gets the file.
   */
  thumbnail?(file: Obj, args: ThumbArgs): Promise<Link | undefined>;

  /** Direct lookup by driver path; without it the VFS finds the name in the parent's listing. */
  get?(path: string, args: CallArgs): Promise<Obj>;
  mkdir?(parent: Obj, name: string, args: CallArgs): Promise<Obj | void>;
  /** Same folder, new name. Fails with EXISTS if the new name is taken. */
  rename?(obj: Obj, newName: string, args: CallArgs): Promise<Obj | void>;
  /** Into another folder of the same storage, same name. Fails with EXISTS if taken. */
  move?(obj: Obj, dstDir: Obj, args: CallArgs): Promise<Obj | void>;
  /** Recursive copy into another folder of the same storage, same name. Fails with EXISTS if taken. */
  copy?(obj: Obj, dstDir: Obj, args: CallArgs): Promise<Obj | void>;
  /** Remove a file or a folder with everything under it; with `onlyEmpty`, only an empty folder. */
  remove?(obj: Obj, args: RemoveArgs): Promise<void>;
  put?(dstDir: Obj, stream: Readable, args: PutArgs): Promise<Obj | void>;
  /**
   * Set by a driver whose put itself makes, before reading any of the body, every check the VFS would
   * otherwise make with two lookups first: the folder exists (else NOT_FOUND) and is a folder (else
   * NOT_A_DIR), the target is not a folder (IS_A_DIR) and, with noReplace, is not taken (EXISTS);
   * then it calls args.onTarget. Its put needs only `dstDir.path`. The VFS then skips those lookups
   * for a put into an existing folder (WebDAV's, SFTP's): on a 1 KiB WebDAV PUT to a Local storage
   * they were about a sixth of the server's time.
   */
  readonly checksPutTarget?: boolean;
  /** Set a file's mtime (SFTP SETSTAT, WebDAV X-OC-Mtime after the fact). */
  setModified?(obj: Obj, modified: Date, args: CallArgs): Promise<void>;
  /**
   * For a driver that shows other parts of the virtual tree (Alias): the virtual path that driver
   * path `path` stands for (the first existing target, else where a new entry would go), undefined
   * where it stands for none. Lets the VFS see one place at both ends of a transfer between storages.
   */
  treePath?(path: string, args: CallArgs): Promise<string | undefined>;
  /**
   * A driver path whose object the driver refuses to move (NOT_SUPPORTED, message `reason`) though it
   * has the capability: an Alias's top-level name stands for a target folder itself. Asked before a
   * move is built from other calls: WebDAV's MOVE with Overwrite removed the destination, then the
   * driver refused and the destination was lost.
   */
  unmovable?(path: string): { reason: string } | undefined;
  /** Space figures for quota properties and statvfs, where the backend knows them. */
  usage?(args: CallArgs): Promise<{ total?: number; free?: number; used?: number }>;
  /**
   * Report changes made to the backend *outside* treegate (another program writing into a Local
   * folder), so mirrors such as the search index stay current. Call `onChange` with the driver path
   * of anything added, changed or removed, soon after it happened (duplicates and over-reporting are
   * fine: the receiver looks the path up again); never report the driver's own temporary files.
   * Returns the function that stops watching (it may return a promise that settles once released).
   * Started only while someone needs it, and always stopped before `drop`.
   */
  watch?(onChange: (dpath: string) => void): () => void | Promise<void>;
}

export interface Capabilities {
  canGet: boolean;
  canMkdir: boolean;
  canRename: boolean;
  canMove: boolean;
  canCopy: boolean;
  canRemove: boolean;
  canPut: boolean;
  canSetModified: boolean;
  canUsage: boolean;
  /** Reports outside changes (`watch`). */
  canWatch: boolean;
}

/** Worked out once at mount time from which methods exist (and the no_upload flag). */
export function capabilitiesOf(d: Driver, flags: Pick<DriverConfigFlags, 'no_upload'>): Capabilities {
  return {
    canGet: typeof d.get === 'function',
    canMkdir: typeof d.mkdir === 'function',
    canRename: typeof d.rename === 'function',
    canMove: typeof d.move === 'function',
    canCopy: typeof d.copy === 'function',
    canRemove: typeof d.remove === 'function',
    canPut: typeof d.put === 'function' && !flags.no_upload,
    canSetModified: typeof d.setModified === 'function',
    canUsage: typeof d.usage === 'function',
    canWatch: typeof d.watch === 'function',
  };
}

/** AList's driver `config` object, exposed verbatim by /api/admin/driver/info. */
export interface DriverConfigFlags {
  name: string;
  local_sort: boolean;
  only_local: boolean;
  only_proxy: boolean;
  no_cache: boolean;
  no_upload: boolean;
  need_ms: boolean;
  default_root: string;
  /**
   * '' or `<status>|<text>`, status one of info, success, warning, danger: AList's admin page shows
   * an Alert whose status is the part before `|` (a bare text there is no status at all).
   */
  alert: string;
}

export type OptionType = 'string' | 'number' | 'bool' | 'select' | 'text';

/** One driver-specific option (an AList `additional` item). */
export interface OptionSpec {
  readonly name: string;
  readonly type: OptionType;
  /** Default as text, as AList shows it; also what the option gets when omitted. */
  readonly default?: string;
  /** For select: comma-separated allowed values. */
  readonly options?: string;
  readonly required?: boolean;
  readonly help?: string;
  /** Never logged; still returned to admins in the storage's `addition` (AList does the same). */
  readonly secret?: boolean;
  /**
   * The default (or default_root) is only what the admin form pre-fills: an omitted value stays
   * empty and `required` is left to the driver's init, so the storage is kept with the error as its
   * status, as AList does. For Local's root_folder_path, where `/` would serve the host's root.
   */
  readonly formDefaultOnly?: boolean;
}

type ValueOf<T extends OptionType> = T extends 'number' ? number : T extends 'bool' ? boolean : string;

/** The typed options object a driver receives, derived from its `as const` option list. */
export type OptionValues<O extends readonly OptionSpec[]> = {
  [K in O[number] as K['name']]: ValueOf<K['type']>;
};

export interface DriverContext {
  log: Logger;
  /** treegate's data directory (for drivers that keep state, e.g. temp files). */
  dataDir: string;
  /**
   * The virtual tree itself, for drivers that present other parts of it (Alias). Absent when the
   * composition root does not provide it; such drivers then fail init.
   */
  tree?: TreeAccess;
  /**
   * A random id of the treegate process this driver runs in. Drivers that talk to another treegate
   * (WebDav) send it as INSTANCE_HEADER, so a server that receives its own id knows the request
   * came from itself (a storage mounting its own /dav) and refuses it instead of recursing.
   */
  instanceId?: string;
}

/** Request header carrying DriverContext.instanceId; treegate's /dav answers 508 to its own id. */
export const INSTANCE_HEADER = 'x-treegate-instance';

/**
 * Access to the virtual tree for a driver, as an internal principal: full read/write bits but no
 * "see hidden" or "skip password", so meta hide and path passwords still apply (hidden paths are
 * NOT_FOUND, protected ones PASSWORD_REQUIRED). Paths are absolute virtual paths. Returned Objs
 * carry the virtual path in `path`. Errors are the VFS's VfsErrors.
 */
export interface TreeAccess {
  stat(path: string, args: CallArgs): Promise<Obj>;
  list(path: string, args: ListArgs): Promise<Obj[]>;
  link(path: string, args: CallArgs): Promise<Link>;
  /** The file's thumbnail as its storage makes it (VfsApi.thumbnail); undefined when it makes none. */
  thumbnail(path: string, args: ThumbArgs): Promise<Link | undefined>;
  /** Creates missing parents; an existing folder is fine, an existing file is EXISTS. */
  mkdir(path: string, args: CallArgs): Promise<Obj>;
  /** Move or rename to the full path `dst`; EXISTS when taken; CROSS_MOUNT across storages. */
  moveTo(src: string, dst: string, args: CallArgs): Promise<Obj>;
  /** Copy to the full path `dst`; EXISTS when taken; CROSS_MOUNT across storages. */
  copyTo(src: string, dst: string, args: CallArgs): Promise<Obj>;
  remove(path: string, args: RemoveArgs): Promise<void>;
  /** Stream a file to the full path `path` atomically, replacing a file there. */
  put(path: string, stream: Readable, args: Omit<PutArgs, 'name'>): Promise<Obj>;
  setModified(path: string, modified: Date, args: CallArgs): Promise<void>;
}

/** Declarative data for the shared conformance suite: opt-outs live here, never in test code. */
export interface ConformanceOpts {
  /** The backend cannot keep mtimes set by put/setModified to the second. */
  noMtime?: boolean;
  /** The backend cannot store empty folders (S3 without placeholders). */
  noEmptyDirs?: boolean;
  /** Names the backend cannot hold, as reasons keyed by case id (e.g. `'backslash': 'FTP'`). */
  unsupportedNames?: Record<string, string>;
}

export interface DriverDefinition<O extends readonly OptionSpec[] = readonly OptionSpec[]> {
  readonly config: DriverConfigFlags;
  readonly options: O;
  readonly conformance?: ConformanceOpts;
  /**
   * AList's hidden `proxy_range_option` config flag (json:"-", so not part of `config`, which
   * driver/info shows verbatim): the template gets the `proxy_range` common item after
   * webdav_policy, unless the driver is proxy-only. Set by drivers that proxy other storages (Alias).
   */
  readonly proxyRangeOption?: boolean;
  /** A new driver; a promise where the driver's module (and its SDK) is loaded only when needed. */
  create(options: OptionValues<O>, ctx: DriverContext): Driver | Promise<Driver>;
}
