/** As-Task uploads (spec §3, alist-compat §10): the reply carries the task, a worker does the put. */
import { readdir, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, beforeAll, expect, it } from 'vitest';
import type { TestServer } from './harness.js';
import { ok, putFile, startRestServer } from './fs-helpers.js';
import { settle } from './tasks-helpers.js';
import type { TaskInfo } from '../src/tasks/types.js';

let ts: TestServer;
let admin: string;

beforeAll(async () => {
  ts = await startRestServer();
  admin = await ts.login();
});
afterAll(async () => ts?.close());

it('PUT /api/fs/put with As-Task answers the task in its initial state and the file arrives', async () => {
  const body = Buffer.from('hello task upload');
  const r = (await putFile(ts, admin, '/up/a.txt', body, { 'as-task': 'true' })) as { code: number; message: string; data: { task: TaskInfo } };
  ok(r);
  expect(r.data.task).toMatchObject({ name: 'upload a.txt to [/](/up)', state: 0, status: 'uploading', progress: 0, error: '', total_bytes: body.length });
  expect(r.data.task.id).toMatch(/^[\w-]{21}$/);
  const done = await settle(ts, admin, 'upload');
  expect(done.map((t) => [t.id, t.state, t.progress])).toEqual([[r.data.task.id, 2, 100]]);
  expect(await readFile(join(ts.dataDir, 'storage', 'up', 'a.txt'), 'utf8')).toBe('hello task upload');
  expect(await readdir(join(ts.dataDir, 'temp', 'upload'))).toEqual([]); // the spool file is gone
});

it('PUT /api/fs/form with As-Task works the same', async () => {
  const form = new FormData();
  form.set('file', new Blob(['form body']), 'b.txt');
  const res = await fetch(ts.url + '/api/fs/form', {
    method: 'PUT', headers: { authorization: admin, 'file-path': encodeURIComponent('/up/b.txt'), 'as-task': 'true' }, body: form,
  });
  const r = (await res.json()) as { code: number; message: string; data: { task: TaskInfo } };
  ok(r);
  expect(r.data.task).toMatchObject({ state: 0, status: 'uploading', name: 'upload b.txt to [/](/up)' });
  await settle(ts, admin, 'upload');
  expect(await readFile(join(ts.dataDir, 'storage', 'up', 'b.txt'), 'utf8')).toBe('form body');
});

it('refuses an existing target with Overwrite: false before accepting the task', async () => {
  const r = await putFile(ts, admin, '/up/a.txt', 'again', { 'as-task': 'true', overwrite: 'false' });
  expect(r).toMatchObject({ code: 403, message: 'file exists' });
});
