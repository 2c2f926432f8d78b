/**
 * Listing a host directory in linear time: one `readdir` for the names, then the entries are
 * lstat'ed *synchronously* in chunks of LIST_CHUNK, yielding to the event loop (setImmediate)
 * between chunks. A synchronous lstat of a cached inode costs about a microsecond, while each
 * promise-based one is a thread-pool round trip; measured on a 10,000-entry folder, a 64-worker async
 * pool took 0.45–0.9 s against ~50 ms for this. The chunking bounds how long other requests wait
 * (one chunk, typically well under a millisecond) however big the folder is. The result is sorted
 * byte-wise by name as AList does.
 */
import { lstatSync, realpathSync, rmSync, statSync, type Stats } from 'node:fs';
import { readdir } from 'node:fs/promises';
import * as nodePath from 'node:path';
import { setImmediate as yieldToLoop } from 'node:timers/promises';

/** Entries stat'ed per turn of the event loop. */
export const LIST_CHUNK = 512;

/** Upload temp files are never shown, whatever show_hidden says. */
export const TEMP_PREFIX = '.treegate-upload-';

/**
 * A temp file untouched for this long belongs to an upload whose process died (kill -9, power cut):
 * a live upload writes to its temp file continuously. Listings remove such leftovers as they pass.
 */
export const STALE_TEMP_MS = 60 * 60 * 1000;

function sweepIfStale(full: string): void {
  const st = lstatSync(full, { throwIfNoEntry: false });
  if (st?.isFile() && Date.now() - st.mtimeMs > STALE_TEMP_MS) rmSync(full, { force: true });
}

export interface HostEntry {
  name: string;
  stats: Stats;
}

/** UTF-16 order equals UTF-8 byte order unless a name holds a code unit at or above the surrogates. */
const ORDER_DIFFERS = /[\uD800-\uFFFF]/;

/** Sort names byte-wise (UTF-8), as AList does; plain string order when that is the same thing. */
export function sortByteWise<T extends { name: string }>(entries: T[]): T[] {
  if (!entries.some((e) => ORDER_DIFFERS.test(e.name))) return entries.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
  const keyed = entries.map((e) => ({ e, k: Buffer.from(e.name) }));
  keyed.sort((a, b) => Buffer.compare(a.k, b.k));
  return keyed.map((x) => x.e);
}

/**
 * Only files and folders are served. A FIFO would block the thread that opens it until some writer
 * came (four such downloads stall every file operation of the server), and devices or sockets are
 * no files to download either: they are left out of listings and are not found by path.
 */
export const isServed = (st: Stats): boolean => st.isFile() || st.isDirectory();

/**
 * The stats of one entry as listed, or undefined when it must not be listed. `loops(real)`: whether
 * a link to the real path `real` leads back to the listed folder or above it.
 */
function statEntry(full: string, inside: (real: string) => boolean, loops?: (real: string) => boolean): Stats | undefined {
  try {
    let st = lstatSync(full, { throwIfNoEntry: false }); // undefined: vanished between readdir and lstat
    if (st?.isSymbolicLink()) {
      // Links are followed only when their target is inside the root; escaping or dangling links
      // are left out, so listings leak nothing outside.
      const real = realpathSync.native(full);
      if (!inside(real)) return undefined;
      // A loop through the tree is left out too: every walk of the tree followed it (a copy task of
      // a folder holding two links to itself made 2^depth tasks, until the path failed with ELOOP).
      if (loops?.(real)) return undefined;
      st = statSync(full, { throwIfNoEntry: false });
    }
    return st && isServed(st) ? st : undefined;
  } catch {
    return undefined; // a dangling or looping link, or an entry we may not stat
  }
}

/**
 * Entries of `dir` with their stats. Symlinks are followed only when their target is inside the
 * root (`inside(real)`) and does not loop (`loops(real)`). Names a virtual path cannot carry (a
 * backslash) are left out as well.
 */
export async function listHostDir(dir: string, showHidden: boolean, inside: (real: string) => boolean, loops?: (real: string) => boolean): Promise<HostEntry[]> {
  const names = await readdir(dir);
  const prefix = dir.endsWith(nodePath.sep) ? dir : dir + nodePath.sep; // dir is a realpath: already clean
  const out: HostEntry[] = [];
  let since = 0;
  for (const n of names) {
    if (n.startsWith(TEMP_PREFIX)) {
      sweepIfStale(prefix + n);
      continue;
    }
    if (n.includes('\\')) continue;
    if (!showHidden && n.startsWith('.')) continue;
    if (++since > LIST_CHUNK) {
      since = 1;
      await yieldToLoop();
    }
    const stats = statEntry(prefix + n, inside, loops);
    if (stats) out.push({ name: n, stats });
  }
  return sortByteWise(out);
}
