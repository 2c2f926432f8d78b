/**
 * One SFTP channel: ssh2 request events → VFS calls with the session's AccessContext. Nothing here
 * decides permissions, meta rules or path containment; the VFS does, and errors.ts maps its codes.
 * Handles (OPEN, OPENDIR, CLOSE and their bounds) live in the channel's table, handles.ts.
 */
import { posix } from 'node:path';
import type { Attributes, InputAttributes, SFTPWrapper } from 'ssh2';
import type { Logger } from 'pino';
import { isVfsError, VfsError } from '../../src/errors.js';
import { attrsOf } from './attrs.js';
import { STATUS, statusOf } from './errors.js';
import { ADVERTISED, handleExtended } from './extended.js';
import { HandleTable, MAX_HANDLES, type Handle, type HandleTableDeps } from './handles.js';
import { advertiseExtensions, MAX_RW, sendExitStatus, trySendData } from './openssh-ext.js';
import { ReplyGate } from './reply-gate.js';
import { missingParent, statOrUndefined, undecodedName } from './vfs-lookups.js';
import { MAX_REQUESTS, SharedWrites, WriteGate } from './write-gate.js';
import { WritePool } from './write-pool.js';
import type { WriteHandle } from './write-handle.js';

/**
 * Requests under way on one channel past which it is closed. The window gate (write-gate.ts) stops
 * a client at MAX_REQUESTS, but the window it already holds (ssh2's 2 MiB) carries some 70,000 more
 * 30-byte READs, each about 1.6 KB while it waits: only a client that never takes its answers gets
 * here (OpenSSH keeps 64 requests in flight, rclone about as many).
 */
const MAX_REQUESTS_HARD = 4 * MAX_REQUESTS;

/** How long a client EOF waits for in-flight requests (a CLOSE finishing its put) before closing. */
const EOF_DRAIN_MS = 30_000;

/** vfs, ctx, tmpDir, exclusive and reorder come from HandleTableDeps (handles.ts). */
export interface SessionDeps extends HandleTableDeps {
  /** Aborts ctx.signal: in-flight VFS calls stop when the session is gone. */
  abort: AbortController;
  log: Logger;
  /** Called on every request (idle timeout). */
  touch(): void;
  /**
   * Called before each reply: holds the connection's socket writes until the end of this tick, so a
   * burst of replies (a 255 KiB DATA is 8+ SSH packets) goes out in one writev instead of one
   * syscall per packet.
   */
  batch?(): void;
  /**
   * A copy of `data` when its bytes live in memory the connection reuses for its next socket read
   * (reused-reads.ts); `data` itself otherwise. Applied to what outlives the request's event: WRITE data.
   */
  stable?(data: Buffer): Buffer;
  /** WRITE bytes not answered yet on every channel of the server (write-gate.ts); one of its own when absent. */
  writes?: SharedWrites;
}

/** A client path with a trailing slash (other than the root itself) can only name a folder. */
function namesFolder(p: string): boolean {
  return p.length > 1 && p.endsWith('/');
}

/** Client paths are relative to the user's root: `.` and `` are `/`, `..` stops at `/`. */
export function clientPath(p: string): string {
  return posix.resolve('/', p);
}

export class SftpSession {
  private readonly handles: HandleTable;
  private inflight = 0;
  private idle?: () => void;
  private ended = false;
  /** Closed for holding MAX_REQUESTS_HARD requests: later ones are dropped. */
  private overloaded = false;

  /** Memory for WRITE packets, handed back by the driver once written (write-pool.ts). */
  private readonly writePool = new WritePool();
  /** READs wait while the client leaves its replies unread (reply-gate.ts), WRITEs while too many are unanswered (write-gate.ts). */
  private readonly replies: ReplyGate;
  private readonly writes: WriteGate;

  constructor(private readonly sftp: SFTPWrapper, private readonly d: SessionDeps) {
    // Before advertiseExtensions, which wraps push for the INIT exchange and then restores this.
    this.writePool.attach(sftp);
    this.writes = new WriteGate(sftp, d.writes);
    this.replies = new ReplyGate(sftp);
    this.handles = new HandleTable(d, this.writePool.release, () => this.ended);
    advertiseExtensions(sftp, ADVERTISED);
    this.listen();
    sftp.on('end', () => void this.clientEof());
    sftp.on('close', () => this.teardown());
    sftp.on('error', (err: Error) => {
      d.log.debug({ err }, 'sftp channel error');
      this.teardown();
    });
  }

