/**
 * Task control over the real server: copy tasks hold their storages (a deleted destination fails
 * them instead of redirecting writes to the root storage), the *_task_threads_num settings bound
 * the running workers, cancel reaches through finished folder tasks, retry restarts the clock.
 */
import { existsSync } from 'node:fs';
import { mkdir, readdir, rm } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { TestServer } from './harness.js';
import { ok, putFile, startRestServer } from './fs-helpers.js';
import { addLocalStorage, countingStoreCalls, holdPutsOf, makeFiles, settle, tasksOf, until } from './tasks-helpers.js';
import type { TaskInfo } from '../src/tasks/types.js';

let ts: TestServer;
let admin: string;
let bRoot: string;

beforeAll(async () => {
  ts = await startRestServer();
  admin = await ts.login();
  bRoot = await addLocalStorage(ts, admin, '/b');
});
afterAll(async () => {
  await ts?.close();
  if (bRoot) await rm(bRoot, { recursive: true, force: true });
});

const copy = (src_dir: string, dst_dir: string, names: string[]) =>
  ts.api<{ tasks: TaskInfo[] } | null>('/api/fs/copy', { token: admin, body: { src_dir, dst_dir, names } });
const setting = async (key: string, value: string) => ok(await ts.api('/api/admin/setting/save', { token: admin, body: [{ key, value }] }));
const clear = async () => ok(await ts.api('/api/task/copy/clear_done', { token: admin, body: {} }));
const done = () => tasksOf(ts, admin, 'copy', 'done');

/** Poll the undone copies until at most `until` are left; the most seen running at once. */
async function maxRunning(untilLeft: number): Promise<number> {
  let max = 0;
  for (;;) {
    const undone = await tasksOf(ts, admin, 'copy', 'undone');
    max = Math.max(max, undone.filter((t) => t.state === 1).length);
    if (undone.length <= untilLeft) return max;
    await new Promise((res) => setTimeout(res, 2));
  }
}

describe('copy tasks hold their storages', () => {
  it('deleting the destination storage mid-copy fails the remaining tasks; nothing lands in the root storage', async () => {
    await setting('copy_task_threads_num', '1');
    await makeFiles(join(ts.dataDir, 'storage', 'tree'), 200);
    const r = await ts.api('/api/admin/storage/create', { token: admin, body: { mount_path: '/mem2', driver: 'Memory', addition: '{}' } });
    ok(r);
    const storages = await ts.api<{ content: Array<{ id: number; mount_path: string }> }>('/api/admin/storage/list', { token: admin });
    const mem = storages.data!.content.find((s) => s.mount_path === '/mem2')!;
    ok(await copy('/', '/mem2', ['tree']));
    await until('some files copied', async () => ((await done()).filter((d) => d.state === 2).length >= 6 ? true : undefined), 30_000, 5);
    ok(await ts.api(`/api/admin/storage/delete?id=${mem.id}`, { token: admin, body: {} }));
    const all = await settle(ts, admin, 'copy');
    expect(all).toHaveLength(201);
    const failed = all.filter((t) => t.state !== 2);
    expect(failed.every((t) => t.state === 7)).toBe(true);
    // All but perhaps the one copy running when the storage went fail with the storage's message.
    const gone = failed.filter((t) => t.error === 'destination storage [/mem2] was deleted or changed');
    expect(gone.length).toBeGreaterThan(150);
    expect(failed.length - gone.length).toBeLessThanOrEqual(1);
    expect(existsSync(join(ts.dataDir, 'storage', 'mem2'))).toBe(false);

    // Retry runs the task again from a fresh start time (AList resets it at each run).
    const one = gone[0]!;
    await new Promise((res) => setTimeout(res, 20));
    ok(await ts.api(`/api/task/copy/retry?tid=${one.id}`, { token: admin, body: {} }));
    await settle(ts, admin, 'copy');
    const again = (await done()).find((t) => t.id === one.id)!;
    expect(again.state).toBe(7);
    expect(Date.parse(again.start_time!)).toBeGreaterThan(Date.parse(one.start_time!));
    expect(existsSync(join(ts.dataDir, 'storage', 'mem2'))).toBe(false);
    await clear();
  });
});

