/**
 * qBittorrent as an offline download tool, with a real qbittorrent-nox (4.5) on loopback. No
 * tracker or peer is needed: the torrent, served by a local HTTP server, names that same server as
 * its HTTP web seed (BEP 19), so libtorrent downloads the payload from it.
 */
import { randomBytes } from 'node:crypto';
import { readdir, readFile } from 'node:fs/promises';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { afterAll, beforeAll, expect, it } from 'vitest';
import type { TestServer } from './harness.js';
import { ok, startRestServer } from './fs-helpers.js';
import { settle, until } from './tasks-helpers.js';
import { startFileServer, startQbittorrent, webSeedTorrent, type FileServer, type Qbittorrent } from './offline-helpers.js';
import type { TaskInfo } from '../src/tasks/types.js';

let ts: TestServer;
let admin: string;
let web: FileServer;
let qbit: Qbittorrent | undefined;
let port = 0;
const payload = randomBytes(200 * 1024 + 123);
const slowPayload = randomBytes(50 * 1024);
const add = (urls: string[], path: string) =>
  ts.api<{ tasks: TaskInfo[] }>('/api/fs/add_offline_download', { token: admin, body: { urls, path, tool: 'qBittorrent', delete_policy: 'delete_always' } });
const setting = (key: string, value: string) => ts.api('/api/admin/setting/save', { token: admin, body: [{ key, value }] });
/** qBittorrent's torrents carrying a task's tag. */
const listed = (id: string) => qbit!.tagged(id);

beforeAll(async () => {
  web = await startFileServer({});
  // The torrent points at the web seed `<server>/ws/` + its name.
  const torrent = webSeedTorrent('payload.bin', payload, `${web.url}/ws/`);
  const slowTorrent = webSeedTorrent('slow.bin', slowPayload, `${web.url}/ws/`);
  qbit = await startQbittorrent();
  port = qbit.port;
  ts = await startRestServer();
  admin = await ts.login();
  web.server.removeAllListeners('request');
  web.server.on('request', (req, res) => {
    const path = (req.url ?? '/').split('?')[0]!;
    web.hits.push(path);
    if (path === '/t.torrent') return res.writeHead(200, { 'content-type': 'application/x-bittorrent' }).end(torrent);
    // Answers late, so that a task can be cancelled before qBittorrent lists the torrent.
    if (path === '/slow.torrent') return void setTimeout(() => res.writeHead(200, { 'content-type': 'application/x-bittorrent' }).end(slowTorrent), 1500);
    if (path === '/ws/slow.bin') return res.writeHead(200, { 'content-length': slowPayload.length }).end(slowPayload);
    if (path !== '/ws/payload.bin') return res.writeHead(404).end();
    const m = /^bytes=(\d+)-(\d*)$/.exec(req.headers.range ?? '');
    const start = m ? Number(m[1]) : 0;
    const end = m && m[2] ? Math.min(Number(m[2]), payload.length - 1) : payload.length - 1;
    res.writeHead(m ? 206 : 200, { 'content-length': end - start + 1, 'accept-ranges': 'bytes', ...(m ? { 'content-range': `bytes ${start}-${end}/${payload.length}` } : {}) });
    res.end(payload.subarray(start, end + 1));
  });
}, 60_000);

afterAll(async () => {
  await qbit?.stop();
  await web?.close();
  await ts?.close();
});

it('set_qbit answers ok and makes qBittorrent a ready tool', async () => {
  const r = await ts.api('/api/admin/setting/set_qbit', { token: admin, body: { url: `http://admin:adminadmin@127.0.0.1:${port}/`, seedtime: '0' } });
  expect(r).toEqual({ code: 200, message: 'success', data: 'ok' });
  expect((await ts.api<string[]>('/api/public/offline_download_tools')).data).toContain('qBittorrent');
});

it('refuses a magnet link whose tracker is on loopback while private addresses are off', async () => {
  const r = await add([`magnet:?xt=urn:btih:${'cd'.repeat(20)}&tr=${encodeURIComponent(`${web.url}/announce`)}`], '/mag');
  expect(r).toMatchObject({ code: 403, message: expect.stringMatching(/loopback, private or link-local/) });
  expect(web.hits).toEqual([]);
});

