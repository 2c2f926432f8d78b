/**
 * An upload body that is already in memory, whole: a small upload whose bytes came in with its
 * headers (protocols/upload-body.ts). It is a Readable like any body, for drivers that stream it; a
 * driver that writes small files in one step (Local) takes `chunks` instead, skipping the stream's
 * event round trips, which were a tenth of the server's CPU per 1 KiB WebDAV PUT.
 *
 * A leaf of the core that drivers may import (test/architecture.test.ts).
 */
import { Readable } from 'node:stream';

export class WholeBody extends Readable {
  constructor(
    readonly chunks: readonly Buffer[],
    readonly size: number,
  ) {
    super();
  }

  override _read(): void {
    for (const c of this.chunks) this.push(c);
    this.push(null);
  }
}
