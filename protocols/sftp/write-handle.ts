/**
 * A file opened for writing: every WRITE feeds ONE vfs.put, so the upload is atomic (the driver
 * writes a temp file and renames it into place; an aborted body leaves nothing under the name).
 *
 * Stream mode (the normal case): WRITEs at the frontier are pushed into the put's body. When the body
 * is over its high-water mark the WRITE's STATUS reply is held until the driver asks for more, so a
 * pipelining client (64 requests in flight) is slowed to the storage's speed instead of filling RAM.
 * WRITEs ahead of the frontier (rclone's concurrent writers) wait in a reorder buffer, bounded by
 * REORDER_WINDOW; they are acknowledged at once so a client that waits for one ack before sending
 * the gap cannot deadlock.
 *
 * Spill mode: when the reorder buffer overflows (random access, far-ahead writes), when a gap
 * remains at CLOSE, or for opens that keep existing content (no TRUNC, APPEND), bytes from `base`
 * on go to a temp file in DATA/tmp (random access, holes read as zeros) and are streamed into the
 * same put at CLOSE. Rewriting bytes already handed to the put is refused (OP_UNSUPPORTED).
 * A handle opened for reading too (READ|WRITE: sshfs for an app's O_RDWR) spills from byte 0, so
 * the whole file is in the spill file: it reads back, rewrites and resizes like a local file.
 *
 * CLOSE resolves when the put is durable and reports its error; abort() (session gone without
 * CLOSE) destroys the body, so the put fails and the driver removes its temp file.
 */
import { randomUUID } from 'node:crypto';
import { open, rm, type FileHandle } from 'node:fs/promises';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import type { AccessContext } from '../../src/auth/principal.js';
import { VfsError } from '../../src/errors.js';
import { parent } from '../../src/paths.js';
import type { Entry, StorageLease, VfsApi } from '../../src/vfs/types.js';
import { MAX_RW } from './openssh-ext.js';
import { statOrUndefined } from './vfs-lookups.js';

const BODY_HIGH_WATER = 4 << 20;
const REORDER_WINDOW = 32 << 20;
const SPILL_CHUNK = 1 << 20;
/**
 * Reorder-buffer bytes all the uploads sharing a ReorderBudget (the server's) may hold: each
 * handle's window alone let one channel pin 256 × 32 MiB by leaving byte 0 unwritten.
 */
export const REORDER_BUDGET = 256 << 20;

/** Reorder-buffer bytes held now by the uploads that share this object. */
export interface ReorderBudget {
  held: number;
}

export interface WriteOpenOptions {
  /** false: the put fails with EXISTS if the file appeared meanwhile (OPEN with EXCL). */
  overwrite: boolean;
  /** Every WRITE goes to the current end, whatever its offset (OPEN with APPEND). */
  append: boolean;
  /** Start from the file's current bytes (OPEN without TRUNC over an existing non-empty file). */
  seed?: Entry;
  tmpDir: string;
  /** Passed to vfs.put: body chunks the driver has written (their memory can be reused). */
  release?(chunk: Buffer): void;
  /** Opened READ|WRITE: the whole file is kept in the spill file (see the header). */
  readable?: boolean;
  /** Shared with other uploads: past REORDER_BUDGET, out-of-order writes spill instead. */
  budget?: ReorderBudget;
  /**
   * Run at CLOSE before the file lands; a throw aborts the put (vfs-lookups.ts mayStillWrite). The
   * put's permission checks ran once, at OPEN.
   */
  recheck?(): Promise<void>;
}

interface Spill {
  fd: FileHandle;
  path: string;
  /** Absolute file offset of the spill file's byte 0 (the stream frontier when spilling began). */
  base: number;
}

export class WriteHandle {
  readonly kind = 'write' as const;
  private readonly body: Readable;
  private put!: Promise<Entry>;
  private error: unknown;
  private started = false;
  private waiters: Array<{ resolve(): void; reject(e: unknown): void }> = [];
  /** Resolved once the put has passed the VFS's checks (onTarget) or first asks for body bytes. */
  private markReady!: () => void;
  private readonly ready = new Promise<void>((r) => (this.markReady = r));
  /** Bytes handed to the put so far (stream mode). */
  private frontier = 0;
  private readonly reorder = new Map<number, Buffer>();
  private reorderBytes = 0;
  private spill?: Spill;
  /** Highest byte end written, for FSTAT and for CLOSE in spill mode. */
  size = 0;
  /** One WRITE at a time: pushes must stay in order and spilling is async. */
  private chain: Promise<void> = Promise.resolve();
  private closing = false;
  private mtime?: Date;
  /**
   * The name this session knows the file by: `path` until a RENAME of the open file (FUSE renames a
   * file unlinked while open to .fuse_hidden…); CLOSE then moves the landed file there.
   */
  name: string;
  /** REMOVE of the open file: CLOSE lands nothing, as an unlinked inode vanishes at its last close. */
  unlinked = false;
  /** The storage instance the put runs on (told at onTarget): asked before each request (cutOff). */
  private lease?: StorageLease;
  /** Stops waiting for the lease's withdrawal (once the put has settled). */
  private unwatch?: () => void;

