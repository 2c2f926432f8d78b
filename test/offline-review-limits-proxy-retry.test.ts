/**
 * Offline download findings of a code review, each shown against the real server on loopback with
 * a real aria2c and qbittorrent-nox: aria2's size bound over a metalink's files side by side, its
 * own no-proxy list and a 0.0.0.0 address bypassing the egress proxy, a job added while the task
 * was cancelled left running; SimpleHttp reading endless redirect and error bodies for good;
 * qBittorrent's bc:// links refused, a negative seed time, transfers started twice by a retry.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtemp, readdir, rm } from 'node:fs/promises';
import { createServer, type Server } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { TestServer } from './harness.js';
import { ok, startRestServer } from './fs-helpers.js';
import { settle, until } from './tasks-helpers.js';
import { freePort, startQbittorrent, webSeedTorrent, type Qbittorrent } from './offline-helpers.js';
import type { TaskInfo } from '../src/tasks/types.js';

let ts: TestServer;
let admin: string;
let web: Server;
let base = '';
let aria2: ChildProcess | undefined;
let aria2Dir = '';
let aria2Port = 0;

/** Per test: what the web server's handlers do. */
const routes = new Map<string, (req: import('node:http').IncomingMessage, res: import('node:http').ServerResponse) => void>();

const setting = async (key: string, value: string) => ok(await ts.api('/api/admin/setting/save', { token: admin, body: [{ key, value }] }));
const add = (body: Record<string, unknown>) =>
  ts.api<{ tasks: TaskInfo[] }>('/api/fs/add_offline_download', { token: admin, body: { delete_policy: 'delete_on_upload_succeed', ...body } });

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

  aria2Port = await freePort();
  aria2Dir = await mkdtemp(join(tmpdir(), 'treegate-aria2-'));
  // As an admin's aria2.conf may say: no proxy for this machine and the LAN.
  const args = ['--enable-rpc', `--rpc-listen-port=${aria2Port}`, '--rpc-secret=s3cret', `--dir=${aria2Dir}`, '--daemon=false', '--quiet=true', '--no-proxy=127.0.0.1,localhost,10.0.0.0/8'];
  aria2 = spawn('aria2c', args, { stdio: 'ignore' });
  await until('aria2c RPC', async () => (await fetch(`http://127.0.0.1:${aria2Port}/jsonrpc`).then(() => true, () => undefined)), 15_000);
  ok(await ts.api('/api/admin/setting/set_aria2', { token: admin, body: { uri: `http://127.0.0.1:${aria2Port}/jsonrpc`, secret: 's3cret' } }));
});
afterAll(async () => {
  aria2?.kill('SIGKILL');
  if (aria2Dir) await rm(aria2Dir, { recursive: true, force: true });
  web?.closeAllConnections();
  await new Promise((r) => web?.close(r));
  await ts?.close();
});

it('aria2: a metalink file larger than offline_download_max_size is stopped while an earlier file of it still downloads', async () => {
  // The metalink names a small slow file first and a big one second. aria2 fetches both side by
  // side; only the first was watched, so the big one ran to its end, far past the limit, before
  // anything looked at it.
  const BIG = 4 * 1024 * 1024;
  let bigSent = 0;
  let bigWhole = false;
  let bigClosed!: () => void;
  const bigGone = new Promise<void>((r) => (bigClosed = r));
  routes.set('/list.meta4', (_req, res) => {
    const file = (n: string, size: number) => `<file name="${n}"><size>${size}</size><url>${base}/${n}</url></file>`;
    res.writeHead(200, { 'content-type': 'application/metalink4+xml' })
      .end(`<?xml version="1.0" encoding="UTF-8"?><metalink xmlns="urn:ietf:params:xml:ns:metalink">${file('small.bin', 1000)}${file('big.bin', BIG)}</metalink>`);
  });
  // The small file answers only once the big one's connection is over (cut, or complete).
  routes.set('/small.bin', (_req, res) => {
    res.writeHead(200, { 'content-length': 1000 });
    void bigGone.then(() => res.end(Buffer.alloc(1000, 1)));
  });
  routes.set('/big.bin', (_req, res) => {
    res.writeHead(200, { 'content-length': BIG });
    const chunk = Buffer.alloc(16 * 1024, 2);
    const timer = setInterval(() => {
      if (bigSent >= BIG) return;
      res.write(chunk);
      bigSent += chunk.length;
      if (bigSent >= BIG) (bigWhole = true), res.end();
    }, 20);
    res.on('close', () => (clearInterval(timer), bigClosed()));
  });
  await setting('offline_download_max_size', '100000');
  try {
    const r = await add({ urls: [`${base}/list.meta4`], path: '/meta', tool: 'aria2' });
    ok(r);
    const id = r.data!.tasks[0]!.id;
    const done = (await settle(ts, admin, 'offline_download', 120_000)).find((t) => t.id === id)!;
    expect(done.state).toBe(7);
    expect(done.error).toMatch(/limit of 100000 bytes/);
    expect(bigWhole).toBe(false);
    expect(bigSent).toBeLessThan(BIG);
  } finally {
    await setting('offline_download_max_size', '10737418240');
  }
});

