/**
 * A first start interrupted (kill -9, power cut, systemd restart) must not leave a half-made store:
 * first start is decided by "no users yet", so a store holding the admin but not the guest or the
 * storage at `/` was never completed by any later start (the server then served an empty tree).
 * Every state the first start writes to disk, as seen right after each of its writes is
 * acknowledged, must hold all three records or none.
 */
import { readFileSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pino from 'pino';
import { afterEach, expect, it } from 'vitest';
import { firstStart } from '../src/bootstrap.js';
import { JsonStore } from '../src/store/json-store.js';

const dirs: string[] = [];
afterEach(async () => {
  for (const d of dirs.splice(0)) await rm(d, { recursive: true, force: true });
});

it('first start writes admin, guest and the storage at / in one write (a kill leaves all or none)', async () => {
  const dir = await mkdtemp(join(tmpdir(), 'treegate-ops-first-'));
  dirs.push(dir);
  const file = join(dir, 'store.json');
  const store = await JsonStore.open(file);
  // What a kill -9 right after each acknowledged write would leave on disk.
  const onDisk: Array<{ users: string[]; mounts: string[] }> = [];
  const snapshot = () => {
    const d = JSON.parse(readFileSync(file, 'utf8')) as { users: Array<{ username: string }>; storages: Array<{ mount_path: string }> };
    onDisk.push({ users: d.users.map((u) => u.username), mounts: d.storages.map((s) => s.mount_path) });
  };
  for (const repo of [store.users, store.storages] as Array<{ insert: (r: never) => Promise<unknown> }>) {
    const insert = repo.insert.bind(repo);
    repo.insert = async (r: never) => {
      const out = await insert(r);
      snapshot();
      return out;
    };
  }
  await firstStart(store, dir, pino({ level: 'silent' }), { TREEGATE_ADMIN_PASSWORD: 'first-start-pw' });
  await store.close();
  expect(onDisk.length).toBeGreaterThan(0);
  for (const s of onDisk) expect(s).toEqual({ users: ['admin', 'guest'], mounts: ['/'] });
});
