/**
 * Task findings from an adversarial probe: the *_some routes report every id they could not act on
 * (`__proto__` too), a retried upload whose spooled body is gone says so, and an offline transfer
 * whose temp file is gone neither names the host path of DATA nor spends retries on it.
 */
import { afterAll, beforeAll, expect, it } from 'vitest';
import type { TestServer } from './harness.js';
import { ok, putFile, startRestServer } from './fs-helpers.js';
import { holdPutsOf, settle, until } from './tasks-helpers.js';
import { startFileServer, type FileServer } from './offline-helpers.js';
import { VfsError } from '../src/errors.js';
import type { TaskInfo } from '../src/tasks/types.js';

let ts: TestServer;
let admin: string;
let web: FileServer;
/** A URL segment too long for a host file name: the download's write fails with an fs error. */
const LONG = 'n'.repeat(300);

const setting = async (key: string, value: string) => ok(await ts.api('/api/admin/setting/save', { token: admin, body: [{ key, value }] }));

beforeAll(async () => {
  ts = await startRestServer();
  admin = await ts.login();
  web = await startFileServer({ '/file.bin': Buffer.from('hello offline'), [`/${LONG}`]: Buffer.from('long') });
});
afterAll(async () => {
  await web?.close();
  await ts?.close();
});

it('the *_some routes list every unknown id, __proto__ and constructor included', async () => {
  for (const route of ['cancel_some', 'delete_some', 'retry_some']) {
    const r = await ts.api<Record<string, string>>(`/api/task/copy/${route}`, { token: admin, body: ['__proto__', 'constructor', 'x'] });
    expect(r).toEqual({ code: 200, message: 'success', data: { ['__proto__']: 'task not found', constructor: 'task not found', x: 'task not found' } });
    expect(Object.keys(r.data!)).toEqual(['__proto__', 'constructor', 'x']);
  }
});

it('retrying an upload task cancelled while queued fails at once, saying the data is gone', async () => {
  await setting('upload_task_threads_num', '1');
  // Hold the only upload worker so that the second upload waits in the queue.
  const hold = holdPutsOf(ts, '/held.txt');
  try {
    ok(await putFile(ts, admin, '/held.txt', 'first', { 'as-task': 'true' }));
    await until('the first upload to hold the worker', async () => (hold.held() ? true : undefined), 10_000, 5);
    const r = (await putFile(ts, admin, '/queued.txt', 'second', { 'as-task': 'true' })) as { data: { task: TaskInfo } };
    const id = r.data.task.id;
    ok(await ts.api(`/api/task/upload/cancel?tid=${id}`, { token: admin, body: {} }));
    hold.release();
    expect((await settle(ts, admin, 'upload')).find((t) => t.id === id)).toMatchObject({ state: 4, error: 'canceled' });
    ok(await ts.api(`/api/task/upload/retry?tid=${id}`, { token: admin, body: {} }));
    expect((await settle(ts, admin, 'upload')).find((t) => t.id === id)).toMatchObject({ state: 7, error: 'the uploaded data is gone: upload the file again' });
  } finally {
    hold.restore();
  }
});

it('a transfer retried after delete_on_upload_failed removed its file fails at once without naming the host path', async () => {
  await setting('offline_download_allow_private', 'true');
  const vfs = ts.running.core.vfs;
  const put = vfs.put.bind(vfs);
  let failing = true;
  vfs.put = async (ctx, path, ...rest) => {
    if (failing && path === '/dl/file.bin') throw new VfsError('UPSTREAM', 'target refused');
    return put(ctx, path, ...rest);
  };
  try {
    const r = await ts.api<{ tasks: TaskInfo[] }>('/api/fs/add_offline_download', {
      token: admin, body: { urls: [`${web.url}/file.bin`], path: '/dl', tool: 'SimpleHttp', delete_policy: 'delete_on_upload_failed' },
    });
    ok(r);
    await settle(ts, admin, 'offline_download');
    const [transfer] = await settle(ts, admin, 'offline_download_transfer');
    expect(transfer).toMatchObject({ state: 7, error: 'target refused' });
    failing = false;
    ok(await ts.api(`/api/task/offline_download_transfer/retry?tid=${transfer!.id}`, { token: admin, body: {} }));
    const [again] = await settle(ts, admin, 'offline_download_transfer');
    const dl = r.data!.tasks[0]!.id;
    expect(again).toMatchObject({ id: transfer!.id, state: 7, error: `the downloaded file is gone: SimpleHttp/${dl}/file.bin` });
    expect(again!.error).not.toContain(ts.dataDir);
  } finally {
    vfs.put = put;
  }
});

it('a download failing on a host file error names its temp file relative to the temp folder, as task names do', async () => {
  await setting('offline_download_allow_private', 'true');
  const r = await ts.api<{ tasks: TaskInfo[] }>('/api/fs/add_offline_download', {
    token: admin, body: { urls: [`${web.url}/${LONG}`], path: '/dl', tool: 'SimpleHttp', delete_policy: 'delete_always' },
  });
  ok(r);
  const id = r.data!.tasks[0]!.id;
  const done = (await settle(ts, admin, 'offline_download')).find((t) => t.id === id)!;
  expect(done.state).toBe(7);
  expect(done.error).toContain(`'SimpleHttp/${id}/${LONG}'`);
  expect(done.error).not.toContain(ts.dataDir);
});
