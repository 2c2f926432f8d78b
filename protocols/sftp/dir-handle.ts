/**
 * A folder opened with OPENDIR: one vfs.list snapshot (hidden entries already removed by the VFS),
 * handed out in READDIR batches. OpenSSH's server sends 100 names per batch; bigger batches mean
 * fewer round trips for large folders while staying far below the 256 KiB packet limit.
 */
import type { FileEntry } from 'ssh2';
import type { Entry } from '../../src/vfs/types.js';
import { fileEntryOf } from './attrs.js';
import { MAX_RW } from './openssh-ext.js';

const BATCH_ENTRIES = 512;
const BATCH_BYTES = 128 * 1024;
/**
 * No NAME reply may pass the clients' packet limit (256 KiB): OpenSSH's sftp drops the session on
 * one ("Received message too long"), so a folder holding a name of ~128 KiB (a Memory storage has no
 * name limit) could never be listed. A name that cannot fit a reply even alone is left out.
 */
const REPLY_BYTES = MAX_RW;

export class DirHandle {
  readonly kind = 'dir' as const;
  private pos = 0;

  constructor(readonly path: string, private readonly entries: Entry[]) {}

  /** Entries held (handles.ts MAX_DIR_ENTRIES_PER_USER). */
  get size(): number {
    return this.entries.length;
  }

  /** The next batch of `ls -l` style names, or null when all were sent (SFTP EOF). */
  next(owner: string, now = Date.now()): FileEntry[] | null {
    if (this.pos >= this.entries.length) return null;
    const batch: FileEntry[] = [];
    let bytes = 0;
    while (this.pos < this.entries.length && batch.length < BATCH_ENTRIES && bytes < BATCH_BYTES) {
      const fe = fileEntryOf(this.entries[this.pos]!, owner, now);
      const size = 64 + Buffer.byteLength(fe.filename) + Buffer.byteLength(fe.longname);
      if (bytes + size > REPLY_BYTES && batch.length) break; // it starts the next batch
      this.pos++;
      if (size > REPLY_BYTES) continue;
      bytes += size;
      batch.push(fe);
    }
    return batch.length ? batch : this.next(owner, now);
  }
}