  /** Requests under way: the connection is not idle while it owes an answer (server.ts). */
  get busy(): boolean {
    return this.inflight > 0;
  }

  private get vfs() {
    return this.d.vfs;
  }

  private get ctx() {
    return this.d.ctx;
  }

  /** Run one request: any throw becomes the mapped STATUS; `answered` runs once the answer is out (write-gate.ts). */
  private run(reqId: number, fn: () => Promise<void>, answered: () => void = this.writes.taken(0)): void {
    this.d.touch();
    if (this.inflight >= MAX_REQUESTS_HARD || this.overloaded) {
      answered();
      if (this.overloaded) return;
      this.overloaded = true;
      this.d.log.info({ ip: this.ctx.ip, requests: this.inflight }, 'sftp channel: too many requests under way, closing it');
      this.teardown(true);
      this.sftp.end();
      return;
    }
    this.inflight++;
    fn()
      .catch((e: unknown) => {
        if (!isVfsError(e)) this.d.log.error({ err: e }, 'sftp request failed');
        // A backend failure answers a fixed text (errors.ts): its detail goes to the log, as REST's
        // and WebDAV's do, or the admin never learns why. One the session's end cut off is not a failure.
        else if (e.code === 'UPSTREAM' || e.code === 'INTERNAL') {
          if (this.ended) this.d.log.debug({ err: e }, 'sftp client went away');
          else this.d.log.error({ err: e }, 'sftp request failed: storage error');
        }
        const s = statusOf(e);
        this.out().status(reqId, s.code, s.message);
      })
      .finally(() => {
        this.d.touch(); // the idle time counts from the answer
        answered();
        if (--this.inflight === 0) this.idle?.();
      });
  }

  private ok(reqId: number): void {
    this.out().status(reqId, STATUS.OK);
  }

  /** The channel, for a reply (see SessionDeps.batch). */
  private out(): SFTPWrapper {
    this.d.batch?.();
    return this.sftp;
  }