it('aria2 whose own configuration says no-proxy for some hosts: its connections still go through the SSRF check', async () => {
  // The URL passes while private addresses are allowed; then, before answering, the server turns
  // them off and redirects to loopback. aria2 follows the redirect itself: its job options named
  // the egress proxy but left aria2's global no-proxy list in force, so it went there directly.
  let targetHits = 0;
  routes.set('/target.bin', (_req, res) => {
    targetHits++;
    res.writeHead(200, { 'content-length': 6 }).end('secret');
  });
  routes.set('/flip', (_req, res) => {
    void setting('offline_download_allow_private', 'false').then(() => res.writeHead(302, { location: `${base}/target.bin` }).end());
  });
  try {
    const r = await add({ urls: [`${base}/flip`], path: '/flipped', tool: 'aria2' });
    ok(r);
    const id = r.data!.tasks[0]!.id;
    const done = (await settle(ts, admin, 'offline_download')).find((t) => t.id === id)!;
    expect(done.state).toBe(7);
    expect(targetHits).toBe(0);
    expect(ts.logs.some((l) => l.includes('connection refused by the SSRF rule'))).toBe(true);
  } finally {
    await setting('offline_download_allow_private', 'true');
  }
});

/** aria2 RPC called directly (not through the server). */
async function rpc<T>(method: string, params: unknown[] = []): Promise<T> {
  const r = await fetch(`http://127.0.0.1:${aria2Port}/jsonrpc`, { method: 'POST', body: JSON.stringify({ jsonrpc: '2.0', id: 1, method, params: ['token:s3cret', ...params] }) });
  return ((await r.json()) as { result: T }).result;
}

it('aria2: a download cancelled while aria2 is answering addUri leaves no job running in aria2', async () => {
  // An RPC relay in front of aria2 that holds back the answer to addUri (aria2 has added the job
  // by then) until the task is cancelled: the job's gid was only known from that answer, so the
  // cancel could not remove it and aria2 went on downloading into the removed temp folder.
  let addSeen = false;
  let release!: () => void;
  const gate = new Promise<void>((r) => (release = r));
  const relay = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const body = Buffer.concat(chunks);
      void fetch(`http://127.0.0.1:${aria2Port}/jsonrpc`, { method: 'POST', body }).then(async (r) => {
        const text = await r.text();
        if (body.includes('"aria2.addUri"')) (addSeen = true), await gate;
        res.writeHead(r.status, { 'content-type': 'application/json' }).end(text);
      }, () => res.destroy());
    });
  });
  await new Promise<void>((r) => relay.listen(0, '127.0.0.1', r));
  const relayUri = `http://127.0.0.1:${(relay.address() as { port: number }).port}/jsonrpc`;
  routes.set('/trickle.bin', (_req, res) => {
    res.writeHead(200, { 'content-length': 10_000_000 });
    const timer = setInterval(() => res.write(Buffer.alloc(1024, 3)), 50);
    res.on('close', () => clearInterval(timer));
  });
  ok(await ts.api('/api/admin/setting/set_aria2', { token: admin, body: { uri: relayUri, secret: 's3cret' } }));
  try {
    const r = await add({ urls: [`${base}/trickle.bin`], path: '/trickle', tool: 'aria2' });
    ok(r);
    const id = r.data!.tasks[0]!.id;
    await until('addUri at aria2', async () => (addSeen ? true : undefined));
    ok(await ts.api(`/api/task/offline_download/cancel?tid=${id}`, { token: admin, body: {} }));
    const done = (await settle(ts, admin, 'offline_download')).find((t) => t.id === id)!;
    expect(done.state).toBe(4);
    release();
    const dir = join(ts.dataDir, 'temp', 'aria2', id);
    const keys = ['gid', 'status', 'dir'];
    const jobs = [...await rpc<Array<{ dir: string }>>('aria2.tellActive', [keys]), ...await rpc<Array<{ dir: string }>>('aria2.tellWaiting', [0, 100, keys])];
    expect(jobs.filter((j) => j.dir === dir)).toEqual([]);
  } finally {
    release();
    ok(await ts.api('/api/admin/setting/set_aria2', { token: admin, body: { uri: `http://127.0.0.1:${aria2Port}/jsonrpc`, secret: 's3cret' } }));
    relay.closeAllConnections();
    await new Promise((r) => relay.close(r));
  }
});

