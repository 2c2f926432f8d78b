/**
 * Offline downloads hold their target storage (as copy and upload tasks do): one deleted while the
 * download runs fails the transfer instead of landing the file in the storage that serves the path
 * now (the root storage). A qBittorrent that cannot be reached is named with the reason.
 */
import { existsSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import { join } from 'node:path';
import { afterAll, beforeAll, expect, it } from 'vitest';
import type { TestServer } from './harness.js';
import { ok, startRestServer } from './fs-helpers.js';
import { settle, until } from './tasks-helpers.js';
import { freePort } from './offline-helpers.js';
import type { TaskInfo } from '../src/tasks/types.js';

let ts: TestServer;
let admin: string;
let web: Server | undefined;

beforeAll(async () => {
  ts = await startRestServer();
  admin = await ts.login();
  ok(await ts.api('/api/admin/setting/save', { token: admin, body: [{ key: 'offline_download_allow_private', value: 'true' }] }));
});
afterAll(async () => {
  web?.closeAllConnections();
  web?.close();
  await ts?.close();
});

it('the target storage deleted during the download: the transfer fails and nothing lands in the root storage', async () => {
  ok(await ts.api('/api/admin/storage/create', { token: admin, body: { mount_path: '/mem', driver: 'Memory', addition: '{}' } }));
  const storages = await ts.api<{ content: Array<{ id: number; mount_path: string }> }>('/api/admin/storage/list', { token: admin });
  const mem = storages.data!.content.find((s) => s.mount_path === '/mem')!;
  // The file server answers once the storage is gone.
  let release!: () => void;
  const gate = new Promise<void>((r) => (release = r));
  let asked = false;
  web = createServer((_req, res) => {
    asked = true;
    void gate.then(() => res.writeHead(200, { 'content-length': 2 }).end('hi'));
  });
  await new Promise<void>((r) => web!.listen(0, '127.0.0.1', r));
  const url = `http://127.0.0.1:${(web.address() as { port: number }).port}/f.txt`;
  try {
    const r = await ts.api<{ tasks: TaskInfo[] }>('/api/fs/add_offline_download', {
      token: admin, body: { urls: [url], path: '/mem/in', tool: 'SimpleHttp', delete_policy: 'delete_always' },
    });
    ok(r);
    await until('the download to start', async () => (asked ? true : undefined));
    ok(await ts.api(`/api/admin/storage/delete?id=${mem.id}`, { token: admin, body: {} }));
  } finally {
    release();
  }
  await settle(ts, admin, 'offline_download');
  const transfers = await settle(ts, admin, 'offline_download_transfer');
  expect(transfers.map((t) => [t.state, t.error])).toEqual([[7, 'destination storage [/mem] was deleted or changed']]);
  expect(existsSync(join(ts.dataDir, 'storage', 'mem'))).toBe(false);
});

it('a qBittorrent that cannot be reached: the error says why, as aria2\'s does (was only "fetch failed")', async () => {
  const port = await freePort();
  expect(await ts.api('/api/admin/setting/set_qbit', { token: admin, body: { url: `http://admin:x@127.0.0.1:${port}/`, seedtime: '0' } })).toMatchObject({ code: 500 });
  const r = await ts.api('/api/fs/add_offline_download', { token: admin, body: { urls: ['http://example.com/x'], path: '/dl', tool: 'qBittorrent' } });
  expect(r).toEqual({ code: 500, message: `failed init tool qBittorrent: fetch failed: connect ECONNREFUSED 127.0.0.1:${port}`, data: null });
});