  constructor(
    private readonly vfs: VfsApi,
    private readonly ctx: AccessContext,
    readonly path: string,
    private readonly opts: WriteOpenOptions,
  ) {
    this.name = path;
    this.body = new Readable({
      highWaterMark: BODY_HIGH_WATER,
      read: () => {
        this.markReady();
        for (const w of this.waiters.splice(0)) w.resolve();
      },
    });
    // abort() destroys the body with an error, possibly before the driver has attached to it (OPEN
    // answers at onTarget, before the first read): without a listener that would be an uncaught
    // 'error'. The put's consumer still sees the error; this handle records it through fail().
    this.body.on('error', () => undefined);
  }

  /**
   * Start the put and wait until the VFS has passed its checks or refused (permission, hidden,
   * EXISTS, IS_A_DIR, NOT_A_DIR…), so OPEN itself answers PERMISSION_DENIED and friends. The put
   * tells us through onTarget, called after its last check and before the driver starts (opening a
   * temp file, an upstream connection…): OPEN need not wait for the driver's first read (a few
   * microtasks with the Local driver, an upstream round trip with remote ones), and early WRITEs
   * wait in the body meanwhile. A driver failure after that point is reported by WRITE or CLOSE.
   */
  async start(): Promise<void> {
    if (this.opts.seed || this.opts.append || this.opts.readable) {
      try {
        await this.seedFrom(this.opts.seed);
      } catch (e) {
        await this.dropSpill();
        throw spillFailure(e);
      }
    }
    this.started = true;
    // parents: false — OPEN never creates folders (OpenSSH: ENOENT); a missing one is NOT_A_DIR here.
    this.put = this.vfs.put(this.ctx, this.path, this.body, {
      overwrite: this.opts.overwrite, parents: false, release: this.opts.release, onTarget: (_existed, lease) => {
        this.lease = lease;
        this.unwatch = lease?.onWithdrawn(() => this.withdrawn());
        this.markReady();
      },
    });
    this.put.catch((e: unknown) => this.fail(e));
    const unwatch = () => this.unwatch?.();
    void this.put.then(unwatch, unwatch);
    await Promise.race([this.ready, this.put.then(() => undefined, () => undefined)]);
    if (this.error) {
      await this.dropSpill();
      throw this.error;
    }
  }

  private fail(e: unknown): void {
    this.error ??= e;
    for (const w of this.waiters.splice(0)) w.reject(this.error);
  }

  /** Remember an mtime from (F)SETSTAT: applied once the put is done (the file does not exist yet). */
  setModified(d: Date): void {
    this.mtime = d;
  }

  /** That mtime, if any: (F)STAT answers it while the file is open (see SftpSession.fstat). */
  get modified(): Date | undefined {
    return this.mtime;
  }

  /**
   * The storage's withdrawal when the admin deleted, disabled or changed it since OPEN (StorageLease),
   * the put then aborted (nothing lands, the old instance is let go); undefined while it serves. Asked
   * first by every request on the handle: WRITEs went on into the removed storage, and CLOSE landed
   * the file in its folder and answered OK. Requests already under way finish.
   */
  private cutOff(): unknown {
    try {
      this.lease?.check();
      return undefined;
    } catch (e) {
      this.abort(e);
      return e;
    }
  }

  /**
   * The storage was withdrawn: the put is aborted now, not at the handle's next request, so the old
   * instance is let go (the driver drops its temp file, a remote one its connection) while the
   * client leaves the handle idle. The WRITEs under way finish first; a CLOSE under way lands.
   * The spill file goes too: every later request is refused, so nothing reads it again, and an
   * update handle's (a copy of the whole file) took that much of DATA/tmp until the client's CLOSE.
   */
  private withdrawn(): void {
    void this.chain.then(() => (!this.closing && this.cutOff() ? this.dropSpill() : undefined)).catch(() => undefined);
  }

