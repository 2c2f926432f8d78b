/**
 * Copying a span of a host file into a Writable (an HTTP response) with a few reused buffers.
 *
 * Why not `pipeline(createReadStream(...), res)`: a read stream allocates a new buffer for every
 * chunk, and V8 counts those as external memory; every ~64 MB of them it starts a full mark of the
 * heap, whose cost grows with the heap (treegate's is tens of MB). Measured on a 1 GiB GET: GC took
 * 2/3 of the server's CPU at times, three times the CPU of a bare server doing the same pipeline.
 * Here each buffer is reused once the write that carried it has called back, which for a socket
 * means the kernel has the bytes.
 *
 * HTTP responses on plain TCP skip the buffers: sendfile(2) when the native addon is built
 * (socket-sendfile.ts).
 *
 * Only for destinations whose write callback means "done with this chunk" (sockets, HTTP
 * responses): a Transform or PassThrough may still hold the chunk after calling back.
 */
import { fstatSync } from 'node:fs';
import { open, type FileHandle } from 'node:fs/promises';
import type { ServerResponse } from 'node:http';
import type { Writable } from 'node:stream';
import { finished } from 'node:stream/promises';
import { VfsError } from '../errors.js';
import { FILE_HIGH_WATER_MARK } from './link.js';
import { prematureClose, sendfileBody, sendfileSocket } from './socket-sendfile.js';

/** Buffers in flight per copy: enough to keep the socket busy while the next read runs. */
const SLOTS = 3;

/** What the caller announced (headers are out) about the file: its size and modification time. */
export interface Expected {
  size: number;
  modified: Date;
}

/**
 * Write bytes [start, end] of the file at `path` into `dest`, then end it; on failure `dest` is
 * destroyed (as pipeline does). With `expect`, the file opened must be the one the caller described:
 * an upload may have renamed another file over the path since it was looked up, and its first bytes
 * under the old Content-Length would pass for the whole file. Such a body is cut instead.
 */
export async function copyFileSpan(path: string, start: number, end: number, dest: Writable, signal?: AbortSignal, expect?: Expected): Promise<void> {
  const fh = await open(path, 'r');
  try {
    if (expect) {
      const st = fstatSync(fh.fd);
      if (st.size !== expect.size || st.mtime.getTime() !== expect.modified.getTime()) {
        throw new VfsError('UPSTREAM', 'the file changed while it was being read');
      }
    }
    const socket = sendfileSocket(dest);
    // An HTTP response on plain TCP: the kernel copies the file to the socket (socket-sendfile.ts).
    if (socket) await sendfileBody(dest as ServerResponse, socket, fh.fd, start, end - start + 1, signal);
    else await copyThroughBuffers(fh, start, end, dest, signal);
  } catch (e) {
    dest.destroy(); // the head may be out already: a cut body is the only honest answer left
    throw e;
  } finally {
    await fh.close();
  }
}

async function copyThroughBuffers(fh: FileHandle, start: number, end: number, dest: Writable, signal?: AbortSignal): Promise<void> {
  // Rejects as soon as the destination closes or fails: a write callback or 'drain' that will
  // never come must not leave the copy waiting.
  let unlisten = () => {};
  const stopped = new Promise<never>((_, reject) => {
    const onClose = () => reject(prematureClose());
    dest.once('close', onClose);
    dest.once('error', reject);
    unlisten = () => (dest.off('close', onClose), dest.off('error', reject));
  });
  stopped.catch(() => undefined);
  try {
    const bufs: Buffer[] = [];
    const writes: Array<Promise<void> | undefined> = [];
    for (let pos = start, i = 0; pos <= end; i = (i + 1) % SLOTS) {
      signal?.throwIfAborted();
      await Promise.race([writes[i], stopped]); // the write that last carried bufs[i] is done with it
      const buf = (bufs[i] ??= Buffer.allocUnsafeSlow(Math.min(FILE_HIGH_WATER_MARK, end - start + 1)));
      const { bytesRead } = await fh.read(buf, 0, Math.min(buf.length, end - pos + 1), pos);
      if (bytesRead === 0) throw new Error('file shrank while being read');
      pos += bytesRead;
      if (dest.destroyed) throw prematureClose();
      let ok = true;
      writes[i] = new Promise<void>((resolve, reject) => {
        ok = dest.write(bytesRead === buf.length ? buf : buf.subarray(0, bytesRead), (err) => (err ? reject(err) : resolve()));
      });
      writes[i]!.catch(() => undefined); // a failed write also closes dest: `stopped` reports it
      if (!ok) await Promise.race([new Promise((resolve) => dest.once('drain', resolve)), stopped]);
    }
    await Promise.race([Promise.all(writes), stopped]);
    unlisten();
    dest.end();
    await finished(dest);
  } finally {
    unlisten();
  }
}
