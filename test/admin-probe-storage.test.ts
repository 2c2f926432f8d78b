/** Adversarial probe of /api/admin/storage/*: what a storage may serve, and wrongly typed fields. */
import { mkdirSync, symlinkSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { TestServer } from './harness.js';
import { expectCode, names, ok, startRestServer } from './fs-helpers.js';
import { tempFolders } from './temp-folders.js';

let ts: TestServer;
let admin: string;
type Storage = Record<string, unknown> & { id: number; status: string };

const post = <T = unknown>(path: string, body: unknown = {}) => ts.api<T>(path, { token: admin, body });
const local = (mount_path: string, root: string) =>
  post<{ id: number }>('/api/admin/storage/create', { mount_path, driver: 'Local', addition: JSON.stringify({ root_folder_path: root }) });
const getStorage = async (id: number) => (await ts.api<Storage>(`/api/admin/storage/get?id=${id}`, { token: admin })).data!;

beforeAll(async () => {
  ts = await startRestServer();
  admin = await ts.login();
});
const temp = tempFolders();
const tempDir = temp.make;
afterAll(async () => {
  await ts?.close();
  temp.removeAll();
});

describe('a Local storage never serves the data directory', () => {
  it('refuses DATA itself, a symlink to it, a folder above it and its key folder; the store stays unreachable', async () => {
    const link = join(tempDir('tg-probe-link-'), 'data');
    symlinkSync(ts.dataDir, link);
    mkdirSync(join(ts.dataDir, 'ssh'), { recursive: true });
    const roots = [ts.dataDir, `${ts.dataDir}/`, link, dirname(ts.dataDir), '/', join(ts.dataDir, 'ssh')];
    for (const [i, root] of roots.entries()) {
      const r = await local(`/leak${i}`, root);
      expectCode(r, 500, `failed init storage but storage is already created: failed init storage: root folder ${root} would serve treegate's data directory`);
      expect((await getStorage((r.data as { id: number }).id)).status).not.toBe('work');
      for (const p of [`/leak${i}/store.json`, `/leak${i}/config.json`, `/leak${i}/${ts.dataDir.split('/').pop()}/store.json`]) {
        expect((await ts.api('/api/fs/get', { token: admin, body: { path: p } })).code, p).not.toBe(200);
      }
    }
  });

  it('still serves a folder of its own inside DATA (as the first-start storage does)', async () => {
    mkdirSync(join(ts.dataDir, 'files'));
    ok(await local('/files', join(ts.dataDir, 'files')));
    expect(await names(ts, admin, '/files')).toEqual([]);
  });

  it('an update pointing an existing storage at DATA takes it out of service', async () => {
    const root = tempDir('tg-probe-root-');
    const { id } = (await local('/moving', root)).data!;
    const s = await getStorage(id);
    const r = await post('/api/admin/storage/update', { ...s, addition: JSON.stringify({ root_folder_path: ts.dataDir }) });
    expectCode(r, 500, `failed init storage: root folder ${ts.dataDir} would serve treegate's data directory`);
    expect((await ts.api('/api/fs/get', { token: admin, body: { path: '/moving/store.json' } })).code).not.toBe(200);
  });
});

describe('wrongly typed booleans are refused, never read as false', () => {
  it('storage create and update: 400 and nothing changes', async () => {
    const count = async () => (await ts.api<{ total: number }>('/api/admin/storage/list', { token: admin })).data!.total;
    const before = await count();
    for (const bad of [{ disabled: 'yes' }, { enable_sign: 2 }, { web_proxy: {} }, { disable_index: 'on' }]) {
      const r = await post('/api/admin/storage/create', { mount_path: '/typed-bool', driver: 'Memory', ...bad });
      expectCode(r, 400, `invalid request: ${Object.keys(bad)[0]} must be a boolean`);
    }
    expect(await count()).toBe(before);
    const { id } = (await post<{ id: number }>('/api/admin/storage/create', { mount_path: '/typed-ok', driver: 'Memory', disabled: false, enable_sign: true })).data!;
    const s = await getStorage(id);
    expect(s).toMatchObject({ disabled: false, enable_sign: true });
    expectCode(await post('/api/admin/storage/update', { ...s, disabled: 'yes', remark: 'changed' }), 400, 'invalid request: disabled must be a boolean');
    expect(await getStorage(id)).toMatchObject({ disabled: false, remark: '' });
  });
});

describe('addition', () => {
  it('an addition object nested too deeply is 400, not an internal error, and creates nothing', async () => {
    const depth = 20_000;
    const body = `{"mount_path":"/deep","driver":"Memory","addition":${'{"a":'.repeat(depth)}1${'}'.repeat(depth)}}`;
    const r = await ts.api('/api/admin/storage/create', { token: admin, body, headers: { 'content-type': 'application/json' } });
    expectCode(r, 400, 'invalid request: addition is nested too deeply');
    expect((await ts.api('/api/fs/get', { token: admin, body: { path: '/deep' } })).code).not.toBe(200);
  });
});