  write(offset: number, data: Buffer): Promise<void> {
    const cut = this.cutOff();
    if (cut) return Promise.reject(cut);
    if (this.closing) return Promise.reject(new VfsError('INVALID', 'handle is closing'));
    const op = this.chain.then(() => this.doWrite(offset, data)).catch((e: unknown) => Promise.reject(spillFailure(e)));
    this.chain = op.catch(() => undefined);
    return op;
  }

  private async doWrite(offset: number, data: Buffer): Promise<void> {
    // A WRITE of no bytes changes nothing, as pwrite(2) of nothing (OpenSSH's server: the size
    // stays). Taking its offset as the new end made CLOSE pad up to it with one zero buffer: past
    // 4 GiB more than a Buffer holds (internal error, the upload lost), below that GiBs of RAM at once.
    if (data.length === 0) {
      if (this.error) throw this.error;
      return;
    }
    if (this.opts.append) offset = this.size;
    const end = offset + data.length;
    if (end > this.size + REORDER_WINDOW) await this.roomFor(end);
    if (this.error) throw this.error; // after the wait: an abort meanwhile must not hold bytes
    if (this.spill) return this.spillWrite(offset, data, end);
    if (offset < this.frontier) throw rewriteRefused();
    this.size = Math.max(this.size, end);
    if (offset > this.frontier) {
      // The window bounds both how far ahead a write may land and how much we hold in memory.
      const shared = this.opts.budget?.held ?? 0;
      // A chunk overlapping one held (a client rewriting bytes not streamed yet) spills too: the
      // map replaced a held chunk at the same offset (a shorter one cut the file short) and pushed
      // overlapping ones in offset order (the earlier WRITE won); the spill file applies them in order.
      if (end - this.frontier > REORDER_WINDOW || this.reorderBytes + data.length > REORDER_WINDOW || shared + data.length > REORDER_BUDGET || this.overlapsHeld(offset, end)) {
        await this.openSpill();
        return this.spillWrite(offset, data, end);
      }
      this.hold(data.length);
      this.reorder.set(offset, data);
      return;
    }
    let flowing = this.pushBody(data);
    for (let next = this.reorder.get(this.frontier); next; next = this.reorder.get(this.frontier)) {
      this.reorder.delete(this.frontier);
      this.hold(-next.length);
      flowing = this.pushBody(next);
    }
    if (!flowing) await this.demand();
  }

  private pushBody(b: Buffer): boolean {
    this.frontier += b.length;
    return this.body.push(b);
  }

  private demand(): Promise<void> {
    if (this.error) return Promise.reject(this.error);
    return new Promise((resolve, reject) => this.waiters.push({ resolve, reject }));
  }

  private async spillWrite(offset: number, data: Buffer, end: number): Promise<void> {
    const s = this.spill!;
    if (offset < s.base) throw rewriteRefused();
    await s.fd.write(data, 0, data.length, offset - s.base);
    this.size = Math.max(this.size, end);
  }

  /** Switch to spill mode at the current frontier, moving the reorder buffer into the file. */
  private async openSpill(): Promise<void> {
    const path = join(this.opts.tmpDir, `sftp-${randomUUID()}`);
    const fd = await open(path, 'wx+', 0o600);
    this.spill = { fd, path, base: this.frontier };
    for (const [off, buf] of this.reorder) {
      // An odd client may have sent overlapping chunks: bytes already streamed cannot change.
      const skip = Math.max(0, this.frontier - off);
      if (skip < buf.length) await fd.write(buf, skip, buf.length - skip, off + skip - this.frontier);
    }
    this.dropReorder();
  }

  /** Whether [offset, end) overlaps a chunk in the reorder buffer (held chunks never overlap each other). */
  private overlapsHeld(offset: number, end: number): boolean {
    for (const [off, buf] of this.reorder) if (off < end && offset < off + buf.length) return true;
    return false;
  }

  private hold(delta: number): void {
    this.reorderBytes += delta;
    if (this.opts.budget) this.opts.budget.held += delta;
  }

  private dropReorder(): void {
    this.hold(-this.reorderBytes);
    this.reorder.clear();
  }

  /** Whether the spill file holds the whole file (reads, rewrites and resizes are possible). */
  private get whole(): Spill | undefined {
    return this.spill?.base === 0 ? this.spill : undefined;
  }

