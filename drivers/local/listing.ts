/**
 * Listing a host directory in linear time and bounded memory per entry: `opendir` streams the names,
 * a fixed pool of workers lstat them (so a 100,000-entry folder neither opens 100,000 handles at once
 * nor waits on them one by one), and the result is sorted byte-wise by name as AList does.
 */
import { lstat, opendir, realpath, stat } from 'node:fs/promises';
import type { Stats } from 'node:fs';
import * as nodePath from 'node:path';

export const LIST_CONCURRENCY = 64;
/** Upload temp files are never shown, whatever show_hidden says. */
export const TEMP_PREFIX = '.treegate-upload-';

export interface HostEntry {
  name: string;
  stats: Stats;
}

/**
 * Entries of `dir` with their stats. Symlinks are followed only when their target is inside the
 * root (`inside(real)`); escaping or dangling links are left out, so listings leak nothing outside.
 * Names a virtual path cannot carry (a backslash) are left out as well.
 */
export async function listHostDir(dir: string, showHidden: boolean, inside: (real: string) => boolean): Promise<HostEntry[]> {
  const names: string[] = [];
  const handle = await opendir(dir, { bufferSize: 256 });
  for await (const d of handle) {
    const n = d.name;
    if (n.startsWith(TEMP_PREFIX) || n.includes('\\')) continue;
    if (!showHidden && n.startsWith('.')) continue;
    names.push(n);
  }
  const out: Array<HostEntry | undefined> = new Array(names.length);
  let next = 0;
  const worker = async () => {
    while (next < names.length) {
      const i = next++;
      const full = nodePath.join(dir, names[i]!);
      try {
        let st = await lstat(full);
        if (st.isSymbolicLink()) {
          if (!inside(await realpath(full))) continue;
          st = await stat(full);
        }
        out[i] = { name: names[i]!, stats: st };
      } catch {
        // vanished between readdir and lstat, or a dangling link: not part of the listing
      }
    }
  };
  await Promise.all(Array.from({ length: Math.min(LIST_CONCURRENCY, names.length) }, worker));
  const entries = out.filter((e): e is HostEntry => e !== undefined);
  const keys = new Map(entries.map((e) => [e, Buffer.from(e.name)]));
  return entries.sort((a, b) => Buffer.compare(keys.get(a)!, keys.get(b)!));
}
