/** Outside changes on a Local storage reach mount-table subscribers as virtual paths (what the index follows). */
import { mkdir, rename, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterEach, beforeEach, expect, it } from 'vitest';
import { TEMP_PREFIX } from '../../drivers/local/listing.js';
import { makeCore, storage, type TestCore } from '../vfs/testing.js';

let core: TestCore;
let root: string;

beforeEach(async () => {
  core = await makeCore();
  root = join(core.dir, 'disk');
  await mkdir(join(root, 'sub'), { recursive: true });
  await core.storages.create(storage('/local', 'Local', { addition: JSON.stringify({ root_folder_path: root }) }));
  await core.storages.create(storage('/skipped', 'Local', { addition: JSON.stringify({ root_folder_path: root }), disable_index: true }));
});
afterEach(() => core.cleanup());

it('reports files written on disk by their vpath, never upload temp files, and only for accepted mounts', async () => {
  const seen: string[] = [];
  const stop = core.mounts.watch((c) => seen.push(c.vpath), (m) => !m.record.disable_index);
  const target = join(root, 'sub', 'by hand.txt');
  const end = Date.now() + 15_000;
  // Rewritten until seen: the watcher may still be in its initial scan at the first write.
  while (!seen.includes('/local/sub/by hand.txt') && Date.now() < end) {
    await writeFile(join(root, 'sub', `${TEMP_PREFIX}abc`), 'partial');
    await writeFile(target, String(Date.now()));
    await new Promise((r) => setTimeout(r, 200));
  }
  stop();
  expect(seen).toContain('/local/sub/by hand.txt');
  expect(seen.some((p) => p.includes(TEMP_PREFIX))).toBe(false);
  expect(seen.some((p) => p.startsWith('/skipped'))).toBe(false);
});

it('follows folders made or moved in after the watch began, with what they already hold', async () => {
  const seen: string[] = [];
  const stop = core.mounts.watch((c) => seen.push(c.vpath), (m) => !m.record.disable_index);
  const end = Date.now() + 15_000;
  // Wait until the watch is up (its initial scan runs in the background).
  while (!seen.includes('/local/sub/probe.txt') && Date.now() < end) {
    await writeFile(join(root, 'sub', 'probe.txt'), String(Date.now()));
    await new Promise((r) => setTimeout(r, 100));
  }
  // Made elsewhere, then moved in whole: its contents never caused an event under the root.
  const outside = join(core.dir, 'outside');
  await mkdir(join(outside, 'deep'), { recursive: true });
  await writeFile(join(outside, 'deep', 'old.txt'), 'o');
  await rename(outside, join(root, 'moved'));
  await mkdir(join(root, 'made', 'inner'), { recursive: true });
  await writeFile(join(root, 'made', 'inner', 'new.txt'), 'n');
  const want = ['/local/moved', '/local/moved/deep/old.txt', '/local/made/inner/new.txt'];
  while (!want.every((p) => seen.includes(p)) && Date.now() < end) await new Promise((r) => setTimeout(r, 50));
  // Once watched, a later write deep inside is seen too.
  await writeFile(join(root, 'moved', 'deep', 'later.txt'), 'l');
  while (!seen.includes('/local/moved/deep/later.txt') && Date.now() < end) await new Promise((r) => setTimeout(r, 50));
  stop();
  expect(want.concat('/local/moved/deep/later.txt').filter((p) => !seen.includes(p))).toEqual([]);
});
