/**
 * Task findings of a code review (tasks, offline downloads), each shown against the real server on
 * loopback: a download runs with its creator's permission as it is when it runs (a retry too); a
 * qBittorrent download cancelled while seeding leaves no torrent behind; an As-Task upload refused
 * at run time closes its spooled file.
 */
import { randomBytes } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, beforeAll, expect, it } from 'vitest';
import type { TestServer } from './harness.js';
import { mkdir, ok, PERM, putFile, startRestServer } from './fs-helpers.js';
import { holdPutsOf, settle, tasksOf, until } from './tasks-helpers.js';
import { startFileServer, startQbittorrent, webSeedTorrent, type FileServer, type Qbittorrent } from './offline-helpers.js';
import type { TaskInfo } from '../src/tasks/types.js';
import { openFiles } from './open-fds.js';

let ts: TestServer;
let admin: string;
let web: FileServer;
/** While true, /flip.bin answers 404 (the download fails); then it serves its bytes. */
let failing = true;
let qbit: Qbittorrent | undefined;
const seeded = randomBytes(40 * 1024 + 3);

const setting = async (key: string, value: string) => ok(await ts.api('/api/admin/setting/save', { token: admin, body: [{ key, value }] }));

beforeAll(async () => {
  ts = await startRestServer();
  admin = await ts.login();
  web = await startFileServer({});
  web.server.removeAllListeners('request');
  web.server.on('request', (req, res) => {
    const path = (req.url ?? '/').split('?')[0]!;
    web.hits.push(path);
    if (path === '/flip.bin' && !failing) return res.writeHead(200, { 'content-length': 4 }).end('flip');
    if (path === '/s.torrent') return res.writeHead(200).end(webSeedTorrent('seeded.bin', seeded, `${web.url}/ws/`));
    if (path === '/ws/seeded.bin') return res.writeHead(200, { 'content-length': seeded.length }).end(seeded);
    res.writeHead(404).end();
  });
  await setting('offline_download_allow_private', 'true');
});
afterAll(async () => {
  await qbit?.stop();
  await web?.close();
  await ts?.close();
});

it('retrying a failed download after the creator lost the offline download permission fetches nothing', async () => {
  const OFFLINE = 4;
  const password = 'pw-rev-123';
  ok(await ts.api('/api/admin/user/create', { token: admin, body: { username: 'rev', password, permission: PERM.WRITE | OFFLINE, base_path: '/', role: 0 } }));
  let user = await ts.login('rev', password);
  const r = await ts.api<{ tasks: TaskInfo[] }>('/api/fs/add_offline_download', {
    token: user, body: { urls: [`${web.url}/flip.bin`], path: '/rev', tool: 'SimpleHttp', delete_policy: 'delete_on_upload_succeed' },
  });
  ok(r);
  const id = r.data!.tasks[0]!.id;
  expect((await settle(ts, user, 'offline_download')).find((t) => t.id === id)).toMatchObject({ state: 7, error: 'http status code 404' });

  // The admin takes the offline download permission away; the user may still log in and write.
  const users = await ts.api<{ content: Array<{ id: number; username: string }> }>('/api/admin/user/list', { token: admin });
  const uid = users.data!.content.find((u) => u.username === 'rev')!.id;
  ok(await ts.api('/api/admin/user/update', { token: admin, body: { id: uid, username: 'rev', password: '', base_path: '/', role: 0, permission: PERM.WRITE, disabled: false, sso_id: '' } }));
  user = await ts.login('rev', password);
  expect((await ts.api('/api/fs/add_offline_download', { token: user, body: { urls: [`${web.url}/flip.bin`], path: '/rev', tool: 'SimpleHttp', delete_policy: '' } })).code).toBe(403);

  failing = false;
  const hits = web.hits.length;
  ok(await ts.api(`/api/task/offline_download/retry?tid=${id}`, { token: user, body: {} }));
  const done = (await settle(ts, user, 'offline_download')).find((t) => t.id === id)!;
  await settle(ts, user, 'offline_download_transfer');
  expect(done.state).toBe(7);
  expect(web.hits.length).toBe(hits); // the server fetched nothing for them
  expect(await readFile(join(ts.dataDir, 'storage', 'rev', 'flip.bin'), 'utf8').catch(() => 'absent')).toBe('absent');
  expect(await tasksOf(ts, user, 'offline_download_transfer', 'done')).toEqual([]);
}, 30_000);

it('cancelling a qBittorrent download while it seeds removes its torrent from qBittorrent', async () => {
  qbit = await startQbittorrent();
  ok(await ts.api('/api/admin/setting/set_qbit', { token: admin, body: { url: `http://admin:adminadmin@127.0.0.1:${qbit.port}/`, seedtime: '30' } }));
  const r = await ts.api<{ tasks: TaskInfo[] }>('/api/fs/add_offline_download', {
    token: admin, body: { urls: [`${web.url}/s.torrent`], path: '/seed', tool: 'qBittorrent', delete_policy: 'delete_never' },
  });
  ok(r);
  const id = r.data!.tasks[0]!.id;
  await until('seeding, its file transferred', async () => {
    const [dl] = await tasksOf(ts, admin, 'offline_download', 'undone');
    const moved = (await tasksOf(ts, admin, 'offline_download_transfer', 'done')).some((t) => t.state === 2);
    return moved && dl?.status === 'offline download completed, waiting for seeding' ? true : undefined;
  }, 60_000, 100);
  expect((await readFile(join(ts.dataDir, 'storage', 'seed', 'seeded.bin'))).equals(seeded)).toBe(true);
  expect((await qbit.tagged(id)).length).toBe(1);

  ok(await ts.api(`/api/task/offline_download/cancel?tid=${id}`, { token: admin, body: {} }));
  expect((await settle(ts, admin, 'offline_download')).find((t) => t.id === id)!.state).toBe(4);
  // Not left seeding in qBittorrent for good; its file stays for the transfers (delete_never).
  await until('the torrent to leave qBittorrent', async () => ((await qbit!.tagged(id)).length === 0 ? true : undefined), 10_000, 200);
  expect((await readFile(join(ts.dataDir, 'temp', 'qBittorrent', id, 'seeded.bin'))).equals(seeded)).toBe(true);
}, 90_000);

/** Descriptors of this process (the server runs in it) open on a file below `dir`. */
it('an As-Task upload whose put is refused at run time closes its spooled file (its descriptor and disk space were held for good)', async () => {
  ok(await ts.api('/api/admin/setting/save', { token: admin, body: [{ key: 'upload_task_threads_num', value: '1' }] }));
  const spool = join(ts.dataDir, 'temp', 'upload');
  const hold = holdPutsOf(ts, '/up/held.txt');
  try {
    ok(await putFile(ts, admin, '/up/held.txt', 'first', { 'as-task': 'true' }));
    await until('the first upload to hold the worker', async () => (hold.held() ? true : undefined), 10_000, 5);
    const r = (await putFile(ts, admin, '/up/taken', 'x'.repeat(100_000), { 'as-task': 'true' })) as { data: { task: TaskInfo } };
    // Meanwhile the name became a folder: the put is refused before it reads the spooled body.
    ok(await mkdir(ts, admin, '/up/taken'));
    hold.release();
    const done = (await settle(ts, admin, 'upload')).find((t) => t.id === r.data.task.id)!;
    expect(done.state).toBe(7);
    await until('the spooled file to be closed', async () => (!openFiles().some((t) => t.startsWith(spool)) ? true : undefined), 3_000, 50);
  } finally {
    hold.restore();
  }
});
