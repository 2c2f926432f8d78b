/**
 * Offline downloads, second review pass: defects found reading src/tasks/offline/, each shown
 * against the real server on loopback with a real aria2c and qbittorrent-nox: a folder whose
 * transfer failed kept its files whatever delete_policy said; a tool configured to add downloads
 * paused (aria2 --pause, qBittorrent's "do not start" or stop condition) left the task waiting for
 * good; qBittorrent's "keep incomplete torrents in" folder kept a cancelled download's part files.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdir, mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { TestServer } from './harness.js';
import { ok, startRestServer } from './fs-helpers.js';
import { settle, until } from './tasks-helpers.js';
import { freePort, qbApi, startFileServer, startQbittorrent, webSeedTorrent, type Qbittorrent } from './offline-helpers.js';
import type { TaskInfo } from '../src/tasks/types.js';

let ts: TestServer;
let admin: string;
let web: Server;
let base = '';
let aria2: ChildProcess | undefined;
let aria2Dir = '';

const routes = new Map<string, (req: IncomingMessage, res: ServerResponse) => void>();
const setting = async (key: string, value: string) => ok(await ts.api('/api/admin/setting/save', { token: admin, body: [{ key, value }] }));
const add = (body: Record<string, unknown>) =>
  ts.api<{ tasks: TaskInfo[] }>('/api/fs/add_offline_download', { token: admin, body: { delete_policy: 'delete_on_upload_succeed', ...body } });
const storage = (p: string) => join(ts.dataDir, 'storage', p);
const tempOf = (tool: string, id: string) => join(ts.dataDir, 'temp', tool, id);
/** The state of a download task once it has ended (undefined while it runs). */
const ended = async (id: string) => (await ts.api<TaskInfo[]>('/api/task/offline_download/done', { token: admin })).data!.find((t) => t.id === id)?.state;
const exists = (p: string) => readdir(p).then(() => true, () => false);

/** A metalink naming files (paths may hold folders), each served by the web server. */
function metalink(path: string, files: Record<string, Buffer>): void {
  const xml = Object.entries(files).map(([n, b]) => `<file name="${n}"><size>${b.length}</size><url>${base}/f/${n}</url></file>`).join('');
  routes.set(path, (_req, res) => {
    res.writeHead(200, { 'content-type': 'application/metalink4+xml' })
      .end(`<?xml version="1.0" encoding="UTF-8"?><metalink xmlns="urn:ietf:params:xml:ns:metalink">${xml}</metalink>`);
  });
  for (const [n, b] of Object.entries(files)) routes.set(`/f/${n}`, (_req, res) => res.writeHead(200, { 'content-length': b.length }).end(b));
}

beforeAll(async () => {
  ts = await startRestServer();
  admin = await ts.login();
  web = createServer((req, res) => {
    const handler = routes.get((req.url ?? '/').split('?')[0]!);
    if (handler) return handler(req, res);
    res.writeHead(404).end();
  });
  await new Promise<void>((r) => web.listen(0, '127.0.0.1', r));
  base = `http://127.0.0.1:${(web.address() as { port: number }).port}`;
  await setting('offline_download_allow_private', 'true');
  const port = await freePort();
  aria2Dir = await mkdtemp(join(tmpdir(), 'treegate-aria2-'));
  aria2 = spawn('aria2c', ['--enable-rpc', `--rpc-listen-port=${port}`, '--rpc-secret=s3cret', `--dir=${aria2Dir}`, '--daemon=false', '--quiet=true'], { stdio: 'ignore' });
  await until('aria2c RPC', async () => (await fetch(`http://127.0.0.1:${port}/jsonrpc`).then(() => true, () => undefined)), 15_000);
  ok(await ts.api('/api/admin/setting/set_aria2', { token: admin, body: { uri: `http://127.0.0.1:${port}/jsonrpc`, secret: 's3cret' } }));
});
const cleanups: Array<() => unknown> = [];
afterAll(async () => {
  for (const c of cleanups.reverse()) await c();
  aria2?.kill('SIGKILL');
  if (aria2Dir) await rm(aria2Dir, { recursive: true, force: true });
  web?.closeAllConnections();
  await new Promise((r) => web?.close(r));
  await ts?.close();
});

