/**
 * Offline downloads fed hostile content, with a real qbittorrent-nox (libtorrent 2.0) on loopback:
 * torrents carrying BEP 47 symbolic links, which libtorrent creates in the task's temp folder. The
 * transfer into the storage must never follow one: not out of the download (libtorrent's check of
 * a link's target is lexical, so a link created below another link points elsewhere than it
 * checked), not into a folder of its own (copied over and over), not onto another of its files.
 * And a torrent of empty files (nothing against offline_download_max_size) made a transfer task
 * for each of them, without bound.
 */
import { randomBytes } from 'node:crypto';
import { lstat, readdir, readFile } from 'node:fs/promises';
import { createServer, type Server } from 'node:http';
import { join } from 'node:path';
import { afterAll, beforeAll, expect, it } from 'vitest';
import type { TestServer } from './harness.js';
import { ok, startRestServer } from './fs-helpers.js';
import { settle, until } from './tasks-helpers.js';
import { multiFileTorrent, startQbittorrent, type Qbittorrent, type TorrentEntry } from './offline-helpers.js';
import { MAX_DOWNLOAD_ENTRIES } from '../src/tasks/offline/offline.js';
import type { TaskInfo } from '../src/tasks/types.js';

let ts: TestServer;
let admin: string;
let qbit: Qbittorrent | undefined;
let web: Server;
let base = '';
/** Served paths: the .torrent files and their web seeds' files. */
const served = new Map<string, Buffer>();

const storage = (p: string) => join(ts.dataDir, 'storage', p);
const exists = (p: string) => lstat(p).then(() => true, () => false);

/** Serve a multi-file torrent at /<name>.torrent, its files from the web seed /ws/<name>/... */
function serveTorrent(name: string, entries: TorrentEntry[]): string {
  for (const e of entries) if (e.data) served.set(`/ws/${name}/${e.path.join('/')}`, e.data);
  served.set(`/${name}.torrent`, multiFileTorrent(name, entries, `${base}/ws/`));
  return `${base}/${name}.torrent`;
}

/** Download `url` with qBittorrent into `dst`; the download task and its transfers once all ended. */
async function download(url: string, dst: string): Promise<{ done: TaskInfo; transfers: TaskInfo[] }> {
  const r = await ts.api<{ tasks: TaskInfo[] }>('/api/fs/add_offline_download', {
    token: admin, body: { urls: [url], path: dst, tool: 'qBittorrent', delete_policy: 'delete_always' },
  });
  ok(r);
  const id = r.data!.tasks[0]!.id;
  const done = (await settle(ts, admin, 'offline_download', 90_000)).find((t) => t.id === id)!;
  const transfers = (await settle(ts, admin, 'offline_download_transfer', 120_000)).filter((t) => t.name.includes(`qBittorrent/${id}/`));
  return { done, transfers };
}

/** Every file (not folder) below a host folder, as sorted relative paths. */
async function filesBelow(dir: string): Promise<string[]> {
  const out: string[] = [];
  for (const p of await readdir(dir, { recursive: true })) if (!(await lstat(join(dir, p))).isDirectory()) out.push(p);
  return out.sort();
}

beforeAll(async () => {
  ts = await startRestServer();
  admin = await ts.login();
  web = createServer((req, res) => {
    const pth = decodeURIComponent((req.url ?? '/').split('?')[0]!);
    const body = served.get(pth) ?? (pth.startsWith('/ws/N/') ? served.get('/ws/N/ok.bin') : undefined); // see the names test
    if (!body) return res.writeHead(404).end();
    const m = /^bytes=(\d+)-(\d*)$/.exec(req.headers.range ?? '');
    const start = m ? Number(m[1]) : 0;
    const end = m && m[2] ? Math.min(Number(m[2]), body.length - 1) : body.length - 1;
    res.writeHead(m ? 206 : 200, { 'content-length': end - start + 1, 'accept-ranges': 'bytes', ...(m ? { 'content-range': `bytes ${start}-${end}/${body.length}` } : {}) });
    res.end(body.subarray(start, end + 1));
  });
  await new Promise<void>((r) => web.listen(0, '127.0.0.1', r));
  base = `http://127.0.0.1:${(web.address() as { port: number }).port}`;
  qbit = await startQbittorrent();
  ok(await ts.api('/api/admin/setting/save', { token: admin, body: [{ key: 'offline_download_allow_private', value: 'true' }] }));
  ok(await ts.api('/api/admin/setting/set_qbit', { token: admin, body: { url: `http://admin:adminadmin@127.0.0.1:${qbit.port}/`, seedtime: '0' } }));
}, 60_000);