  private listen(): void {
    const s = this.sftp;
    s.on('OPEN', (id: number, filename: string, flags: number) =>
      this.run(id, async () => {
        // `name/` names a folder (open(2): EISDIR to create or write, ENOTDIR on a file); `scp f
        // host:newdir/` would otherwise create a file called newdir.
        if (namesFolder(filename)) throw new VfsError('IS_A_DIR', 'is a directory');
        // An upload of this session still landing there first (HandleTable.landed); no await otherwise.
        const landing = this.handles.landed(clientPath(filename));
        if (landing) await landing;
        this.out().handle(id, await this.handles.openFile(clientPath(filename), flags));
      }),
    );
    s.on('READ', (id: number, h: Buffer, offset: number, length: number) =>
      this.run(id, async () => {
        const r = this.handles.get(h);
        if (r.kind === 'dir') throw new VfsError('NOT_SUPPORTED', 'handle not open for reading');
        // Before any await: a CLOSE pipelined behind this READ waits for it (read-handle.ts).
        const answered = r.kind === 'read' ? r.begin() : undefined;
        const done = await this.replies.room(Math.min(length, MAX_RW)); // never throws
        try {
          if (r.kind === 'write') {
            // READ|WRITE opens (sshfs for an app's O_RDWR) read back what the handle holds.
            const back = await r.read(offset, length);
            return void (back ? s.data(id, back) : this.out().status(id, STATUS.EOF));
          }
          const data = await r.read(offset, length);
          if (!data) return void this.out().status(id, STATUS.EOF);
          // Both ways of sending copy the bytes into SSH packets before returning (or queue copies),
          // so the buffer goes back to the handle's pool at once.
          if (!trySendData(this.out(), id, data)) s.data(id, data);
          r.release(data);
        } finally {
          done();
          answered?.();
        }
      }),
    );
    s.on('WRITE', (id: number, h: Buffer, offset: number, data: Buffer) =>
      this.run(id, async () => {
        const w = this.handles.get(h);
        if (w.kind !== 'write') throw new VfsError('INVALID', 'handle not open for writing');
        await w.write(offset, this.d.stable ? this.d.stable(data) : data);
        this.ok(id);
      }, this.writes.taken(data.length)),
    );
    s.on('CLOSE', (id: number, h: Buffer) =>
      this.run(id, async () => {
        await this.handles.close(h);
        this.ok(id);
      }),
    );
    s.on('FSTAT', (id: number, h: Buffer) =>
      this.run(id, async () => {
        const a = await this.fstat(this.handles.get(h));
        this.out().attrs(id, a);
      }),
    );
    s.on('FSETSTAT', (id: number, h: Buffer, attrs: InputAttributes) =>
      this.run(id, async () => {
        const hd = this.handles.get(h);
        if (hd.kind === 'write') await this.setstatWriting(hd, attrs);
        else await this.setstat(hd.path, attrs);
        this.ok(id);
      }),
    );
    s.on('SETSTAT', (id: number, p: string, attrs: InputAttributes) =>
      this.run(id, async () => (await this.folderIf(namesFolder(p), clientPath(p)), await this.setstat(clientPath(p), attrs), this.ok(id))),
    );
    const stat = (id: number, p: string) =>
      this.run(id, async () => {
        const path = clientPath(p);
        const landing = this.handles.landed(path);
        if (landing) await landing; // only then: a STAT pipelined after OPEN must find its handle
        // A file this session has open for writing is answered from the handle while it is open:
        // the upload only lands at CLOSE (until then the VFS has no file, or the old one whose size
        // TRUNC made stale), and sshfs STATs right after OPEN(CREAT) and fails the create on ENOENT.
        const w = this.handles.writerOf(path);
        const e = w ? undefined : await this.vfs.stat(this.ctx, path);
        if (namesFolder(p) && !e?.isDir) throw new VfsError('NOT_FOUND', 'not a directory'); // stat(2): ENOTDIR
        this.out().attrs(id, e ? attrsOf(e) : await this.fstat(w!));
      });
    s.on('STAT', stat);
    s.on('LSTAT', stat);
    s.on('OPENDIR', (id: number, p: string) =>
      this.run(id, async () => {
        await this.handles.landed(clientPath(p), true);
        this.out().handle(id, await this.handles.openDir(clientPath(p)));
      }),
    );
    s.on('READDIR', (id: number, h: Buffer) =>
      this.run(id, async () => {
        const hd = this.handles.get(h);
        if (hd.kind !== 'dir') throw new VfsError('INVALID', 'not a directory handle');
        const batch = hd.next(this.ctx.principal.username);
        if (batch) this.out().name(id, batch);
        else this.out().status(id, STATUS.EOF);
      }),
    );
    s.on('REMOVE', (id: number, p: string) =>
      this.run(id, async () => {
        const path = clientPath(p);
        const w = namesFolder(p) ? undefined : this.handles.writerOf(path);
        if (w) return this.removeWriting(id, w, path);
        await this.handles.landed(path);
        if ((await this.vfs.stat(this.ctx, path)).isDir) throw new VfsError('IS_A_DIR', 'is a directory, use rmdir');
        if (namesFolder(p)) throw new VfsError('NOT_A_DIR', 'not a directory'); // unlink(2) of file/: ENOTDIR
        await this.vfs.remove(this.ctx, path);
        this.ok(id);
      }),
    );
    s.on('RMDIR', (id: number, p: string) =>
      this.run(id, async () => {
        const path = clientPath(p);
        if (!(await this.vfs.stat(this.ctx, path)).isDir) throw new VfsError('NOT_A_DIR');
        // rmdir(2): the VFS judges emptiness by the storage, hidden entries included.
        await this.vfs.remove(this.ctx, path, { onlyEmpty: true });
        this.ok(id);
      }),
    );
    s.on('MKDIR', (id: number, p: string) =>
      this.run(id, async () => {
        const path = clientPath(p);
        if (await statOrUndefined(this.vfs, this.ctx, path)) throw new VfsError('EXISTS', 'file exists');
        await undecodedName(this.vfs, this.ctx, path);
        await this.vfs.mkdir(this.ctx, path, { parents: false }).catch((e: unknown) => missingParent(this.vfs, this.ctx, path, e));
        this.ok(id);
      }),
    );
    s.on('RENAME', (id: number, from: string, to: string) =>
      this.run(id, async () => {
        await this.rename(from, to, false);
        this.ok(id);
      }),
    );
    s.on('REALPATH', (id: number, p: string) =>
      this.run(id, async () => {
        const path = clientPath(p);
        this.out().name(id, [{ filename: path, longname: path, attrs: {} as Attributes }]);
      }),
    );
    s.on('EXTENDED', (id: number, name: string, data: Buffer | undefined) =>
      this.run(id, async () => {
        const r = await handleExtended(s, id, name, data, {
          rename: (from, to) => this.rename(from, to, true),
          usage: (p) => this.vfs.usage(this.ctx, clientPath(p)),
          // An upload's file only exists once it lands: its folder answers for the storage.
          handlePath: (h) => {
            const hd = this.handles.get(h);
            return hd.kind === 'write' ? posix.dirname(hd.path) : hd.path;
          },
          maxHandles: MAX_HANDLES,
        });
        if (r === 'ok') this.ok(id);
      }),
    );
  }

