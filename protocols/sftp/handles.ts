/**
 * One SFTP channel's handle table: OPEN and OPENDIR turn into handles here, CLOSE releases them, and
 * the number a client can hold is bounded. The table is per channel and every handle is released
 * when the channel ends, whatever way (session.ts calls abortAll).
 */
import ssh2 from 'ssh2';
import type { AccessContext } from '../../src/auth/principal.js';
import { VfsError } from '../../src/errors.js';
import { join } from '../../src/paths.js';
import type { VfsApi } from '../../src/vfs/types.js';
import { DirHandle } from './dir-handle.js';
import { ReadHandle } from './read-handle.js';
import { mayStillWrite, missingParent, statOrUndefined, undecodedName } from './vfs-lookups.js';
import { WriteHandle, type ReorderBudget } from './write-handle.js';

const { OPEN_MODE } = ssh2.utils.sftp;
/** Open handles per channel: bounds fds and streams a client can pin (advertised in limits). */
export const MAX_HANDLES = 256;
/**
 * Open handles of one user over all their channels and connections: MAX_HANDLES alone bounded a
 * channel, and one connection with 40 channels held 10,240 file descriptors (the process limit is
 * the whole server's: HTTP and the store then fail with EMFILE).
 */
export const MAX_HANDLES_PER_USER = 1024;
/**
 * Listed entries one user's dir handles may hold, over all their sessions. A dir handle keeps its
 * folder's whole listing (some 200 bytes an entry) until CLOSE, so MAX_HANDLES_PER_USER alone let a
 * read-only user hold 1,024 copies of a 20,000-file folder: 4 GB of heap. Past the bound an OPENDIR
 * fails while the user has other folders open; a folder opened alone always opens, however big.
 */
export const MAX_DIR_ENTRIES_PER_USER = 1_000_000;

/** How long an update OPEN waits for this session's writer on the same file to land (see afterWriterOf). */
const WRITER_WAIT_MS = 1000;

export type Handle = DirHandle | ReadHandle | WriteHandle;

/** What opening handles needs from the session (SessionDeps extends this). */
export interface HandleTableDeps {
  vfs: VfsApi;
  ctx: AccessContext;
  tmpDir: string;
  /**
   * Virtual paths open for an exclusive create (OPEN with CREAT|EXCL) on any session of this
   * server: a second exclusive open of the same path fails while the first is open, as open(2)
   * with O_EXCL would (the file only appears at CLOSE here). The put itself never replaces.
   */
  exclusive?: Set<string>;
  /** Out-of-order WRITE bytes held in memory by every upload of this server (write-handle.ts). */
  reorder?: ReorderBudget;
  /** Open handles per user id, over every session of this server (MAX_HANDLES_PER_USER). */
  userHandles?: Map<number, number>;
  /** Entries held by open dir handles per user id, over every session (MAX_DIR_ENTRIES_PER_USER). */
  userDirEntries?: Map<number, number>;
}

export class HandleTable {
  private readonly handles = new Map<string, Handle>();
  private nextHandle = 1;
  /** OPEN/OPENDIR requests under way: clients pipeline them, so MAX_HANDLES counts these too. */
  private opening = 0;
  /** Uploads whose CLOSE is being carried out, and their handles. */
  private readonly uploadsClosing = new Map<Promise<unknown>, WriteHandle>();
  /** OPENs of files under way, by path (the latest of each): see landed. */
  private readonly openingFiles = new Map<string, Promise<unknown>>();
  private readonly uid: number;

  /**
   * `releaseChunk` hands WRITE packet memory back once the driver wrote it (write-pool.ts);
   * `ended` tells whether the session is gone, so an OPEN finishing after that is refused.
   */
  constructor(
    private readonly d: HandleTableDeps,
    private readonly releaseChunk: (chunk: Buffer) => void,
    private readonly ended: () => boolean,
  ) {
    this.uid = d.ctx.principal.userId;
  }

  /** Count `delta` handles (or, with userDirEntries, listed entries) to this table's user. */
  private charge(delta: number, m = this.d.userHandles): void {
    if (!m) return;
    const n = (m.get(this.uid) ?? 0) + delta;
    if (n > 0) m.set(this.uid, n);
    else m.delete(this.uid);
  }

  /** Uploads whose CLOSE is being carried out (SftpSession.teardown waits for them). */
  get closing(): ReadonlyMap<Promise<unknown>, WriteHandle> {
    return this.uploadsClosing;
  }