  /**
   * READ on a READ|WRITE handle: the bytes as written so far (after the WRITEs before it), at most
   * MAX_RW; holes read as zeros; undefined at or past the end.
   */
  async read(offset: number, length: number): Promise<Buffer | undefined> {
    const cut = this.cutOff();
    if (cut) throw cut;
    await this.chain;
    if (this.error) throw this.error;
    const s = this.whole;
    if (!s) throw new VfsError('NOT_SUPPORTED', 'handle not open for reading');
    if (offset >= this.size) return undefined;
    // At most one DATA packet (a READ may ask for 4 GiB); zeroed: a hole past the spill file's end.
    const buf = Buffer.alloc(Math.min(length, MAX_RW, this.size - offset));
    await s.fd.read(buf, 0, buf.length, offset);
    return buf;
  }

  /**
   * SETSTAT size / ftruncate on a handle whose whole file is in the spill file (or can still be: nothing
   * handed to the put yet); refused otherwise.
   * The size is compared after the WRITEs sent before it (the chain): lftp pipelines WRITE then
   * FSETSTAT(size = its length, mtime) without waiting, and that no-op used to be refused whole.
   */
  resize(size: number): Promise<void> {
    const cut = this.cutOff();
    if (cut) return Promise.reject(cut);
    const op = this.chain.then(async () => {
      if (this.error) throw this.error;
      if (size === this.size) return;
      // Nothing handed to the put yet (a new file: `truncate -s`, `dd seek=… count=0` through sshfs
      // open it WRITE|CREAT then ftruncate): the whole file can still go to a spill file from byte 0.
      if (!this.spill && this.frontier === 0) await this.openSpill();
      const s = this.whole;
      if (!s) throw new VfsError('NOT_SUPPORTED', 'changing the size of a file being uploaded is not supported');
      if (size > this.size + REORDER_WINDOW) await this.roomFor(size);
      await s.fd.truncate(size);
      this.size = size;
    });
    this.chain = op.catch(() => undefined);
    return op;
  }

  /**
   * Holes are not kept sparse: CLOSE streams every byte up to the end into the put, so a 1-byte WRITE
   * at 4 TiB would make the storage write 4 TiB of zeros. A write (or resize) reaching far past the
   * end must fit the storage's free space, when its driver reports one; an offset past 2^53 (a
   * garbled uint64) cannot even be held and used to fail only at CLOSE, as an internal error.
   */
  private async roomFor(end: number): Promise<void> {
    if (!Number.isSafeInteger(end)) throw new VfsError('INVALID', 'offset out of range');
    // The folder's: the file itself may not exist yet.
    const { free } = await this.vfs.usage(this.ctx, parent(this.path)).catch(() => ({ free: undefined }));
    if (free !== undefined && end - this.size > free) throw new VfsError('NO_SPACE', 'no space left on the storage for a write this far past the end');
  }

  /**
   * Copy the file's current bytes into a spill file (non-truncating, append and READ|WRITE opens).
   * Costly for big files, kept on purpose: updating 6 bytes of a 512 MiB Local file took 1.4 s at
   * OPEN (this copy) and 2 s at CLOSE (the whole file through the put), with ~1 GiB more disk at the
   * peak (this copy plus the driver's temp file). What it buys: every driver, whatever it can do, gets
   * an atomic update of a snapshot taken at OPEN (seedStillThere refuses a file changed meanwhile),
   * and a READ|WRITE handle reads back from one local file. Copying only the written ranges would
   * still need the whole file streamed into the put at CLOSE, and would read the old bytes at CLOSE
   * instead of OPEN; writing in place would give up atomic uploads.
   */
  private async seedFrom(entry: Entry | undefined): Promise<void> {
    await this.openSpill();
    if (!entry || entry.size === 0) return;
    const { stream } = await this.vfs.read(this.ctx, this.path);
    let pos = 0;
    for await (const chunk of stream as AsyncIterable<Buffer>) {
      await this.spill!.fd.write(chunk, 0, chunk.length, pos);
      pos += chunk.length;
    }
    this.size = pos;
  }

