/**
 * Task API review (alist-compat §10, §11), over the real server: the batch routes' bad bodies answer
 * as the spec says; retry, retry_failed and delete_some write their tasks together (as cancel and
 * clear_done do); a copy into a folder no storage serves is refused; and, with no storage at `/`, a
 * copy losing its destination storage fails at once naming it.
 */
import { rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { TestServer } from './harness.js';
import { ok, startRestServer } from './fs-helpers.js';
import { addLocalStorage, countingStoreCalls, makeFiles, settle, tasksOf, until } from './tasks-helpers.js';
import type { TaskInfo } from '../src/tasks/types.js';

let ts: TestServer;
let admin: string;
let bRoot: string;
let cRoot: string;

beforeAll(async () => {
  ts = await startRestServer();
  admin = await ts.login();
  bRoot = await addLocalStorage(ts, admin, '/b');
  cRoot = await addLocalStorage(ts, admin, '/c');
});
afterAll(async () => {
  await ts?.close();
  if (bRoot) await rm(bRoot, { recursive: true, force: true });
  if (cRoot) await rm(cRoot, { recursive: true, force: true });
});

const copy = (src_dir: string, dst_dir: string, names: string[]) =>
  ts.api<{ tasks: TaskInfo[] } | null>('/api/fs/copy', { token: admin, body: { src_dir, dst_dir, names } });
const setting = async (key: string, value: string) => ok(await ts.api('/api/admin/setting/save', { token: admin, body: [{ key, value }] }));

describe('batch routes', () => {
  it('an empty JSON body is 400 `invalid request format`, as any other body that is not an array of ids (was `EOF`)', async () => {
    for (const route of ['cancel_some', 'delete_some', 'retry_some']) {
      const res = await fetch(`${ts.url}/api/task/copy/${route}`, { method: 'POST', headers: { authorization: admin, 'content-type': 'application/json' }, body: '' });
      expect(await res.json()).toEqual({ code: 400, message: 'invalid request format', data: null });
    }
  });
});

describe('retry', () => {
  it('retrying a cancelled folder copy issues its tasks\' writes together (was one awaited write per file)', async () => {
    await setting('copy_task_threads_num', '1');
    await makeFiles(join(ts.dataDir, 'storage', 'big'), 300);
    const r = await copy('/', '/b', ['big']);
    ok(r);
    const root = r.data!.tasks[0]!.id;
    await until('the folder task to spawn its files', async () => ((await tasksOf(ts, admin, 'copy', 'done')).some((t) => t.id === root) ? true : undefined), 30_000, 5);
    ok(await ts.api(`/api/task/copy/cancel?tid=${root}`, { token: admin, body: {} }));
    const canceled = (await settle(ts, admin, 'copy')).filter((t) => t.state === 4);
    expect(canceled.length).toBeGreaterThan(200);

    const { most } = await countingStoreCalls(ts, 'put', async () => ok(await ts.api(`/api/task/copy/retry?tid=${root}`, { token: admin, body: {} })));
    // Every cancelled file goes back to waiting_retry in one go: their writes are in flight together.
    expect(most).toBeGreaterThanOrEqual(canceled.length);
    const after = await settle(ts, admin, 'copy');
    expect(after.filter((t) => t.state !== 2)).toEqual([]);
    expect(after).toHaveLength(301);
  });
});

describe('delete_some', () => {
  it('deletes the tasks it is given together (was one awaited store delete per id)', async () => {
    const ids = (await settle(ts, admin, 'copy')).map((t) => t.id);
    expect(ids.length).toBeGreaterThan(200);
    const { most } = await countingStoreCalls(ts, 'delete', async () => {
      const r = await ts.api('/api/task/copy/delete_some', { token: admin, body: [...ids, 'nope'] });
      expect(r).toEqual({ code: 200, message: 'success', data: { nope: 'task not found' } });
    });
    expect(await tasksOf(ts, admin, 'copy', 'done')).toEqual([]);
    expect(most).toBe(ids.length);
  });
});

describe('fs/copy into a folder no storage serves', () => {
  it('is refused at once, as a deeper such folder is, not answered with a copy task bound to fail', async () => {
    await writeFile(join(cRoot, 'f.txt'), 'hello');
    // No storage at `/`: the root is only the folder that shows the mounts.
    const storages = await ts.api<{ content: { id: number; mount_path: string }[] }>('/api/admin/storage/list', { token: admin });
    const root = storages.data!.content.find((s) => s.mount_path === '/')!;
    ok(await ts.api(`/api/admin/storage/delete?id=${root.id}`, { token: admin, body: {} }));
    ok(await ts.api('/api/task/copy/clear_done', { token: admin, body: {} }));
    const deeper = await copy('/c', '/nowhere', ['f.txt']);
    expect(deeper).toEqual({ code: 500, message: 'object not found', data: null });
    expect(await copy('/c', '/', ['f.txt'])).toEqual(deeper);
    expect(await tasksOf(ts, admin, 'copy', 'undone')).toEqual([]);
    expect(await tasksOf(ts, admin, 'copy', 'done')).toEqual([]);
  });
});

describe('a copy losing its destination storage, with no storage at `/`', () => {
  let dRoot = '';
  let failed: TaskInfo[] = [];
  afterAll(async () => {
    if (dRoot) await rm(dRoot, { recursive: true, force: true });
  });

  it('fails the queued files at once, naming the storage (was waiting_retry, then `object not found`)', async () => {
    dRoot = await addLocalStorage(ts, admin, '/d');
    await makeFiles(join(cRoot, 'many'), 300);
    ok(await ts.api('/api/task/copy/clear_done', { token: admin, body: {} }));
    const r = await copy('/c', '/d', ['many']);
    ok(r);
    const root = r.data!.tasks[0]!.id;
    await until('the folder task to spawn its files', async () => ((await tasksOf(ts, admin, 'copy', 'done')).some((t) => t.id === root) ? true : undefined), 30_000, 5);
    // The root storage went in the test above: once /d goes too, nothing serves its paths.
    const storages = await ts.api<{ content: { id: number; mount_path: string }[] }>('/api/admin/storage/list', { token: admin });
    expect(storages.data!.content.some((s) => s.mount_path === '/')).toBe(false);
    ok(await ts.api(`/api/admin/storage/delete?id=${storages.data!.content.find((s) => s.mount_path === '/d')!.id}`, { token: admin, body: {} }));
    failed = (await settle(ts, admin, 'copy')).filter((t) => t.state === 7);
    expect(failed.length).toBeGreaterThan(200);
    expect(new Set(failed.map((t) => t.error))).toEqual(new Set(['destination storage [/d] was deleted or changed']));
  });

  it('retry_failed requeues the failed tasks together (was one awaited write per task)', async () => {
    expect(failed.length).toBeGreaterThan(200);
    const { most } = await countingStoreCalls(ts, 'put', async () => ok(await ts.api('/api/task/copy/retry_failed', { token: admin, body: {} })));
    expect(most).toBeGreaterThanOrEqual(failed.length);
    // Retried, they fail again: their storage is still gone.
    expect((await settle(ts, admin, 'copy')).filter((t) => t.state === 7)).toHaveLength(failed.length);
  });
});