  /**
   * `name/` can only name a folder: rename(2) and utimes(2) answer ENOTDIR when it is a file. clientPath
   * drops the slash, so without this `rename file new/` renamed the file to `new`.
   */
  private async folderIf(slashed: boolean, path: string): Promise<void> {
    if (slashed && !(await this.vfs.stat(this.ctx, path)).isDir) throw new VfsError('NOT_A_DIR', 'not a directory');
  }

  /**
   * REMOVE of a file this session is writing (STAT finds it): unlink(2) of an open file. The upload
   * lands nothing at CLOSE, and a file it was to replace goes now. It answered NO_SUCH_FILE, and the
   * file appeared at CLOSE: an app's create-then-unlink scratch file stayed behind.
   */
  private async removeWriting(id: number, w: WriteHandle, path: string): Promise<void> {
    await this.vfs.remove(this.ctx, path).catch((e: unknown) => {
      if (!isVfsError(e, 'NOT_FOUND')) throw e;
    });
    w.unlinked = true;
    this.ok(id);
  }

  /** RENAME (overwrite: false) and posix-rename (overwrite: true); `x/` on either side needs a folder. */
  private async rename(from: string, to: string, overwrite: boolean): Promise<void> {
    const src = clientPath(from);
    await Promise.all([this.handles.landed(src, true), this.handles.landed(clientPath(to))]);
    const w = namesFolder(from) || namesFolder(to) ? undefined : this.handles.writerOf(src);
    // A file this session is writing at the target exists for the client though it lands only at
    // CLOSE: RENAME moved over it and that CLOSE then landed over the moved file (its bytes lost).
    // As rename(2): RENAME refuses it, posix-rename takes the name from it (CLOSE lands nothing).
    const over = namesFolder(to) ? undefined : this.handles.writerOf(clientPath(to));
    if (over && over !== w && !overwrite) throw new VfsError('EXISTS', 'file exists');
    if (w && posix.dirname(clientPath(to)) === posix.dirname(src)) await this.renameWriting(w, clientPath(to), overwrite);
    else {
      await this.folderIf(namesFolder(from) || namesFolder(to), src);
      await undecodedName(this.vfs, this.ctx, clientPath(to));
      await this.vfs.moveTo(this.ctx, src, clientPath(to), { overwrite });
    }
    if (over && over !== w) over.unlinked = true;
  }

  /**
   * RENAME within its folder of a file this session is writing (FUSE renames a file unlinked while
   * open to .fuse_hidden…, then removes that name): the handle takes the new name and CLOSE moves the
   * landed file there. It answered NO_SUCH_FILE (nothing has landed yet), so the unlink failed and
   * the file stayed. The move's permission is only checked at CLOSE (there is no file to check yet).
   */
  private async renameWriting(w: WriteHandle, to: string, overwrite: boolean): Promise<void> {
    await undecodedName(this.vfs, this.ctx, to);
    if (!overwrite && (this.handles.writerOf(to) || (await statOrUndefined(this.vfs, this.ctx, to)))) throw new VfsError('EXISTS', 'file exists');
    w.name = to;
  }

