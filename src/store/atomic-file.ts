/**
 * A lowdb adapter that writes JSON atomically: a temp file (mode 0600) in the same directory is
 * written and fsynced, then renamed over the target, then the directory is fsynced. A kill -9 at
 * any moment leaves either the old or the new complete file, never a torn one.
 */
import { open, readFile, rename, rm, stat, type FileHandle } from 'node:fs/promises';
import { dirname } from 'node:path';
import type { Adapter } from 'lowdb';

export class AtomicJsonFile<T> implements Adapter<T> {
  /** The exact text last read or written by this process, to tell our writes from others'. */
  lastText: string | undefined;
  private seq = 0;

  constructor(readonly file: string) {}

  /**
   * The parsed file, or null when it does not exist. When its text is `known` (the text the
   * caller holds already), null without parsing it: the store's watcher sees each of our own
   * writes, and parsing the whole store back each time is wasted work.
   */
  async read(known?: string): Promise<T | null> {
    let text: string;
    try {
      text = await readFile(this.file, 'utf8');
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code === 'ENOENT') return null;
      // Node's message for some codes (EISDIR) does not name the file.
      throw Object.assign(new Error(`${this.file}: cannot read it: ${(e as Error).message}`), { code: (e as NodeJS.ErrnoException).code });
    }
    this.lastText = text;
    if (text === known) return null;
    try {
      return JSON.parse(text) as T;
    } catch (e) {
      throw new Error(`${this.file} is not valid JSON (${(e as Error).message}); fix or restore the file`);
    }
  }

  async write(data: T): Promise<void> {
    const text = JSON.stringify(data, null, 1);
    const tmp = `${this.file}.${process.pid}.${++this.seq}.tmp`;
    const fh = await open(tmp, 'w', 0o600);
    try {
      try {
        await fh.writeFile(text, 'utf8');
        await fh.sync();
        await keepOwner(fh, this.file);
      } finally {
        await fh.close();
      }
      await rename(tmp, this.file);
    } catch (e) {
      // Whatever failed (ENOSPC or EIO while writing, or the rename), the temp file goes: it was
      // left behind by a failed write, a partial copy of the store each time, on a disk that was
      // full already (and a first start's config.json.<pid>.<n>.tmp was never removed by anything).
      await rm(tmp, { force: true }).catch(() => undefined); // the write's own error is the one to report
      throw e;
    }
    this.lastText = text;
    const dir = await open(dirname(this.file), 'r');
    try {
      await dir.sync();
    } finally {
      await dir.close();
    }
  }
}

/**
 * Written by root (`sudo treegate admin set` beside a service that runs as its own user), a file
 * keeps the owner of the one it replaces, and a new one takes its folder's: a root-owned 0600
 * store.json stopped the service from starting (EACCES), and the running server discarded a
 * root-owned request file as not its own. Best effort: a file system without owners keeps root's.
 */
async function keepOwner(fh: FileHandle, file: string): Promise<void> {
  if (process.getuid?.() !== 0) return;
  const st = await stat(file).catch(() => stat(dirname(file)));
  if (st.uid !== 0 || st.gid !== 0) await fh.chown(st.uid, st.gid).catch(() => undefined);
}
