/**
 * Reused memory for the WRITE packets of an SFTP channel.
 *
 * A client's 255 KiB WRITE arrives in several SSH packets, and ssh2 joins them into a new buffer
 * (SFTP.js push: Buffer.allocUnsafe(packet length)) whose tail is the WRITE's data. A new buffer per
 * WRITE made V8 mark the heap every ~64 MB uploaded. Measured on a 1 GiB put: the server's CPU went
 * from 3.1 s to 1.9 s when those buffers were reused.
 *
 * While ssh2 parses this channel's data, its big allocations are taken from this pool. A buffer
 * comes back only through release(), which the upload's driver calls once it has written the chunk
 * (PutArgs.release), and only when the released chunk is the whole data region of that buffer (it
 * starts within the header and ends at the packet's end): a chunk cut in two, or memory used for
 * anything else, is simply never returned and left to the GC, as before.
 *
 * ssh2 internals used: SFTPWrapper.push (checked; without it nothing changes). Verified against
 * ssh2 1.17.0.
 */
import type { SFTPWrapper } from 'ssh2';
import { allocatingFrom } from './alloc-from.js';
import { MAX_PACKET } from './openssh-ext.js';

/** Packets above this size are joined in pool memory (smaller ones are cheap, or not WRITEs). */
const MIN_POOLED = 64 * 1024;
/** Free buffers kept; more are allocated while uploads hold many (they are dropped on release then). */
const KEEP_FREE = 32;
/** A WRITE's header (id, handle of at most 256 bytes, offset, length) ends before this offset. */
const MAX_HEADER = 512;

export class WritePool {
  private readonly free: ArrayBuffer[] = [];
  /**
   * Lengths handed out, by buffer: a release must end exactly there. Weak: a buffer whose chunk is
   * never released (an upload spilled to disk, cut short, or refused) is the GC's, as the header
   * says; a Map held every such buffer until the channel closed (a whole spilled upload).
   */
  private out = new WeakMap<ArrayBuffer, number>();

  /** Route the channel's big allocations during ssh2's parse through the pool. */
  attach(sftp: SFTPWrapper): boolean {
    const s = sftp as unknown as { push?: (data: Buffer | null) => unknown };
    if (typeof s.push !== 'function') return false;
    const push = s.push;
    const pool = this;
    s.push = function (this: unknown, data: Buffer | null) {
      return allocatingFrom((n) => (n > MIN_POOLED && n <= MAX_PACKET ? pool.take(n) : undefined), () => push.call(this, data));
    };
    return true;
  }

  private take(n: number): Buffer {
    const ab = this.free.pop() ?? new ArrayBuffer(MAX_PACKET);
    this.out.set(ab, n);
    return Buffer.from(ab, 0, n);
  }

  /** A body chunk the driver is done with (PutArgs.release). */
  release = (chunk: Buffer): void => {
    const ab = chunk.buffer as ArrayBuffer;
    const n = this.out.get(ab);
    if (n === undefined || chunk.byteOffset >= MAX_HEADER || chunk.byteOffset + chunk.length !== n) return;
    this.out.delete(ab);
    if (this.free.length < KEEP_FREE) this.free.push(ab);
  };

  /** The channel is gone: buffers still out are left to the GC. */
  clear(): void {
    this.free.length = 0;
    this.out = new WeakMap();
  }
}
