/** Outside changes on a Local storage reach mount-table subscribers as virtual paths (what the index follows). */
import { mkdir, writeFile } from 'node:fs/promises';
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
