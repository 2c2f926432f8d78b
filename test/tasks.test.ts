/** Copy tasks across storages and the task API, over the real server (alist-compat §10, §11). */
import { join } from 'node:path';
import { mkdir, rm } from 'node:fs/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { TestServer } from './harness.js';
import { makeUser, ok, PERM, startRestServer } from './fs-helpers.js';
import { addLocalStorage, checksums, makeFiles, settle, tasksOf, until } from './tasks-helpers.js';
import type { TaskInfo } from '../src/tasks/types.js';

let ts: TestServer;
let admin: string;
let bRoot: string;
let srcHost: string;
let original: Record<string, string>;

beforeAll(async () => {
  ts = await startRestServer();
  admin = await ts.login();
  bRoot = await addLocalStorage(ts, admin, '/b');
  srcHost = join(ts.dataDir, 'storage', 'src');
  await makeFiles(srcHost, 200);
  original = await checksums(srcHost);
});
afterAll(async () => {
  await ts?.close();
  if (bRoot) await rm(bRoot, { recursive: true, force: true });
});

const copy = (token: string, src_dir: string, dst_dir: string, names: string[]) =>
  ts.api<{ tasks: TaskInfo[] } | null>('/api/fs/copy', { token, body: { src_dir, dst_dir, names } });

describe('copy tasks', () => {
  it('copies a folder of 200 files to another storage, answering {tasks} and ending with equal checksums', async () => {
    const r = await copy(admin, '/', '/b', ['src']);
    ok(r);
    expect(r.data!.tasks).toHaveLength(1);
    const t = r.data!.tasks[0]!;
    expect(t).toMatchObject({ name: 'copy [/](/src) to [/b](/)', state: 0, progress: 0, error: '', creator: 'admin', creator_role: 2 });
    expect(t.id).toMatch(/^[A-Za-z0-9_-]{21}$/);
    const done = await settle(ts, admin, 'copy');
    expect(done).toHaveLength(201);
    expect(done.filter((d) => d.state !== 2)).toEqual([]);
    const parent = done.find((d) => d.id === t.id)!;
    expect(parent.status).toBe('src object is dir, added all copy tasks of objs');
    expect(parent.progress).toBe(100);
    // Go's RFC3339Nano: the fraction without trailing zeros (none on a whole second), `Z` for UTC.
    expect(parent.end_time).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d*[1-9])?([+-]\d\d:\d\d|Z)$/);
    expect(await checksums(join(bRoot, 'src'))).toEqual(original);
    expect(await checksums(srcHost)).toEqual(original);
  });

  it('a synchronous copy inside one storage still answers data null', async () => {
    ok(await ts.api('/api/fs/mkdir', { token: admin, body: { path: '/same' } }));
    const r = await copy(admin, '/src', '/same', ['f000.txt']);
    expect(r).toEqual({ code: 200, message: 'success', data: null });
  });

  it('cancelling a folder copy halfway cancels its children and leaves the source intact; retry_some finishes it', async () => {
    await mkdir(join(bRoot, 'half'));
    ok(await ts.api('/api/task/copy/clear_done', { token: admin, body: {} }));
    const r = await copy(admin, '/', '/b/half', ['src']);
    const parent = r.data!.tasks[0]!.id;
    await until('some files copied', async () => {
      const n = (await tasksOf(ts, admin, 'copy', 'done')).filter((d) => d.state === 2 && d.id !== parent).length;
      return n >= 10 ? n : undefined;
    }, 30_000, 20);
    ok(await ts.api(`/api/task/copy/cancel?tid=${parent}`, { token: admin, body: {} }));
    const done = await settle(ts, admin, 'copy');
    const canceled = done.filter((d) => d.state === 4);
    const succeeded = done.filter((d) => d.state === 2 && d.id !== parent);
    expect(canceled.length).toBeGreaterThan(0);
    expect(succeeded.length).toBeGreaterThan(0);
    expect(canceled.every((d) => d.error === 'canceled')).toBe(true);
    expect(await checksums(srcHost)).toEqual(original);
    // Whatever arrived is complete (puts are atomic): each target file equals its source.
    const partial = await checksums(join(bRoot, 'half', 'src'));
    expect(Object.keys(partial).length).toBeLessThan(200);
    for (const [n, sum] of Object.entries(partial)) expect(sum).toBe(original[n]);

    const retry = await ts.api<Record<string, string>>('/api/task/copy/retry_some', { token: admin, body: [...canceled.map((d) => d.id), 'nope'] });
    expect(retry).toEqual({ code: 200, message: 'success', data: { nope: 'task not found' } });
    const after = await settle(ts, admin, 'copy');
    expect(after.filter((d) => d.state !== 2).map((d) => d.name)).toEqual([]);
    expect(await checksums(join(bRoot, 'half', 'src'))).toEqual(original);
  });
});

describe('task API', () => {
  it('info, 404 for unknown ids and other users\' tasks; users see only their own; admin sees all', async () => {
    const done = await tasksOf(ts, admin, 'copy', 'done');
    const id = done[0]!.id;
    const info = await ts.api<TaskInfo>(`/api/task/copy/info?tid=${id}`, { token: admin, body: {} });
    ok(info);
    expect(Object.keys(info.data!).sort()).toEqual(
      ['creator', 'creator_role', 'end_time', 'error', 'id', 'name', 'progress', 'start_time', 'state', 'status', 'total_bytes'].sort(),
    );
    expect(await ts.api(`/api/task/copy/info?tid=missing`, { token: admin, body: {} })).toEqual({ code: 404, message: 'task not found', data: null });

    const user = await makeUser(ts, admin, 'copier', PERM.COPY | PERM.WRITE);
    expect(await tasksOf(ts, user, 'copy', 'done')).toEqual([]);
    expect(await ts.api(`/api/task/copy/info?tid=${id}`, { token: user, body: {} })).toEqual({ code: 404, message: 'task not found', data: null });
    expect(await ts.api(`/api/task/copy/delete?tid=${id}`, { token: user, body: {} })).toMatchObject({ code: 404 });
    expect((await ts.api('/api/admin/task/copy/done', { token: user })).code).toBe(403);

    const r = await copy(user, '/src', '/b', ['f001.txt']);
    ok(r);
    const mine = r.data!.tasks[0]!;
    expect(mine.creator).toBe('copier');
    await settle(ts, user, 'copy');
    expect((await tasksOf(ts, user, 'copy', 'done')).map((t) => t.id)).toEqual([mine.id]);
    expect((await tasksOf(ts, admin, 'copy', 'done', true)).some((t) => t.id === mine.id)).toBe(true);
  });

  it('the *_some routes want a JSON array; clear_succeeded and delete remove tasks; empty lists are []', async () => {
    expect(await ts.api('/api/task/copy/cancel_some', { token: admin, body: { x: 1 } })).toEqual({ code: 400, message: 'invalid request format', data: null });
    expect(await ts.api('/api/task/copy/delete_some', { token: admin, body: ['zz'] })).toEqual({ code: 200, message: 'success', data: { zz: 'task not found' } });
    ok(await ts.api('/api/task/copy/clear_succeeded', { token: admin, body: {} }));
    expect(await tasksOf(ts, admin, 'copy', 'done')).toEqual([]);
    expect(await tasksOf(ts, admin, 'upload', 'undone')).toEqual([]);
    expect(await tasksOf(ts, admin, 'decompress', 'done')).toEqual([]);
  });
});
