/**
 * DATA on a disk that fills up (a NAS's system volume, years of logs): a write that fails must not
 * leave its temp file behind. A failed store write left `store.json.<pid>.<n>.tmp` (a partial copy
 * of the store, each time, on the full disk), a first start left `config.json.<pid>.<n>.tmp`, and
 * a refused owner claim `server.pid.<pid>.<uuid>.tmp`, which nothing ever removed.
 * The data dir on a read-only file system, and a store file that is a folder, are refused with
 * messages that say what is wrong with which path. Runs on a small tmpfs (root, like
 * test/disk-full.test.ts).
 */
import { spawnSync } from 'node:child_process';
import { mkdir, readdir, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, beforeAll, afterEach, expect, it } from 'vitest';
import { loadConfig } from '../src/config.js';
import { JsonStore } from '../src/store/json-store.js';
import { CLI, cliEnv } from './clients/process.js';
import { smallDisk, type SmallDisk } from './small-disk.js';

let sd: SmallDisk | undefined;
let disk: string;

beforeAll(async () => {
  sd = await smallDisk('256k', 'treegate-ops-full-');
  ({ disk } = sd);
});

afterEach(async () => {
  for (const n of await readdir(disk)) await rm(join(disk, n), { recursive: true, force: true });
});

afterAll(async () => {
  await sd?.remove();
});

/** Fill the disk to the last byte. */
async function fill(): Promise<void> {
  await writeFile(join(disk, 'filler'), Buffer.alloc(512 << 10)).catch((e: NodeJS.ErrnoException) => {
    if (e.code !== 'ENOSPC') throw e;
  });
}

const temps = async (dir: string) => (await readdir(dir)).filter((n) => n.endsWith('.tmp'));

it('a store write that fails for space leaves no temp file, and the next one works once there is room', async () => {
  const data = join(disk, 'data');
  await mkdir(data);
  const store = await JsonStore.open(join(data, 'store.json'), { owner: true });
  await fill();
  await expect(store.kv.set('ns', 'k', 'x'.repeat(8192))).rejects.toThrow(/ENOSPC/);
  expect(await temps(data)).toEqual([]);
  await rm(join(disk, 'filler'));
  await store.kv.set('ns', 'k', 'y');
  await store.close();
  expect(await temps(data)).toEqual([]);
});

it('an owner claim that fails for space leaves no temp file', async () => {
  const data = join(disk, 'data');
  await mkdir(data);
  await fill();
  await expect(JsonStore.open(join(data, 'store.json'), { owner: true })).rejects.toThrow(/ENOSPC/);
  expect(await temps(data)).toEqual([]);
});

it('a first start on a full disk exits 1 and leaves no temp file', async () => {
  await fill();
  const data = join(disk, 'data');
  const r = spawnSync(process.execPath, [CLI, 'server', '--data', data], { env: cliEnv(), encoding: 'utf8', timeout: 20_000 });
  expect(r.status).toBe(1);
  expect(r.stderr).toMatch(/config\.json .*cannot write it: ENOSPC/);
  expect(await temps(data)).toEqual([]);
});

it('a data dir on a read-only file system is refused saying what could not be done to it', async () => {
  const data = join(disk, 'data');
  await mkdir(data, { mode: 0o755 });
  const remount = (mode: 'ro' | 'rw') => spawnSync('mount', ['-o', `remount,${mode}`, disk], { encoding: 'utf8' });
  expect(remount('ro').status).toBe(0);
  try {
    await expect(loadConfig({ data }, {})).rejects.toThrow(`data dir ${data} (from --data): cannot make it private (mode 0700): `);
  } finally {
    expect(remount('rw').status).toBe(0);
  }
});

it('a store file that is not a file is refused naming it', async () => {
  const data = join(disk, 'data');
  await mkdir(join(data, 'store.json'), { recursive: true });
  await expect(JsonStore.open(join(data, 'store.json'))).rejects.toThrow(`${join(data, 'store.json')}: cannot read it: EISDIR`);
});
