/**
 * Random-access reads of a file into the caller's buffers (vfs.openReader), for protocols that ask
 * for bytes by offset (SFTP READ). A local file is read with pread on one descriptor: no stream, no
 * new buffer per chunk (new buffers are what made V8 collect garbage for a third of a transfer's CPU,
 * see file-copy.ts). Any other link is read from a stream opened at the offset asked for and kept
 * while reads continue where the last one ended, so a sequential download is one upstream request.
 */
import { fstatSync, type Stats } from 'node:fs';
import { open, type FileHandle } from 'node:fs/promises';
import type { Readable } from 'node:stream';
import { toVfsError } from '../errors.js';
import type { StorageLease } from '../../drivers/types.js';

export interface PositionalReader {
  /** Read up to `length` bytes at `position` into `buf` (from its start); 0 at or past the end. */
  read(buf: Buffer, length: number, position: number): Promise<number>;
  /** Release the descriptor or stream. Reads after close return 0. */
  close(): Promise<void>;
}

/**
 * `reader` while `lease` holds: each read checks it first, and is refused (STORAGE_UNAVAILABLE) once
 * its storage is withdrawn (MountTable.serves). The reader is closed at the withdrawal itself, not at
 * the next read: its descriptor, stream and hold on the old instance are given back, so an idle SFTP
 * handle no longer keeps a removed storage's driver (a remote one's connections) alive until the
 * client closes it. A read under way at that moment finishes first.
 */
export function checkedReader(reader: PositionalReader, lease: StorageLease): PositionalReader {
  let reading = 0;
  let withdrawn = false;
  let closed = false;
  const closeIfIdle = () => {
    if (!withdrawn || reading > 0 || closed) return;
    closed = true;
    void reader.close().catch(() => undefined);
  };
  const off = lease.onWithdrawn(() => {
    withdrawn = true;
    closeIfIdle();
  });
  return {
    async read(buf, length, position) {
      try {
        lease.check();
      } catch (e) {
        withdrawn = true;
        closeIfIdle();
        throw e;
      }
      reading++;
      try {
        return await reader.read(buf, length, position);
      } finally {
        reading--;
        closeIfIdle();
      }
    },
    close: () => {
      off();
      return reader.close();
    },
  };
}

/** pread on a host file, opened on the first read. */
export function fileReader(path: string): PositionalReader {
  return handleReader(() => open(path, 'r'), undefined);
}

/**
 * pread on a host file opened now, with the stats of what was opened. A reader opened by path at its
 * first read would see whatever an upload renamed over the path in between (an SFTP client OPENs,
 * then READs a round trip later), cut at the size the OPEN answered: neither file.
 */
export async function openFileReader(path: string): Promise<{ reader: PositionalReader; stats: Stats }> {
  const fh = await open(path, 'r');
  try {
    return { reader: handleReader(() => Promise.resolve(fh), Promise.resolve(fh)), stats: fstatSync(fh.fd) };
  } catch (e) {
    await fh.close();
    throw e;
  }
}

function handleReader(opener: () => Promise<FileHandle>, opened: Promise<FileHandle> | undefined): PositionalReader {
  let fh = opened;
  let closed = false;
  return {
    async read(buf, length, position) {
      if (closed) return 0;
      const { bytesRead } = await (await (fh ??= opener())).read(buf, 0, Math.min(length, buf.length), position);
      return bytesRead;
    },
    async close() {
      closed = true;
      const h = fh;
      fh = undefined;
      await (await h?.catch(() => undefined))?.close();
    },
  };
}

/** A stream's bytes pulled in exact amounts, starting at absolute offset `pos`. */
class Cursor {
  private readonly it: AsyncIterator<Buffer>;
  private chunk: Buffer | undefined;
  private done = false;

  constructor(readonly stream: Readable, public pos: number) {
    this.it = stream[Symbol.asyncIterator]() as AsyncIterator<Buffer>;
  }

  /** Copy up to `length` bytes into `buf`; fewer only at the end of the stream. */
  async take(buf: Buffer, length: number): Promise<number> {
    let n = 0;
    while (n < length) {
      if (!this.chunk?.length) {
        if (this.done) break;
        const r = await this.it.next();
        if (r.done) {
          this.done = true;
          break;
        }
        this.chunk = r.value;
      }
      const take = Math.min(length - n, this.chunk.length);
      this.chunk.copy(buf, n, 0, take);
      this.chunk = this.chunk.subarray(take);
      n += take;
    }
    this.pos += n;
    return n;
  }

  close(): void {
    void this.it.return?.().catch(() => undefined); // ends the iteration, destroying the stream
    this.stream.destroy();
  }
}

/**
 * Reads through streams from `openAt(position)` (undefined when the position is past the end).
 * Reads must not overlap in time (callers serve one at a time, as SFTP's read handle does).
 * `onClose` runs once, at the first close.
 */
export function streamReader(openAt: (position: number) => Promise<Readable | undefined>, onClose?: () => void): PositionalReader {
  let cursor: Cursor | undefined;
  let closed = false;
  const drop = () => {
    cursor?.close();
    cursor = undefined;
  };
  return {
    async read(buf, length, position) {
      if (closed) return 0;
      if (cursor?.pos !== position) {
        drop();
        const stream = await openAt(position);
        if (!stream) return 0;
        if (closed) {
          stream.destroy();
          return 0;
        }
        cursor = new Cursor(stream, position);
      }
      try {
        return await cursor.take(buf, Math.min(length, buf.length));
      } catch (e) {
        drop();
        // A driver's stream that breaks mid-body (its server went away: a bare ECONNRESET) is a
        // backend failure: SFTP answered it "internal error" and logged it as a bug of ours.
        throw toVfsError(e, 'UPSTREAM');
      }
    },
    async close() {
      const first = !closed;
      closed = true;
      drop();
      if (first) onClose?.();
    },
  };
}