it('a folder whose transfer fails for good: delete_always and delete_on_upload_failed remove its files from the temp folder', async () => {
  metalink('/folder.meta4', { 'sub/a.bin': Buffer.from('aaaa'), 'sub/b.bin': Buffer.from('bbbbbb') });
  const run = async (policy: string, path: string) => {
    // The folder's name at the target is taken by a file: its transfer cannot make the folder.
    await mkdir(storage(path), { recursive: true });
    await writeFile(storage(`${path}/sub`), 'a file');
    const r = await add({ urls: [`${base}/folder.meta4`], path, tool: 'aria2', delete_policy: policy });
    ok(r);
    const id = r.data!.tasks[0]!.id;
    expect((await settle(ts, admin, 'offline_download', 60_000)).find((t) => t.id === id)!.state).toBe(2);
    const tr = (await settle(ts, admin, 'offline_download_transfer', 60_000)).filter((t) => t.name.includes(id));
    expect(tr.map((t) => t.state)).toEqual([7]);
    return exists(tempOf('aria2', id));
  };
  expect(await run('delete_never', '/keep')).toBe(true);
  expect(await run('delete_always', '/always')).toBe(false);
  expect(await run('delete_on_upload_failed', '/onfail')).toBe(false);
});

it('an aria2 set to add downloads paused (its --pause, --pause-metadata): the download still runs (it waited, paused, for good)', async () => {
  const port = await freePort();
  const dir = await mkdtemp(join(tmpdir(), 'treegate-aria2-'));
  const proc = spawn('aria2c', ['--enable-rpc', `--rpc-listen-port=${port}`, '--rpc-secret=s3cret', `--dir=${dir}`, '--daemon=false', '--quiet=true', '--pause=true', '--pause-metadata=true'], { stdio: 'ignore' });
  cleanups.push(() => rm(dir, { recursive: true, force: true }), () => proc.kill('SIGKILL'));
  await until('aria2c RPC', async () => (await fetch(`http://127.0.0.1:${port}/jsonrpc`).then(() => true, () => undefined)), 15_000);
  const previous = await ts.api<Array<{ key: string; value: string }>>('/api/admin/setting/list', { token: admin });
  const uri = previous.data!.find((x) => x.key === 'aria2_uri')!.value;
  ok(await ts.api('/api/admin/setting/set_aria2', { token: admin, body: { uri: `http://127.0.0.1:${port}/jsonrpc`, secret: 's3cret' } }));
  try {
    metalink('/paused.meta4', { 'p.bin': Buffer.from('paused payload') });
    const r = await add({ urls: [`${base}/paused.meta4`], path: '/a2paused', tool: 'aria2' });
    ok(r);
    const id = r.data!.tasks[0]!.id;
    const state = await until('the download to end', () => ended(id), 20_000, 200).catch((e: Error) => e.message);
    expect(state).toBe(2);
    await settle(ts, admin, 'offline_download_transfer');
    expect(await readFile(storage('a2paused/p.bin'), 'utf8')).toBe('paused payload');
  } finally {
    ok(await ts.api('/api/admin/setting/set_aria2', { token: admin, body: { uri, secret: 's3cret' } }));
  }
}, 60_000);