  private async fstat(h: Handle): Promise<Attributes> {
    if (h.kind === 'read') return attrsOf(h.entry);
    // An mtime set on the open file (futimens: `touch -d`, `cp -p` through sshfs) is what it shows
    // until CLOSE applies it: answering "now" made `touch -d 2002-01-01 f && stat f` show today,
    // and sshfs kept that in its attribute cache.
    if (h.kind === 'write') return attrsOf({ isDir: false, size: h.size, modified: h.modified ?? new Date() });
    return attrsOf(await this.vfs.stat(this.ctx, h.path));
  }

  /**
   * mtime maps onto the VFS; a size is accepted only when it is the current size (a no-op), any
   * other is refused whole (nothing applied): truncate is not supported (except on a READ|WRITE
   * handle, see setstatWriting). Modes and owners are accepted and ignored (`put -p` sends them).
   * A path this session is writing goes to its handle.
   */
  private async setstat(path: string, attrs: InputAttributes): Promise<void> {
    await this.handles.landed(path);
    const w = this.handles.writerOf(path);
    if (w) return this.setstatWriting(w, attrs);
    if (attrs.size !== undefined) refuseResize((await this.vfs.stat(this.ctx, path)).size, attrs.size);
    if (attrs.mtime !== undefined) await this.vfs.setModified(this.ctx, path, toDate(attrs.mtime));
    // A chmod/chown alone changes nothing, but a missing or hidden path still answers NO_SUCH_FILE.
    else if (attrs.size === undefined) await this.vfs.stat(this.ctx, path);
  }

  /**
   * (F)SETSTAT of a file being written: the size so far is the current size, which only a handle
   * holding the whole file (READ|WRITE, an update, or one that sent no byte yet) can change; mtime
   * waits for CLOSE. resize() compares the size once the WRITEs before this request are applied
   * (w.size here may not count them yet).
   */
  private async setstatWriting(w: WriteHandle, attrs: InputAttributes): Promise<void> {
    if (attrs.size !== undefined) await w.resize(attrs.size);
    if (attrs.mtime !== undefined) w.setModified(toDate(attrs.mtime));
  }

  /** Client EOF (its stdin closed): finish what is in flight, send exit-status 0, close the channel. */
  private async clientEof(): Promise<void> {
    this.handles.abortAll();
    if (this.inflight) {
      await new Promise<void>((resolve) => {
        this.idle = resolve;
        setTimeout(resolve, EOF_DRAIN_MS).unref();
      });
    }
    sendExitStatus(this.sftp, 0);
    this.sftp.end();
    this.teardown();
  }

  /** The channel or connection is gone: release everything, stop in-flight VFS calls. */
  teardown(abortCloses = false): void {
    if (this.ended) return;
    this.ended = true;
    this.writes.dispose();
    this.handles.abortAll();
    this.writePool.clear();
    this.replies.close();
    // An upload whose CLOSE arrived has all its bytes: it lands even when the client drops the
    // connection right after sending CLOSE (OpenSSH's server too finishes what it received). Only
    // then, or after EOF_DRAIN_MS, are the session's VFS calls stopped. A revoked login stops at once.
    if (abortCloses || this.handles.closing.size === 0) return this.d.abort.abort();
    const stop = setTimeout(() => this.d.abort.abort(), EOF_DRAIN_MS);
    stop.unref();
    void Promise.allSettled([...this.handles.closing.keys()]).then(() => {
      clearTimeout(stop);
      this.d.abort.abort();
    });
  }
}

function refuseResize(current: number, wanted: number): void {
  if (wanted !== current) throw new VfsError('NOT_SUPPORTED', 'truncate is not supported');
}

function toDate(t: number | Date): Date {
  return t instanceof Date ? t : new Date(t * 1000);
}