it('adds a torrent by URL, tags it, downloads it from its web seed, transfers it and removes it from qBittorrent', async () => {
  ok(await ts.api('/api/admin/setting/save', { token: admin, body: [{ key: 'offline_download_allow_private', value: 'true' }] }));
  const r = await ts.api<{ tasks: TaskInfo[] }>('/api/fs/add_offline_download', {
    token: admin, body: { urls: [`${web.url}/t.torrent`], path: '/bt', tool: 'qBittorrent', delete_policy: 'delete_always' },
  });
  ok(r);
  const id = r.data!.tasks[0]!.id;

  // While it runs, qBittorrent lists it under our tag with the task's temp folder as save path.
  const seen = await until('the torrent in qBittorrent', async () => {
    const l = await listed(id);
    if (l.length) return l;
    const t = (await ts.api<TaskInfo[]>('/api/task/offline_download/done', { token: admin })).data!;
    return t.length ? [] : undefined; // finished before we looked
  }, 30_000, 100);
  if (seen.length) expect(seen[0]!.save_path.replace(/\/$/, '')).toBe(join(ts.dataDir, 'temp', 'qBittorrent', id));

  const done = await settle(ts, admin, 'offline_download', 90_000);
  expect(done[0]).toMatchObject({ id, state: 2, error: '' });
  const transfers = await settle(ts, admin, 'offline_download_transfer');
  expect(transfers.map((t) => t.state)).toEqual([2]);
  expect((await readFile(join(ts.dataDir, 'storage', 'bt', 'payload.bin'))).equals(payload)).toBe(true);
  expect(web.hits).toContain('/ws/payload.bin');
  expect(await listed(id)).toEqual([]); // seedtime 0: removed right after completion
  expect(await readdir(join(ts.dataDir, 'temp', 'qBittorrent', id)).catch(() => 'gone')).toBe('gone'); // delete_always
});

it('fails a torrent larger than offline_download_max_size and deletes it from qBittorrent', async () => {
  ok(await setting('offline_download_max_size', '1000'));
  try {
    const r = await add([`${web.url}/t.torrent`], '/bt-big');
    ok(r);
    const id = r.data!.tasks[0]!.id;
    const done = (await settle(ts, admin, 'offline_download', 60_000)).find((t) => t.id === id)!;
    expect(done.state).toBe(7);
    expect(done.error).toMatch(/limit of 1000 bytes/);
    expect(await listed(id)).toEqual([]);
  } finally {
    ok(await setting('offline_download_max_size', '10737418240'));
  }
});

it('a download cancelled before qBittorrent lists its torrent: the torrent is deleted when it shows up', async () => {
  const r = await add([`${web.url}/slow.torrent`], '/bt-cancel');
  ok(r);
  const id = r.data!.tasks[0]!.id;
  await until('qBittorrent to ask for the torrent', async () => (web.hits.includes('/slow.torrent') ? true : undefined), 20_000, 50);
  ok(await ts.api(`/api/task/offline_download/cancel?tid=${id}`, { token: admin, body: {} }));
  expect((await settle(ts, admin, 'offline_download')).find((t) => t.id === id)!.state).toBe(4);
  await new Promise((res) => setTimeout(res, 4000)); // the torrent arrives 1.5 s after it was asked for
  await until('the orphan torrent to be deleted', async () => ((await listed(id)).length === 0 ? true : undefined), 10_000, 200);
  expect(await readdir(join(ts.dataDir, 'temp', 'qBittorrent', id)).catch(() => 'gone')).toBe('gone');
}, 30_000);

it('qbittorrent_url changed by a plain setting save: the session cookie of the old address never goes to the new one', async () => {
  const seen: string[] = [];
  const other = createServer((req, res) => {
    seen.push(`${req.url} ${req.headers.cookie ?? ''}`);
    res.writeHead(403).end('Forbidden');
  });
  await new Promise<void>((r) => other.listen(0, '127.0.0.1', r));
  try {
    ok(await ts.api('/api/admin/setting/set_qbit', { token: admin, body: { url: `http://admin:adminadmin@127.0.0.1:${port}/`, seedtime: '0' } }));
    ok(await setting('qbittorrent_url', `http://admin:adminadmin@127.0.0.1:${(other.address() as AddressInfo).port}/`));
    ok(await add([`${web.url}/t.torrent`], '/bt-moved'));
    await until('the new address asked', async () => (seen.length > 0 ? true : undefined), 20_000, 50);
    await settle(ts, admin, 'offline_download');
    expect(seen.filter((s) => s.includes('SID='))).toEqual([]);
  } finally {
    other.close();
    ok(await ts.api('/api/admin/setting/set_qbit', { token: admin, body: { url: `http://admin:adminadmin@127.0.0.1:${port}/`, seedtime: '0' } }));
  }
}, 60_000);