afterAll(async () => {
  await qbit?.stop();
  web?.close();
  await ts?.close();
});

it('a link created below a folder link reaches the data folder: it is not transferred, the rest lands', async () => {
  const real = randomBytes(1000);
  // libtorrent accepts each link: `b` points at the torrent's folder `sub`, and `leak` at the
  // torrent's own (empty) store.json, written as a relative path from where `leak` is named, six
  // folders below the torrent. Its parent `b/c` is created through `b`, in sub/c, two folders
  // below: the six `..` climb past the torrent, its task folder, qBittorrent/ and temp/ to DATA.
  const dirs = ['x1', 'x2', 'x3', 'x4'];
  const url = serveTorrent('T', [
    { path: ['real.bin'], data: real },
    { path: ['store.json'] },
    { path: ['sub', 'keep'] }, // an empty file: sub exists before b is created
    { path: [...dirs, 'keep'] },
    { path: [...dirs, 'b'], symlink: ['sub'] },
    { path: [...dirs, 'b', 'c', 'keep'] },
    { path: [...dirs, 'b', 'c', 'leak'], symlink: ['store.json'] },
  ]);
  const { done, transfers } = await download(url, '/leak');
  expect(done).toMatchObject({ state: 2, error: '' });

  // The torrent's own files land; the data folder's store.json (password hashes) does not.
  const secret = await readFile(join(ts.dataDir, 'store.json'));
  const landed = await filesBelow(storage('leak'));
  for (const f of landed) expect((await readFile(storage(join('leak', f)))).equals(secret), f).toBe(false);
  expect(landed).toEqual(['T/real.bin', 'T/store.json', 'T/sub/c/keep', 'T/sub/keep', 'T/x1/x2/x3/x4/keep']);
  expect((await readFile(storage('leak/T/real.bin'))).equals(real)).toBe(true);
  expect(await readFile(storage('leak/T/store.json'), 'utf8')).toBe('');
  // Each link's transfer failed and says why, with no host path.
  const refused = transfers.filter((t) => t.state !== 2);
  expect(refused.map((t) => t.error).sort()).toEqual([
    `not transferred: qBittorrent/${done.id}/T/sub/c/leak is a symbolic link`,
    `not transferred: qBittorrent/${done.id}/T/x1/x2/x3/x4/b is a symbolic link`,
  ]);
  // delete_always: the links went with the rest of the temp folder.
  expect(await exists(join(ts.dataDir, 'temp', 'qBittorrent', done.id))).toBe(false);
}, 180_000);

it('a link to the torrent\'s own folder or to another of its files is not transferred: no loop, no copies', async () => {
  const a = randomBytes(700);
  const b = randomBytes(300);
  // sub/up points at `dir`, which points at sub: followed, sub/up/up/up/... to the kernel's limit.
  const url = serveTorrent('L', [
    { path: ['a.bin'], data: a },
    { path: ['sub', 'b.bin'], data: b },
    { path: ['sub', 'keep'] },
    { path: ['dir'], symlink: ['sub'] },
    { path: ['sub', 'up'], symlink: ['dir'] },
    { path: ['copy.bin'], symlink: ['a.bin'] },
  ]);
  const { done, transfers } = await download(url, '/loop');
  expect(done).toMatchObject({ state: 2, error: '' });
  expect(await filesBelow(storage('loop'))).toEqual(['L/a.bin', 'L/sub/b.bin', 'L/sub/keep']);
  expect(await exists(storage('loop/L/sub/up'))).toBe(false);
  expect((await readFile(storage('loop/L/sub/b.bin'))).equals(b)).toBe(true);
  expect(transfers.filter((t) => t.state !== 2).map((t) => t.error.replace(`qBittorrent/${done.id}/`, '')).sort()).toEqual([
    'not transferred: L/copy.bin is a symbolic link',
    'not transferred: L/dir is a symbolic link',
    'not transferred: L/sub/up is a symbolic link',
  ]);
}, 180_000);