  /**
   * Wait until what this session has under way at `path` is done: its uploads landing under that
   * name (CLOSE under way; with `below`, also those landing anywhere under the folder `path`: a
   * folder renamed meanwhile lost the file) and its OPEN of that file. FUSE (sshfs) sends CLOSE
   * from the kernel's asynchronous release, so the app's next call reaches us while the file is
   * still landing: the REMOVE of a .fuse_hidden name left the file behind, `echo hi > f && cat f`
   * (or mv, ls, touch, `>>`) found no f, and `mv dir dir2` lost the file. sshfs also pipelines a STAT
   * right behind OPEN(CREAT): an OPEN that looks at the storage first (EXCL: `cp` to the mount; no
   * TRUNC: `>>`) had no handle yet, so the STAT found nothing and the create failed with ENOENT.
   * undefined when nothing is under way there: no await, so requests keep their order.
   */
  landed(path: string, below = false): Promise<void> | undefined {
    const under = path === '/' ? '/' : `${path}/`;
    const waits: Promise<unknown>[] = [...this.uploadsClosing].filter(([, h]) => h.name === path || (below && h.name.startsWith(under))).map(([landing]) => landing);
    const opening = this.openingFiles.get(path);
    if (opening) waits.push(opening);
    return waits.length ? Promise.allSettled(waits).then(() => undefined) : undefined;
  }

  get(id: Buffer): Handle {
    const h = this.handles.get(id.toString('hex'));
    if (!h) throw new VfsError('INVALID', 'invalid handle');
    return h;
  }

  /** The write handle this session has open under the name `path` (the latest one), if any. */
  writerOf(path: string): WriteHandle | undefined {
    let found: WriteHandle | undefined;
    for (const h of this.handles.values()) if (h.kind === 'write' && h.name === path && !h.unlinked) found = h;
    return found;
  }

  /** OPENDIR: the new handle's id. */
  async openDir(path: string): Promise<Buffer> {
    // Each dir handle holds its whole listing until CLOSE: bounded like file handles.
    const listing = await this.reserved(() => this.d.vfs.list(this.d.ctx, path));
    // A session that ended meanwhile (abortAll has run) would never release it: the handle stayed
    // counted against the user for good, and enough dropped connections locked them out of SFTP.
    if (this.ended()) throw new VfsError('UPSTREAM', 'session ended');
    // Checked and charged once the listing's size is known, in one synchronous step: OPENDIRs
    // pipelined together cannot all pass on the same count.
    const held = this.d.userDirEntries?.get(this.uid) ?? 0;
    if (held > 0 && held + listing.entries.length > MAX_DIR_ENTRIES_PER_USER) throw new VfsError('INVALID', 'too many listed entries held open for this user: close some directories');
    this.charge(listing.entries.length, this.d.userDirEntries);
    return this.add(new DirHandle(path, listing.entries));
  }

  /** OPEN of a file: the new handle's id. */
  openFile(path: string, flags: number): Promise<Buffer> {
    const opened = this.afterWriterOf(path, flags).then(() => this.reserved((taken) => this.open(path, flags, taken)));
    this.openingFiles.set(path, opened);
    const done = () => void (this.openingFiles.get(path) === opened && this.openingFiles.delete(path));
    opened.then(done, done);
    return opened;
  }

  /**
   * An OPEN that starts from the file as it is now waits for this session's writer still open on
   * the path to land, at most WRITER_WAIT_MS (a client holding two handles on one file on purpose
   * goes on as before). FUSE (sshfs) sends the CLOSE of the write before from its asynchronous
   * release, which can reach us after this OPEN: an update (writing without TRUNC: `>>`, an in-place
   * edit) started from the file without that write and its landing undid it (`echo 3 >> log` right
   * after `echo 2 >> log` lost a line); a read, or a TRUNC without CREAT (the shell's `>` on a file
   * the kernel knows), found no file yet (`cat f`, `echo x > f` right after writing f: ENOENT).
   * Only a plain upload (CREAT|TRUNC) replaces whatever is there without looking.
   */
  private async afterWriterOf(path: string, flags: number): Promise<void> {
    if (flags & OPEN_MODE.CREAT && flags & OPEN_MODE.TRUNC) return;
    const w = this.writerOf(path);
    if (!w) return;
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([w.settled(), new Promise((resolve) => (timer = setTimeout(resolve, WRITER_WAIT_MS)))]);
    clearTimeout(timer);
  }

  /** CLOSE: the handle is gone at once; a reader's CLOSE returns once the READs before it are answered, an upload's once the file landed. */
  async close(id: Buffer): Promise<void> {
    const hd = this.get(id);
    this.handles.delete(id.toString('hex'));
    // A reader stays the user's (MAX_HANDLES_PER_USER) until the READs sent before this CLOSE are answered.
    if (hd.kind === 'read') await hd.closeAfterReads();
    this.charge(-1);
    if (hd.kind === 'dir') this.charge(-hd.size, this.d.userDirEntries);
    else if (hd.kind === 'write') {
      const landing = hd.close();
      this.uploadsClosing.set(landing, hd);
      try {
        await landing;
      } finally {
        this.uploadsClosing.delete(landing);
      }
    }
  }

  /** Release every handle not yet closed: readers close, uploads are aborted. */
  abortAll(): void {
    for (const h of this.handles.values()) {
      if (h.kind === 'read') h.close();
      else if (h.kind === 'dir') this.charge(-h.size, this.d.userDirEntries);
      else if (h.kind === 'write') {
        h.abort();
        void h.settled();
      }
    }
    this.charge(-this.handles.size);
    this.handles.clear();
  }