  /** CLOSE: finish the body, wait for the put, apply a pending mtime. Reports the put's error. */
  async close(): Promise<Entry | undefined> {
    this.cutOff(); // recorded as the handle's error: reported below
    this.closing = true;
    try {
      await this.chain;
      if (this.unlinked) return await this.discard();
      if (this.error) throw this.error;
      await this.opts.recheck?.();
      if (this.reorder.size) await this.openSpill(); // a gap remains: holes become zeros
      if (this.spill) await this.drainSpill();
      if (this.opts.seed) await this.seedStillThere(this.opts.seed);
      this.body.push(null);
      const entry = await this.put;
      if (this.mtime) await this.vfs.setModified(this.ctx, this.path, this.mtime).catch(() => undefined);
      if (this.name !== this.path) return await this.vfs.moveTo(this.ctx, this.path, this.name, { overwrite: true });
      return entry;
    } catch (err) {
      const e = spillFailure(err);
      this.abort(e);
      throw this.error ?? e;
    } finally {
      await this.dropSpill();
    }
  }

  /**
   * An update (no TRUNC) lands the file's bytes as they were at OPEN plus the WRITEs: if the file was
   * removed or replaced meanwhile, landing them brought a removed file back or overwrote the newer one
   * with old bytes (a lost update). On a POSIX server those WRITEs go to the old inode and vanish; here
   * CLOSE refuses, so the put is aborted and the client is told. The look is just before the put's
   * end: a change between it and the driver's rename is not seen. Replaced means another size or a
   * later mtime (in whole seconds): remote drivers may answer one look from a put's entry, stamped
   * with our clock when it landed, and the next from the server, whose own stamp is usually earlier.
   */
  private async seedStillThere(seed: Entry): Promise<void> {
    const now = await statOrUndefined(this.vfs, this.ctx, this.path);
    if (!now) throw new VfsError('NOT_FOUND', 'the file was removed while open for update: the changes were not saved');
    const secs = (d: Date) => Math.floor(d.getTime() / 1000);
    if (now.isDir || now.size !== seed.size || secs(now.modified) > secs(seed.modified)) {
      throw new VfsError('EXISTS', 'the file was replaced while open for update: the changes were not saved');
    }
  }

  private async drainSpill(): Promise<void> {
    const s = this.spill!;
    const total = Math.max(0, this.size - s.base);
    for (let pos = 0; pos < total; ) {
      const buf = Buffer.allocUnsafe(Math.min(SPILL_CHUNK, total - pos));
      const { bytesRead } = await s.fd.read(buf, 0, buf.length, pos);
      if (bytesRead === 0) break;
      pos += bytesRead;
      // A short spill file (a trailing hole never written) still yields its full length below.
      if (!this.pushBody(bytesRead === buf.length ? buf : buf.subarray(0, bytesRead))) await this.demand();
    }
    const written = this.frontier - s.base;
    if (written < total) this.pushBody(Buffer.alloc(total - written));
  }

  private async dropSpill(): Promise<void> {
    const s = this.spill;
    if (!s) return;
    this.spill = undefined;
    await s.fd.close().catch(() => undefined);
    await rm(s.path, { force: true });
  }

  /** CLOSE of an unlinked file: the put is aborted (the driver drops its temp file); nothing to report. */
  private async discard(): Promise<undefined> {
    this.abort(new VfsError('NOT_FOUND', 'removed while open'));
    await this.put.catch(() => undefined);
    return undefined;
  }

  /** The session ended without CLOSE (or CLOSE failed): make the put fail so nothing is kept. */
  abort(reason: unknown = new VfsError('UPSTREAM', 'upload aborted: the SFTP session ended')): void {
    this.closing = true;
    if (!this.body.destroyed) this.body.destroy(reason instanceof Error ? reason : new Error(String(reason)));
    this.fail(reason);
    this.dropReorder(); // gives its share of the budget back
    if (!this.started) void this.dropSpill();
  }

  /** Wait until the put has settled and the spill file is gone (session teardown). */
  async settled(): Promise<void> {
    await this.put?.catch(() => undefined);
    await this.chain;
    await this.dropSpill();
  }
}

/**
 * A full DATA/tmp (or quota) while writing the spill file is NO_SPACE, which SFTP answers with its
 * message; as a plain errno error it was answered "internal error" and logged as a bug.
 */
function spillFailure(e: unknown): unknown {
  const code = (e as NodeJS.ErrnoException | undefined)?.code;
  return code === 'ENOSPC' || code === 'EDQUOT' ? new VfsError('NO_SPACE', 'no space left on the server for the temporary copy of this upload', { cause: e }) : e;
}

function rewriteRefused(): VfsError {
  return new VfsError('NOT_SUPPORTED', 'rewriting bytes already uploaded is not supported');
}