describe('upload tasks hold their storage', () => {
  it('an As-Task upload queued when its storage is deleted fails instead of landing in the root storage', async () => {
    await setting('upload_task_threads_num', '1');
    ok(await ts.api('/api/admin/storage/create', { token: admin, body: { mount_path: '/mem3', driver: 'Memory', addition: '{}' } }));
    const storages = await ts.api<{ content: Array<{ id: number; mount_path: string }> }>('/api/admin/storage/list', { token: admin });
    const mem = storages.data!.content.find((s) => s.mount_path === '/mem3')!;
    // Hold the only upload worker with a first upload whose put waits for a gate.
    const hold = holdPutsOf(ts, '/held.txt');
    try {
      ok(await putFile(ts, admin, '/held.txt', 'first', { 'as-task': 'true' }));
      await until('the first upload to hold the worker', async () => (hold.held() ? true : undefined), 10_000, 5);
      const r = (await putFile(ts, admin, '/mem3/x.txt', 'second', { 'as-task': 'true' })) as { code: number; message: string; data: { task: TaskInfo } };
      ok(r);
      ok(await ts.api(`/api/admin/storage/delete?id=${mem.id}`, { token: admin, body: {} }));
      hold.release();
      const all = await settle(ts, admin, 'upload');
      expect(all.find((t) => t.id === r.data.task.id)).toMatchObject({ state: 7, error: 'destination storage [/mem3] was deleted or changed' });
      expect(existsSync(join(ts.dataDir, 'storage', 'mem3'))).toBe(false);
      expect(existsSync(join(ts.dataDir, 'storage', 'held.txt'))).toBe(true);
    } finally {
      hold.restore();
    }
  });
});

describe('copy_task_threads_num', () => {
  it('bounds the running copies and applies a change at once', async () => {
    await makeFiles(join(ts.dataDir, 'storage', 'many'), 300);
    await setting('copy_task_threads_num', '1');
    const r = await copy('/', '/b', ['many']);
    ok(r);
    const root = r.data!.tasks[0]!.id;
    await until('the folder task to spawn its files', async () => ((await done()).some((t) => t.id === root) ? true : undefined), 30_000, 5);
    expect(await maxRunning(220)).toBe(1);
    await setting('copy_task_threads_num', '3');
    // The raise applies at once: more than one copy runs (tiny files: a poll may miss the third).
    const raised = await maxRunning(60);
    expect(raised).toBeGreaterThan(1);
    expect(raised).toBeLessThanOrEqual(3);
    await settle(ts, admin, 'copy');
    expect((await done()).filter((t) => t.state !== 2)).toEqual([]);
    expect((await readdir(join(bRoot, 'many'))).length).toBe(300);
    await clear();
  });
});

describe('cancel', () => {
  it('cancelling the finished root of a nested folder copy cancels the queued files of its finished subfolders', async () => {
    await settle(ts, admin, 'copy');
    await clear();
    await setting('copy_task_threads_num', '1');
    for (let d = 0; d < 5; d++) await makeFiles(join(ts.dataDir, 'storage', 'nest', `d${d}`), 40);
    await mkdir(join(bRoot, 'nestcopy'));
    const r = await copy('/', '/b/nestcopy', ['nest']);
    ok(r);
    const root = r.data!.tasks[0]!.id;
    // One worker, FIFO: the root and its five folder tasks finish before the first file is copied.
    await until('folder tasks done and some files copied', async () => {
      const d = await done();
      return d.filter((t) => t.state === 2).length >= 10 ? true : undefined;
    }, 30_000, 5);
    expect((await done()).find((t) => t.id === root)?.state).toBe(2);
    ok(await ts.api(`/api/task/copy/cancel?tid=${root}`, { token: admin, body: {} }));
    const all = await settle(ts, admin, 'copy');
    expect(all).toHaveLength(206);
    const canceled = all.filter((t) => t.state === 4);
    expect(canceled.length).toBeGreaterThan(150);
    expect(canceled.every((t) => t.error === 'canceled')).toBe(true);
    let copied = 0;
    for (let d = 0; d < 5; d++) copied += (await readdir(join(bRoot, 'nestcopy', 'nest', `d${d}`))).length;
    expect(copied).toBe(206 - 6 - canceled.length);
    await clear();
  });
});

describe('clear_done', () => {
  it('removes the finished tasks with their store deletes issued together (one coalesced write, not one per task)', async () => {
    await setting('copy_task_threads_num', '4');
    await makeFiles(join(ts.dataDir, 'storage', 'clr'), 100);
    ok(await copy('/', '/b', ['clr']));
    expect(await settle(ts, admin, 'copy')).toHaveLength(101);
    const { calls, most } = await countingStoreCalls(ts, 'delete', clear);
    expect(await done()).toEqual([]);
    expect(calls).toBe(101);
    expect(most).toBe(101);
  });
});