describe('qBittorrent', () => {
  let qbit: Qbittorrent | undefined;
  let qb: Awaited<ReturnType<typeof qbApi>>;
  const payload = randomBytes(64 * 1024 + 5);
  /** The web seed's URL base; `${seed}/<name>.torrent` is a torrent of `payload` named `<name>.bin`. */
  let seed = '';
  /** While set, the web seed sends part of the payload and then hangs. */
  let hold = false;
  beforeAll(async () => {
    const server = await startFileServer({});
    cleanups.push(() => server.close());
    seed = server.url;
    server.server.removeAllListeners('request');
    server.server.on('request', (req, res) => {
      const path = (req.url ?? '/').split('?')[0]!;
      const torrent = /^\/(\w+)\.torrent$/.exec(path);
      // One torrent per test (qBittorrent takes a torrent it already has as added, and ignores it).
      if (torrent) return res.writeHead(200, { 'content-type': 'application/x-bittorrent' }).end(webSeedTorrent(`${torrent[1]}.bin`, payload, `${seed}/ws/`));
      if (!/^\/ws\/\w+\.bin$/.test(path)) return res.writeHead(404).end();
      const m = /^bytes=(\d+)-(\d*)$/.exec(req.headers.range ?? '');
      const start = m ? Number(m[1]) : 0;
      const end = m && m[2] ? Math.min(Number(m[2]), payload.length - 1) : payload.length - 1;
      res.writeHead(m ? 206 : 200, { 'content-length': end - start + 1, ...(m ? { 'content-range': `bytes ${start}-${end}/${payload.length}` } : {}) });
      // While held, only the first 32 KiB (two pieces) go out, then the answer hangs.
      const cut = hold ? Math.min(end + 1, 32 * 1024) : end + 1;
      if (cut > start) res.write(payload.subarray(start, cut));
      if (cut === end + 1) res.end();
    });
    qbit = await startQbittorrent();
    cleanups.push(() => qbit?.stop());
    qb = await qbApi(qbit.port);
    ok(await ts.api('/api/admin/setting/set_qbit', { token: admin, body: { url: `http://admin:adminadmin@127.0.0.1:${qbit.port}/`, seedtime: '0' } }));
  }, 60_000);

  it('a qBittorrent set to add torrents paused, or to stop them once checked: the download still runs (it waited for good)', async () => {
    // qBittorrent's "Do not start the download automatically" (5.x: add_stopped_enabled) and its
    // "Torrent stop condition".
    await qb.post('/app/setPreferences', { json: JSON.stringify({ start_paused_enabled: true, add_stopped_enabled: true, torrent_stop_condition: 'FilesChecked' }) });
    try {
      const r = await add({ urls: [`${seed}/paused.torrent`], path: '/paused', tool: 'qBittorrent', delete_policy: 'delete_always' });
      ok(r);
      const id = r.data!.tasks[0]!.id;
      const state = await until('the download to end', () => ended(id), 40_000, 200).catch((e: Error) => e.message);
      expect(state).toBe(2);
      await settle(ts, admin, 'offline_download_transfer');
      expect((await readFile(storage('paused/paused.bin'))).equals(payload)).toBe(true);
    } finally {
      await qb.post('/app/setPreferences', { json: JSON.stringify({ start_paused_enabled: false, add_stopped_enabled: false, torrent_stop_condition: 'None' }) });
    }
  }, 90_000);

  it('a qBittorrent keeping incomplete downloads in a folder of its own: a cancelled download leaves no part file there', async () => {
    const incomplete = await mkdtemp(join(tmpdir(), 'treegate-qbt-incomplete-'));
    cleanups.push(() => rm(incomplete, { recursive: true, force: true }));
    // qBittorrent's "Keep incomplete torrents in": the files are written there until complete.
    await qb.post('/app/setPreferences', { json: JSON.stringify({ temp_path_enabled: true, temp_path: incomplete }) });
    hold = true;
    try {
      const r = await add({ urls: [`${seed}/part.torrent`], path: '/incomplete', tool: 'qBittorrent', delete_policy: 'delete_always' });
      ok(r);
      const id = r.data!.tasks[0]!.id;
      await until('part of the payload downloaded', async () => {
        const t = (await qb.get<Array<{ downloaded: number }>>(`/torrents/info?tag=treegate-${id}`))[0];
        return t && t.downloaded > 0 ? true : undefined;
      }, 30_000, 200);
      ok(await ts.api(`/api/task/offline_download/cancel?tid=${id}`, { token: admin, body: {} }));
      await until('the download cancelled', async () => (await ended(id)) === 4 || undefined, 10_000, 200);
      await until('the torrent removed from qBittorrent', async () => ((await qbit!.tagged(id)).length === 0 ? true : undefined), 10_000, 200);
      const left = await readdir(incomplete, { recursive: true });
      expect(left.filter((n) => n.includes('part.bin'))).toEqual([]);
    } finally {
      hold = false;
      await qb.post('/app/setPreferences', { json: JSON.stringify({ temp_path_enabled: false }) });
    }
  }, 90_000);
});
