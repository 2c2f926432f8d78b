/**
 * A file opened for reading. Bytes come from the VFS's positional reader (vfs.openReader): pread on
 * local files, a stream kept open across sequential reads otherwise. Clients pipeline READs
 * (OpenSSH keeps 64 in flight, rclone sends them from several goroutines), so requests queue here
 * and are served one at a time, preferring the one that continues where the last read ended: a
 * slightly reordered burst does not reopen a remote stream for every packet.
 *
 * Each READ is read into a buffer of this handle's small pool and handed back with release() once
 * its DATA reply has been framed (the session does that at once), so a download reuses a few
 * buffers instead of allocating one per request: new buffers are what kept V8's GC busy.
 */
import type { AccessContext } from '../../src/auth/principal.js';
import type { PositionalReader } from '../../src/vfs/positional.js';
import type { Entry, VfsApi } from '../../src/vfs/types.js';
import { MAX_RW } from './openssh-ext.js';

interface ReadRequest {
  offset: number;
  length: number;
  resolve(b: Buffer | null): void;
  reject(e: unknown): void;
}

/** Free buffers kept per handle; more are made when a client holds more replies unreleased. */
const POOL = 4;

export class ReadHandle {
  readonly kind = 'read' as const;
  private readonly queue: ReadRequest[] = [];
  private readonly free: Buffer[] = [];
  /** Pool buffers handed out by read() and not yet released, by their memory. */
  private readonly out = new Map<ArrayBufferLike, Buffer>();
  private busy = false;
  private closed = false;
  /** READs the session took for this handle and has not answered yet (see closeAfterReads). */
  private reading = 0;
  private closing = false;
  private onClosed?: () => void;
  /** Where the last read ended (the offset a sequential client asks for next). */
  private pos = -1;

  private constructor(
    readonly path: string,
    readonly entry: Entry,
    private readonly reader: PositionalReader,
  ) {}

  /** Open `path` for reading (IS_A_DIR, NOT_FOUND, permission errors come from here). */
  static async open(vfs: VfsApi, ctx: AccessContext, path: string): Promise<ReadHandle> {
    const { entry, reader } = await vfs.openReader(ctx, path);
    return new ReadHandle(path, entry, reader);
  }

  /**
   * The bytes at [offset, offset+length) (fewer at the end of the file), or null at end of file
   * (SFTP EOF). Give the buffer back with release() once it has been sent.
   */
  read(offset: number, length: number): Promise<Buffer | null> {
    if (this.closed) return Promise.resolve(null);
    // Past the end there is nothing to read, but the EOF must not overtake READs queued before it:
    // pscp (PuTTY) reads ahead past the end and takes each reply as the next block in order, so an
    // EOF answered before the last short block made it stop with "Lost connection".
    if (offset >= this.entry.size && !this.busy && this.queue.length === 0) return Promise.resolve(null);
    return new Promise((resolve, reject) => {
      this.queue.push({ offset, length: Math.min(length, MAX_RW), resolve, reject });
      void this.pump();
    });
  }

  /** A buffer from read() that is no longer referenced (releasing it twice or a foreign one is a no-op). */
  release(b: Buffer): void {
    const whole = this.out.get(b.buffer);
    if (!whole) return;
    this.out.delete(b.buffer);
    if (!this.closed && this.free.length < POOL) this.free.push(whole);
  }

  private next(): ReadRequest {
    let best = 0;
    for (let i = 0; i < this.queue.length; i++) {
      const q = this.queue[i]!;
      if (q.offset === this.pos) {
        best = i;
        break;
      }
      if (q.offset < this.queue[best]!.offset) best = i;
    }
    return this.queue.splice(best, 1)[0]!;
  }

  private async pump(): Promise<void> {
    if (this.busy) return;
    this.busy = true;
    try {
      while (this.queue.length && !this.closed) {
        const req = this.next();
        if (req.offset >= this.entry.size) {
          req.resolve(null);
          continue;
        }
        // Sized to the request, not MAX_RW: a client reading a few bytes from each of its many
        // handles (a thumbnailer, sshfs) held 255 KiB per handle until CLOSE, 255 MiB per user.
        const spare = this.free.pop();
        const buf = spare && spare.length >= req.length ? spare : Buffer.allocUnsafeSlow(req.length);
        try {
          const n = await this.reader.read(buf, req.length, req.offset);
          this.pos = req.offset + n;
          if (n === 0) {
            this.free.push(buf);
            req.resolve(null);
          } else {
            this.out.set(buf.buffer, buf);
            req.resolve(buf.subarray(0, n));
          }
        } catch (e) {
          this.free.push(buf);
          req.reject(e);
        }
      }
    } finally {
      this.busy = false;
    }
  }

  /**
   * A READ arrived for this handle (call it before the READ waits for anything); the returned
   * function says it was answered. A CLOSE sent after the READ then lets it finish first.
   */
  begin(): () => void {
    this.reading++;
    return () => void (--this.reading === 0 && this.closing && this.close());
  }

  /**
   * CLOSE: the reader goes once the READs sent before the CLOSE are answered; resolves then.
   * Closing at once answered EOF to READs pipelined in front of the CLOSE (still waiting in the
   * reply gate or the queue), so a client saw a file cut short; OpenSSH's server answers them with
   * their bytes.
   */
  closeAfterReads(): Promise<void> {
    this.closing = true;
    if (this.reading === 0) this.close();
    return this.closed ? Promise.resolve() : new Promise((resolve) => (this.onClosed = resolve));
  }

  /** Release the reader; queued READs get EOF (the client has closed or vanished). */
  close(): void {
    if (this.closed) return;
    this.closed = true;
    this.free.length = 0;
    this.out.clear();
    for (const q of this.queue.splice(0)) q.resolve(null);
    void this.reader.close().catch(() => undefined);
    this.onClosed?.();
  }
}