it('SimpleHttp: a redirect with an endless body is not read on after the download moved on (and ended)', async () => {
  // follow() drained each redirect's body (resume) and went to the next hop: a redirect whose body
  // never ends kept its connection reading for good, after the task had succeeded.
  let redirectClosed = false;
  routes.set('/r302', (_req, res) => {
    res.writeHead(302, { location: '/plain.txt' });
    const timer = setInterval(() => res.write(Buffer.alloc(8 * 1024, 4)), 10);
    res.on('close', () => (clearInterval(timer), (redirectClosed = true)));
  });
  routes.set('/plain.txt', (_req, res) => res.writeHead(200, { 'content-length': 5 }).end('plain'));
  const r = await add({ urls: [`${base}/r302`], path: '/r302', tool: 'SimpleHttp' });
  ok(r);
  const id = r.data!.tasks[0]!.id;
  expect((await settle(ts, admin, 'offline_download')).find((t) => t.id === id)).toMatchObject({ state: 2, error: '' });
  await settle(ts, admin, 'offline_download_transfer');
  await until('the redirect connection to close', async () => (redirectClosed ? true : undefined), 10_000);
});

it('SimpleHttp: an error answer with an endless body is not read on after the task failed', async () => {
  let closed = false;
  routes.set('/e500', (_req, res) => {
    res.writeHead(500);
    const timer = setInterval(() => res.write(Buffer.alloc(8 * 1024, 5)), 10);
    res.on('close', () => (clearInterval(timer), (closed = true)));
  });
  const r = await add({ urls: [`${base}/e500`], path: '/e500', tool: 'SimpleHttp' });
  ok(r);
  const id = r.data!.tasks[0]!.id;
  expect((await settle(ts, admin, 'offline_download')).find((t) => t.id === id)).toMatchObject({ state: 7, error: 'http status code 500' });
  await until('the error answer\'s connection to close', async () => (closed ? true : undefined), 10_000);
});

it('aria2 addressed as http://0.0.0.0:<port> (this machine) downloads through the egress proxy too', async () => {
  // 0.0.0.0 reaches this machine, but it was not taken for a loopback address: aria2 got no proxy
  // and followed a redirect to loopback by itself, past the SSRF check.
  let targetHits = 0;
  routes.set('/target0.bin', (_req, res) => {
    targetHits++;
    res.writeHead(200, { 'content-length': 6 }).end('secret');
  });
  routes.set('/flip0', (_req, res) => {
    void setting('offline_download_allow_private', 'false').then(() => res.writeHead(302, { location: `${base}/target0.bin` }).end());
  });
  ok(await ts.api('/api/admin/setting/set_aria2', { token: admin, body: { uri: `http://0.0.0.0:${aria2Port}/jsonrpc`, secret: 's3cret' } }));
  try {
    const r = await add({ urls: [`${base}/flip0`], path: '/flipped0', tool: 'aria2' });
    ok(r);
    const id = r.data!.tasks[0]!.id;
    const done = (await settle(ts, admin, 'offline_download')).find((t) => t.id === id)!;
    expect(done.state).toBe(7);
    expect(targetHits).toBe(0);
  } finally {
    await setting('offline_download_allow_private', 'true');
    ok(await ts.api('/api/admin/setting/set_aria2', { token: admin, body: { uri: `http://127.0.0.1:${aria2Port}/jsonrpc`, secret: 's3cret' } }));
  }
});

