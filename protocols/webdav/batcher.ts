/**
 * Coalesces the many small chunks a socket delivers (often 16-64 KiB) into ~1 MiB buffers, so an
 * upload becomes far fewer write calls downstream.
 */
import { Transform, type TransformCallback } from 'node:stream';

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
