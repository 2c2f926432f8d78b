/**
 * Storage lifecycle review, second pass: edits of a storage through the admin API must take effect
 * for what comes next, mirrors (the search index) included.
 */
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestServer, type TestServer } from './harness.js';
import { ok } from './fs-helpers.js';
import { addLocalStorage, until } from './tasks-helpers.js';

let ts: TestServer;
let admin: string;

beforeAll(async () => {
  ts = await startTestServer();
  admin = await ts.login();
});
afterAll(async () => ts?.close());

type StorageRow = Record<string, unknown> & { id: number; mount_path: string };

async function storageAt(mount: string): Promise<StorageRow> {
  const r = await ts.api<{ content: StorageRow[] }>('/api/admin/storage/list', { token: admin });
  ok(r);
  return r.data!.content.find((s) => s.mount_path === mount)!;
}

async function found(keywords: string): Promise<string[]> {
  const r = await ts.api<{ content: Array<{ parent: string; name: string }> }>('/api/fs/search', {
    token: admin, body: { parent: '/', keywords, scope: 0, page: 1, per_page: 100 },
  });
  ok(r);
  return r.data!.content.map((h) => `${h.parent}/${h.name}`);
}

const built = () => until('the index job', async () => ((await ts.api<{ is_done: boolean }>('/api/admin/index/progress', { token: admin })).data?.is_done ? true : undefined), 30_000, 50);

describe('disable_index changed by an update', () => {
  it('turned on, the storage leaves the search index at once; turned off, it is indexed again', async () => {
    ok(await ts.api('/api/admin/setting/save', { token: admin, body: [{ key: 'search_index', value: 'database' }] }));
    const root = await addLocalStorage(ts, admin, '/ix');
    await writeFile(join(root, 'zq needle.txt'), 'x');
    ok(await ts.api('/api/admin/index/build', { token: admin, body: {} }));
    await built();
    expect(await found('zq needle')).toEqual(['/ix/zq needle.txt']);

    const s = await storageAt('/ix');
    ok(await ts.api('/api/admin/storage/update', { token: admin, body: { ...s, disable_index: true } }));
    // Kept, its files went on being found until an admin rebuilt the whole index.
    expect(await found('zq needle')).toEqual([]);

    ok(await ts.api('/api/admin/storage/update', { token: admin, body: { ...s, disable_index: false } }));
    await built();
    expect(await until('the storage indexed again', async () => ((await found('zq needle')).length ? await found('zq needle') : undefined), 15_000, 100))
      .toEqual(['/ix/zq needle.txt']);
  });
});

describe('enable of a storage whose init fails', () => {
  it("answers AList's `failed load storage: failed init storage: <err>`; the storage stays enabled with the error as status", async () => {
    const missing = join(ts.dataDir, 'no-such-folder');
    const r = await ts.api<{ id: number }>('/api/admin/storage/create', {
      token: admin, body: { mount_path: '/broken', driver: 'Local', disabled: true, addition: JSON.stringify({ root_folder_path: missing }) },
    });
    ok(r);
    const id = r.data!.id;
    const en = await ts.api(`/api/admin/storage/enable?id=${id}`, { token: admin, method: 'POST' });
    expect(en.code).toBe(500);
    // It said `failed init storage: …`, the text AList's update gives, not its enable's.
    expect(en.message).toBe(`failed load storage: failed init storage: root folder ${missing} not exists`);
    const got = await ts.api<StorageRow>(`/api/admin/storage/get?id=${id}`, { token: admin });
    ok(got);
    expect(got.data!.disabled).toBe(false);
    expect(got.data!.status).toBe(`root folder ${missing} not exists`);
  });
});
