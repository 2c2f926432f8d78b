/**
 * A file opened for reading. Bytes come from vfs.read(range) streams: one stream is opened at the
 * requested offset and reused while READs continue where the last one ended; a seek reopens it.
 * Clients pipeline READs (OpenSSH keeps 64 in flight, rclone sends them from several goroutines),
 * so requests queue here and are served one at a time, preferring the one that continues the open
 * stream: a slightly reordered burst does not reopen the stream for every packet.
 */
import type { Readable } from 'node:stream';
import type { AccessContext } from '../../src/auth/principal.js';
import { isVfsError } from '../../src/errors.js';
import type { Entry, VfsApi } from '../../src/vfs/types.js';
import { MAX_RW } from './openssh-ext.js';

interface ReadRequest {
  offset: number;
  length: number;
  resolve(b: Buffer[] | null): void;
  reject(e: unknown): void;
}

/** Pulls exact byte counts out of a Readable (its chunks rarely match the client's READ sizes). */
class Cursor {
  private readonly it: AsyncIterator<Buffer>;
  private chunks: Buffer[] = [];
  private buffered = 0;
  private done = false;

  constructor(readonly stream: Readable, public pos: number) {
    this.it = stream[Symbol.asyncIterator]() as AsyncIterator<Buffer>;
  }

  /**
   * Up to n bytes as the stream's own chunks (views, not copies: the DATA reply is framed straight
   * from them); fewer only at the end of the stream, none after it.
   */
  async take(n: number): Promise<Buffer[]> {
    while (this.buffered < n && !this.done) {
      const r = await this.it.next();
      if (r.done) this.done = true;
      else {
        this.chunks.push(r.value);
        this.buffered += r.value.length;
      }
    }
    const out: Buffer[] = [];
    let want = Math.min(n, this.buffered);
    this.pos += want;
    this.buffered -= want;
    while (want > 0) {
      const c = this.chunks[0]!;
      if (c.length <= want) {
        out.push(c);
        this.chunks.shift();
        want -= c.length;
      } else {
        out.push(c.subarray(0, want));
        this.chunks[0] = c.subarray(want);
        want = 0;
      }
    }
    return out;
  }

  close(): void {
    // return() ends the iteration and destroys the stream, releasing its fd or socket.
    void this.it.return?.().catch(() => undefined);
    this.stream.destroy();
  }
}

export class ReadHandle {
  readonly kind = 'read' as const;
  private cursor?: Cursor;
  private readonly queue: ReadRequest[] = [];
  private busy = false;
  private closed = false;

  constructor(
    private readonly vfs: VfsApi,
    private readonly ctx: AccessContext,
    readonly path: string,
    readonly entry: Entry,
  ) {}

  /** The bytes at [offset, offset+length) as a list of chunks, or null at end of file (SFTP EOF). */
  read(offset: number, length: number): Promise<Buffer[] | null> {
    if (this.closed) return Promise.resolve(null);
    if (offset >= this.entry.size) return Promise.resolve(null);
    return new Promise((resolve, reject) => {
      this.queue.push({ offset, length: Math.min(length, MAX_RW), resolve, reject });
      void this.pump();
    });
  }

  private next(): ReadRequest {
    const pos = this.cursor?.pos;
    let best = 0;
    for (let i = 0; i < this.queue.length; i++) {
      const q = this.queue[i]!;
      if (q.offset === pos) {
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
        try {
          req.resolve(await this.serve(req));
        } catch (e) {
          this.dropCursor();
          req.reject(e);
        }
      }
    } finally {
      this.busy = false;
    }
  }

  private async serve(req: ReadRequest): Promise<Buffer[] | null> {
    if (!this.cursor || this.cursor.pos !== req.offset) {
      this.dropCursor();
      let r;
      try {
        r = await this.vfs.read(this.ctx, this.path, { start: req.offset });
      } catch (e) {
        // The file shrank below the offset since OPEN: that is end of file, not an error.
        if (isVfsError(e, 'INVALID')) return null;
        throw e;
      }
      this.cursor = new Cursor(r.stream, r.start);
      if (this.closed) this.dropCursor();
    }
    const data = this.cursor ? await this.cursor.take(req.length) : [];
    return data.length ? data : null;
  }

  private dropCursor(): void {
    this.cursor?.close();
    this.cursor = undefined;
  }

  /** Release the stream; queued READs get EOF (the client has closed or vanished). */
  close(): void {
    this.closed = true;
    for (const q of this.queue.splice(0)) q.resolve(null);
    this.dropCursor();
  }
}