  private add(h: Handle): Buffer {
    const id = Buffer.alloc(4);
    id.writeUInt32BE(this.nextHandle++ >>> 0, 0);
    this.handles.set(id.toString('hex'), h);
    this.charge(1);
    return id;
  }

  /**
   * Run an OPEN/OPENDIR with a handle slot reserved. `taken` gives the reservation up once the handle
   * is in the table (a write handle is, while its put starts), so nothing is counted twice.
   */
  private async reserved<T>(fn: (taken: () => void) => Promise<T>): Promise<T> {
    if (this.handles.size + this.opening >= MAX_HANDLES) throw new VfsError('INVALID', 'too many open handles');
    if ((this.d.userHandles?.get(this.uid) ?? 0) + this.opening >= MAX_HANDLES_PER_USER) throw new VfsError('INVALID', 'too many open handles for this user');
    this.opening++;
    let held = true;
    const taken = () => {
      if (held) (held = false), this.opening--;
    };
    try {
      return await fn(taken);
    } finally {
      taken();
    }
  }

  private async open(path: string, flags: number, taken: () => void): Promise<Buffer> {
    const { vfs, ctx } = this.d;
    const writing = (flags & (OPEN_MODE.WRITE | OPEN_MODE.APPEND)) !== 0;
    if (!writing) {
      const handle = await ReadHandle.open(vfs, ctx, path);
      if (this.ended()) {
        handle.close();
        throw new VfsError('UPSTREAM', 'session ended');
      }
      return this.add(handle);
    }
    const undecoded = flags & OPEN_MODE.CREAT ? undecodedName(vfs, ctx, path) : undefined;
    if (undecoded) await undecoded;
    const excl = (flags & OPEN_MODE.CREAT) !== 0 && (flags & OPEN_MODE.EXCL) !== 0;
    // The usual upload (CREAT|TRUNC) needs no look first: vfs.put itself answers IS_A_DIR, and
    // EXISTS for EXCL (overwrite: false). Skipping the stat saves a round of VFS checks per file.
    const plain = (flags & OPEN_MODE.CREAT) !== 0 && (flags & OPEN_MODE.TRUNC) !== 0 && !(flags & OPEN_MODE.APPEND);
    const existing = plain ? undefined : await statOrUndefined(vfs, ctx, path);
    if (existing?.isDir) throw new VfsError('IS_A_DIR');
    // A file this session is writing exists for its clients (STAT answers it) though it lands only at
    // CLOSE: replacing it (TRUNC without CREAT) found no file, and an exclusive create of it (a lock
    // file taken by a second app on one sshfs mount) succeeded. An update of it still answers
    // NOT_FOUND once afterWriterOf gave up: it has no landed content to start from.
    const beingWritten = !existing && this.writerOf(path) !== undefined;
    const replacing = beingWritten && (flags & OPEN_MODE.TRUNC) !== 0;
    if (!plain && !existing && !replacing && !(flags & OPEN_MODE.CREAT)) throw new VfsError('NOT_FOUND');
    if (excl && (existing || beingWritten)) throw new VfsError('EXISTS', 'file exists');
    const keep = existing && existing.size > 0 && !(flags & OPEN_MODE.TRUNC);
    // The session may have ended during the looks above (or while afterWriterOf waited): abortAll
    // has run, so a handle added now was never aborted: its put waited for a body forever, keeping
    // the EXCL claim (that name's exclusive creates answered EXISTS until a restart), the spill file
    // and the user's handle count.
    if (this.ended()) throw new VfsError('UPSTREAM', 'session ended');
    const claim = excl ? join(ctx.principal.basePath, path) : undefined;
    if (claim !== undefined) {
      if (this.d.exclusive?.has(claim)) throw new VfsError('EXISTS', 'file exists');
      this.d.exclusive?.add(claim);
    }
    const basePath = ctx.principal.basePath;
    const w = new WriteHandle(vfs, ctx, path, {
      recheck: () => mayStillWrite(vfs, ctx, path, basePath),
      overwrite: !excl,
      append: (flags & OPEN_MODE.APPEND) !== 0,
      seed: keep ? existing : undefined,
      tmpDir: this.d.tmpDir,
      release: this.releaseChunk,
      readable: (flags & OPEN_MODE.READ) !== 0,
      budget: this.d.reorder,
    });
    // Registered before start() so a session ending meanwhile aborts this put too.
    const hid = this.add(w);
    taken();
    try {
      await w.start();
    } catch (e) {
      if (this.handles.delete(hid.toString('hex'))) this.charge(-1);
      if (claim !== undefined) this.d.exclusive?.delete(claim);
      return missingParent(vfs, ctx, path, e);
    }
    // The claim lasts until the upload landed or failed (CLOSE, abort or the session's end).
    if (claim !== undefined) void w.settled().finally(() => this.d.exclusive?.delete(claim));
    if (this.ended()) throw new VfsError('UPSTREAM', 'session ended');
    return hid;
  }
}