it('a torrent of more than MAX_DOWNLOAD_ENTRIES empty files fails clearly, without a transfer task, and leaves nothing behind', async () => {
  const real = randomBytes(100);
  const entries: TorrentEntry[] = [{ path: ['real.bin'], data: real }];
  for (let i = 0; i < MAX_DOWNLOAD_ENTRIES; i++) entries.push({ path: ['d', `f${i}`] });
  const url = serveTorrent('E', entries); // some 300 kB
  const r = await ts.api<{ tasks: TaskInfo[] }>('/api/fs/add_offline_download', {
    token: admin, body: { urls: [url], path: '/many', tool: 'qBittorrent', delete_policy: 'delete_on_upload_succeed' },
  });
  ok(r);
  const id = r.data!.tasks[0]!.id;
  // Its state, not settle(): without the bound the download waits for its 10,000 transfers.
  const done = await until('the download to end', async () =>
    (await ts.api<TaskInfo[]>('/api/task/offline_download/done', { token: admin })).data!.find((t) => t.id === id), 120_000, 200);
  expect(done).toMatchObject({ state: 7, error: `the download holds more than ${MAX_DOWNLOAD_ENTRIES} files and folders: nothing was transferred` });
  const transfers = [
    ...(await ts.api<TaskInfo[]>('/api/task/offline_download_transfer/undone', { token: admin })).data!,
    ...(await ts.api<TaskInfo[]>('/api/task/offline_download_transfer/done', { token: admin })).data!,
  ];
  expect(transfers.filter((t) => t.name.includes(`qBittorrent/${id}/`))).toEqual([]);
  expect(await exists(storage('many/E'))).toBe(false);
  expect(await exists(join(ts.dataDir, 'temp', 'qBittorrent', id))).toBe(false);
  expect(await qbit!.tagged(id)).toEqual([]);
}, 180_000);

it('names in a torrent (.., /, \\, 300 bytes, a storage temp name) land sanitized inside the target or fail clearly', async () => {
  const d = randomBytes(50);
  // libtorrent asks the web seed for the names as it sanitized them: every /ws/N/ path answers d.
  const url = serveTorrent('N', [
    { path: ['ok.bin'], data: d },
    { path: ['.treegate-upload-abc'], data: d },
    { path: ['..', 'up.bin'], data: d },
    { path: ['a\\b'], data: d },
    { path: ['n'.repeat(300)], data: d },
    { path: ['/abs'], data: d },
  ]);
  const { done, transfers } = await download(url, '/names');
  expect(done).toMatchObject({ state: 2, error: '' });
  // Nothing beside the torrent's folder: `..` was dropped, not followed.
  expect(await readdir(storage('names'))).toEqual(['N']);
  expect(await exists(storage('up.bin'))).toBe(false);
  const landed = await filesBelow(storage('names'));
  expect(landed).toEqual(['N/ab', 'N/abs', `N/${'n'.repeat(240)}`, 'N/ok.bin', 'N/up.bin']);
  for (const f of landed) expect((await readFile(storage(join('names', f)))).equals(d), f).toBe(true);
  // The Local driver's own upload temp name is refused, and says so.
  expect(transfers.filter((t) => t.state !== 2).map((t) => t.error)).toEqual(['.treegate-upload-abc is a reserved name']);
}, 180_000);
