/**
 * A qBittorrent download seeding (qbittorrent_seedtime) when the server restarts is failed with
 * `interrupted by a restart`, but the transfers it started are resumable: their files must stay.
 * The abandoned download used to delete its torrent *with its files*, so the resumed transfer
 * found nothing to put. Real qbittorrent-nox on loopback, web seed as in offline-qbittorrent.
 */
import { randomBytes } from 'node:crypto';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { startTestServer, type TestServer } from './harness.js';
import { ok } from './fs-helpers.js';
import { settle, tasksOf, until } from './tasks-helpers.js';
import { startFileServer, startQbittorrent, webSeedTorrent, type FileServer, type Qbittorrent } from './offline-helpers.js';
import type { TaskInfo } from '../src/tasks/types.js';

let web: FileServer;
let qbit: Qbittorrent | undefined;
let port = 0;
let dataDir = '';
let ts: TestServer | undefined;
const payload = randomBytes(64 * 1024 + 5);
const env = { TREEGATE_SFTP_ENABLE: 'false' };

/** How many torrents qBittorrent lists under a task's tag. */
const listed = async (id: string) => (await qbit!.tagged(id)).length;

beforeAll(async () => {
  web = await startFileServer({});
  const torrent = webSeedTorrent('seeded.bin', payload, `${web.url}/ws/`);
  web.server.removeAllListeners('request');
  web.server.on('request', (req, res) => {
    const path = (req.url ?? '/').split('?')[0]!;
    if (path === '/s.torrent') return res.writeHead(200, { 'content-type': 'application/x-bittorrent' }).end(torrent);
    if (path !== '/ws/seeded.bin') return res.writeHead(404).end();
    const m = /^bytes=(\d+)-(\d*)$/.exec(req.headers.range ?? '');
    const start = m ? Number(m[1]) : 0;
    const end = m && m[2] ? Math.min(Number(m[2]), payload.length - 1) : payload.length - 1;
    res.writeHead(m ? 206 : 200, { 'content-length': end - start + 1, ...(m ? { 'content-range': `bytes ${start}-${end}/${payload.length}` } : {}) });
    res.end(payload.subarray(start, end + 1));
  });
  qbit = await startQbittorrent();
  port = qbit.port;
  dataDir = await mkdtemp(join(tmpdir(), 'treegate-qbrestart-'));
}, 60_000);

afterAll(async () => {
  await ts?.close();
  await qbit?.stop();
  await web?.close();
  if (dataDir) await rm(dataDir, { recursive: true, force: true });
});

it('the transfer of a download seeding at a restart resumes and puts its file', async () => {
  ts = await startTestServer({ dataDir, env });
  let admin = await ts.login();
  ok(await ts.api('/api/admin/setting/set_qbit', { token: admin, body: { url: `http://admin:adminadmin@127.0.0.1:${port}/`, seedtime: '30' } }));
  ok(await ts.api('/api/admin/setting/save', { token: admin, body: [{ key: 'offline_download_allow_private', value: 'true' }] }));
  // The transfer's put waits until the server stops, so the restart finds it unfinished.
  const vfs = ts.running.core.vfs;
  let putting = false;
  vfs.put = async (ctx) => {
    putting = true;
    await new Promise((_res, rej) => ctx.signal?.addEventListener('abort', () => rej(ctx.signal!.reason), { once: true }));
    throw new Error('unreachable');
  };
  const r = await ts.api<{ tasks: TaskInfo[] }>('/api/fs/add_offline_download', {
    token: admin, body: { urls: [`${web.url}/s.torrent`], path: '/seed', tool: 'qBittorrent', delete_policy: 'delete_always' },
  });
  ok(r);
  const tok = admin;
  await until('seeding with its transfer running', async () => {
    const [dl] = await tasksOf(ts!, tok, 'offline_download', 'undone');
    return putting && dl?.status === 'offline download completed, waiting for seeding' ? true : undefined;
  }, 60_000, 100);
  await ts.close();

  ts = await startTestServer({ dataDir, env });
  admin = await ts.login();
  expect((await tasksOf(ts, admin, 'offline_download', 'done')).map((t) => [t.state, t.error])).toEqual([[7, 'interrupted by a restart']]);
  const transfers = await settle(ts, admin, 'offline_download_transfer');
  expect(transfers.map((t) => [t.state, t.error])).toEqual([[2, '']]);
  expect((await readFile(join(dataDir, 'storage', 'seed', 'seeded.bin'))).equals(payload)).toBe(true);
  // The abandoned download no longer seeds: its torrent leaves qBittorrent (without its files) in
  // the cleanup the server runs after it started.
  await until('the abandoned torrent gone from qBittorrent', async () => ((await listed(r.data!.tasks[0]!.id)) === 0 ? true : undefined));
}, 120_000);
