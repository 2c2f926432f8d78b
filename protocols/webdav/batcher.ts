/**
 * Coalesces the many small chunks a socket delivers (often 16-64 KiB) into ~1 MiB buffers, so an
 * upload becomes far fewer write calls downstream.
 */
import type { IncomingMessage } from 'node:http';
import { Transform, type Readable, type TransformCallback } from 'node:stream';

const BATCH = 1 << 20;

export class Batcher extends Transform {
  private parts: Buffer[] = [];
  private size = 0;

  constructor() {
    super({ readableHighWaterMark: 2 * BATCH, writableHighWaterMark: BATCH });
  }

  override _transform(chunk: Buffer, _enc: BufferEncoding, cb: TransformCallback): void {
    this.parts.push(chunk);
    this.size += chunk.length;
    if (this.size >= BATCH) this.emitBatch();
    cb();
  }

  override _flush(cb: TransformCallback): void {
    if (this.size) this.emitBatch();
    cb();
  }

  private emitBatch(): void {
    this.push(this.parts.length === 1 ? this.parts[0] : Buffer.concat(this.parts, this.size));
    this.parts = [];
    this.size = 0;
  }
}

/**
 * The body of an upload as the VFS should read it. A body known to fit in one batch gains nothing
 * from coalescing, so the request itself is handed over (one Transform less per small PUT). Either
 * way a client that goes away mid-body fails the stream, so the VFS removes its temp file.
 */
export function uploadBody(req: IncomingMessage, size: number | undefined): Readable {
  const body: Readable = size !== undefined && size <= BATCH ? req : req.pipe(new Batcher());
  if (body !== req) req.on('error', (err) => body.destroy(err));
  req.on('close', () => {
    if (!req.complete) body.destroy(new Error('client aborted the upload'));
  });
  return body;
}