describe('qBittorrent', () => {
  let qbit: Qbittorrent | undefined;
  const payload = randomBytes(40 * 1024 + 5);
  beforeAll(async () => {
    qbit = await startQbittorrent();
    routes.set('/s.torrent', (_req, res) => res.writeHead(200).end(webSeedTorrent('seeded.bin', payload, `${base}/ws/`)));
    routes.set('/ws/seeded.bin', (req, res) => {
      const m = /^bytes=(\d+)-(\d*)$/.exec(req.headers.range ?? '');
      const start = m ? Number(m[1]) : 0;
      const end = m && m[2] ? Math.min(Number(m[2]), payload.length - 1) : payload.length - 1;
      res.writeHead(m ? 206 : 200, { 'content-length': end - start + 1, ...(m ? { 'content-range': `bytes ${start}-${end}/${payload.length}` } : {}) });
      res.end(payload.subarray(start, end + 1));
    });
    ok(await ts.api('/api/admin/setting/set_qbit', { token: admin, body: { url: `http://admin:adminadmin@127.0.0.1:${qbit.port}/`, seedtime: '0' } }));
  }, 60_000);
  afterAll(async () => qbit?.stop());

  it('a BitComet bc:// link (a scheme it takes) is accepted while private addresses are off: it names no host to contact', async () => {
    // bc://bt/<base64 of AA/name/size/info hash/ZZ> is a magnet in other words; its "host" `bt` was
    // looked up in DNS like a URL's, so every such link failed with `cannot resolve host bt`.
    const link = `bc://bt/${Buffer.from(`AA/a.txt/123/${'ef'.repeat(20)}/ZZ`).toString('base64')}`;
    await setting('offline_download_allow_private', 'false');
    try {
      const r = await add({ urls: [link], path: '/bc', tool: 'qBittorrent' });
      ok(r);
      const id = r.data!.tasks[0]!.id;
      ok(await ts.api(`/api/task/offline_download/cancel?tid=${id}`, { token: admin, body: {} }));
      await settle(ts, admin, 'offline_download');
    } finally {
      await setting('offline_download_allow_private', 'true');
    }
  });

  it('a download retried after it failed past its transfers (qBittorrent unreachable to remove the torrent) does not start them twice', async () => {
    // A WebUI relay that fails the first torrents/delete (the removal after seeding): the task
    // failed after it had started its transfers; its automatic retry downloaded again and started
    // a second transfer of every file, racing the first (which may delete the file it reads).
    let failDelete = true;
    const relay = createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        if (failDelete && req.url === '/api/v2/torrents/delete') return (failDelete = false), res.writeHead(500).end('down for a moment');
        const headers: Record<string, string> = {};
        for (const k of ['cookie', 'content-type']) if (req.headers[k]) headers[k] = String(req.headers[k]);
        const body = req.method === 'GET' ? undefined : Buffer.concat(chunks);
        void fetch(`http://127.0.0.1:${qbit!.port}${req.url}`, { method: req.method, headers, body }).then(async (r) => {
          const out: Record<string, string> = {};
          const cookie = r.headers.get('set-cookie');
          if (cookie) out['set-cookie'] = cookie;
          res.writeHead(r.status, out).end(Buffer.from(await r.arrayBuffer()));
        }, () => res.destroy());
      });
    });
    await new Promise<void>((r) => relay.listen(0, '127.0.0.1', r));
    const port = (relay.address() as { port: number }).port;
    ok(await ts.api('/api/admin/setting/set_qbit', { token: admin, body: { url: `http://admin:adminadmin@127.0.0.1:${port}/`, seedtime: '0' } }));
    try {
      const r = await add({ urls: [`${base}/s.torrent`], path: '/twice', tool: 'qBittorrent', delete_policy: 'delete_on_upload_succeed' });
      ok(r);
      const id = r.data!.tasks[0]!.id;
      const done = (await settle(ts, admin, 'offline_download', 90_000)).find((t) => t.id === id)!;
      const transfers = (await settle(ts, admin, 'offline_download_transfer')).filter((t) => t.name.includes(id));
      expect(failDelete).toBe(false);
      expect(transfers.map((t) => [t.state, t.error])).toEqual([[2, '']]);
      expect(done).toMatchObject({ state: 2, error: '' }); // its retry removed the torrent
      expect(await qbit!.tagged(id)).toEqual([]);
      // delete_on_upload_succeed: nothing downloaded a second time is left in the temp folder
      expect(await readdir(join(ts.dataDir, 'temp', 'qBittorrent', id)).catch(() => 'gone')).toBe('gone');
    } finally {
      ok(await ts.api('/api/admin/setting/set_qbit', { token: admin, body: { url: `http://admin:adminadmin@127.0.0.1:${qbit!.port}/`, seedtime: '0' } }));
      relay.closeAllConnections();
      await new Promise((r) => relay.close(r));
    }
  });

  it('a negative qbittorrent_seedtime leaves the torrent seeding in qBittorrent (AList: it waits and removes only when >= 0)', async () => {
    ok(await ts.api('/api/admin/setting/set_qbit', { token: admin, body: { url: `http://admin:adminadmin@127.0.0.1:${qbit!.port}/`, seedtime: '-1' } }));
    try {
      const r = await add({ urls: [`${base}/s.torrent`], path: '/seedforever', tool: 'qBittorrent', delete_policy: 'delete_never' });
      ok(r);
      const id = r.data!.tasks[0]!.id;
      const done = (await settle(ts, admin, 'offline_download', 90_000)).find((t) => t.id === id)!;
      expect(done).toMatchObject({ state: 2, error: '' });
      await settle(ts, admin, 'offline_download_transfer');
      expect(await qbit!.tagged(id)).toHaveLength(1);
    } finally {
      ok(await ts.api('/api/admin/setting/set_qbit', { token: admin, body: { url: `http://admin:adminadmin@127.0.0.1:${qbit!.port}/`, seedtime: '0' } }));
    }
  });
});
