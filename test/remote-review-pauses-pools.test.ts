/**
 * Code-review probe of backpressure and slow clients with remote storages, through the whole server
 * (treegate's WebDAV front end, as admin): each test proves one defect found by reading the drivers,
 * against the real remote server on loopback.
 *
 * Checked and found sound (no test kept here, nothing to fix): a paused reader of a 48 MiB file
 * makes treegate pull at most a few MiB from S3 (url link, proxied), SFTP and WebDav; a download its
 * client aborts stops upstream (no remote process keeps the file open) on all four drivers and the
 * storage serves the next one; an upload its client aborts leaves nothing under the final name nor
 * a temp file (S3: AbortMultipartUpload is sent); ranges at the end of a remote file (`-1`, `n-1-`,
 * past the end, 416) and If-Range with a fresh or stale validator answer the right bytes.
 */
import { randomBytes } from 'node:crypto';
import { request, type ClientRequest, type IncomingMessage } from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ADMIN_PASSWORD, type TestServer } from './harness.js';
import { ok, putFile, startRestServer } from './fs-helpers.js';
import { createStorage, startRemoteServers, type RemoteServers } from './remote-servers.js';
import { FTP_TIMEOUTS } from '../drivers/ftp/session.js';
import { DAV_TIMEOUTS } from '../drivers/webdav/http.js';

let ts: TestServer;
let admin: string;
let remote: RemoteServers<'WebDav' | 'FTP'>;
const davAuth = 'Basic ' + Buffer.from(`admin:${ADMIN_PASSWORD}`).toString('base64');
const BIG = randomBytes(24 << 20);

beforeAll(async () => {
  remote = await startRemoteServers(['WebDav', 'FTP'] as const);
  ts = await startRestServer();
  admin = await ts.login();
  for (const d of ['WebDav', 'FTP'] as const) ok(await createStorage(ts, admin, `/${d.toLowerCase()}`, d, remote.additionOf(d)));
}, 60_000);

afterAll(async () => {
  await ts?.close();
  await remote?.stop();
});

/** `p`, or a rejection after `ms`: a call that would hang fails the test instead. */
function within<T>(p: Promise<T>, ms: number, what: string): Promise<T> {
  let t: NodeJS.Timeout | undefined;
  return Promise.race([p, new Promise<never>((_, reject) => { t = setTimeout(() => reject(new Error(`${what}: no answer in ${ms} ms`)), ms); })])
    .finally(() => clearTimeout(t));
}

/** Open a WebDAV GET on treegate and read its first chunk; the response is left paused. */
function startGet(path: string): Promise<{ req: ClientRequest; res: IncomingMessage }> {
  return new Promise((resolve, reject) => {
    const req = request(`${ts.url}/dav${path}`, { headers: { authorization: davAuth } }, (res) => {
      res.once('data', () => { res.pause(); resolve({ req, res }); });
      res.once('error', reject);
    });
    req.once('error', reject);
    req.end();
  });
}

async function getAll(path: string, headers: Record<string, string> = {}): Promise<{ status: number; body: Buffer }> {
  const res = await fetch(`${ts.url}/dav${path}`, { headers: { authorization: davAuth, ...headers } });
  return { status: res.status, body: Buffer.from(await res.arrayBuffer()) };
}

const listNames = async (path: string) => {
  const r = await ts.api<{ content: Array<{ name: string }> }>('/api/fs/list', { token: admin, body: { path, refresh: true } });
  ok(r);
  return r.data!.content.map((e) => e.name).sort();
};

/**
 * A WebDAV PUT of `body` whose client sends the first MiB and goes quiet; `finish()` sends the rest
 * and resolves with the status, `cut()` hangs up.
 */
function slowPut(path: string, body: Buffer): { finish(): Promise<number>; cut(): void } {
  const req = request(`${ts.url}/dav${path}`, { method: 'PUT', headers: { authorization: davAuth, 'content-length': String(body.length) } });
  const status = new Promise<number>((resolve, reject) => {
    req.on('error', reject);
    req.on('response', (res) => { res.resume(); resolve(res.statusCode ?? 0); });
  });
  status.catch(() => undefined);
  req.write(body.subarray(0, 1 << 20));
  return { finish: () => { req.end(body.subarray(1 << 20)); return status; }, cut: () => req.destroy() };
}

describe('WebDav: clients that pause their downloads (paused video players)', () => {
  it('ten paused downloads do not stop the storage from listing and serving others', async () => {
    ok(await putFile(ts, admin, '/webdav/paused/big.bin', BIG));
    const held: Array<{ req: ClientRequest; res: IncomingMessage }> = [];
    try {
      // The driver's agent allowed 8 sockets: the 9th download, and every listing, waited for good.
      for (let i = 0; i < 10; i++) held.push(await within(startGet('/webdav/paused/big.bin'), 20_000, `paused download ${i}`));
      expect(await within(listNames('/webdav/paused'), 20_000, 'listing')).toEqual(['big.bin']);
      const part = await within(getAll('/webdav/paused/big.bin', { range: 'bytes=5-9' }), 20_000, 'another download');
      expect(part.body.equals(BIG.subarray(5, 10))).toBe(true);
    } finally {
      for (const h of held) { h.res.destroy(); h.req.destroy(); }
    }
  }, 90_000);
});

describe('an upload whose client pauses (a slow uplink), well within treegate\'s own idle limit', () => {
  /** With the driver's timeout `limits.idleMs` set to 3 s (same process), a PUT into `folder` paused 7 s. */
  async function pauseOutlasts(limits: { idleMs: number }, folder: string, before = async () => undefined as unknown) {
    const saved = limits.idleMs;
    limits.idleMs = 3000;
    try {
      await before();
      ok(await putFile(ts, admin, `${folder}/keep.txt`, 'keep'));
      const body = BIG.subarray(0, 6 << 20);
      const put = slowPut(`${folder}/a.bin`, body);
      await new Promise((r) => setTimeout(r, 7000));
      expect(await put.finish()).toBe(201);
      expect((await getAll(`${folder}/a.bin`)).body.equals(body)).toBe(true);
    } finally {
      limits.idleMs = saved;
    }
  }

  it('FTP: a client quiet for longer than basic-ftp\'s socket timeout still uploads the whole file (it was cut)', async () => {
    // A storage of its own, so every connection it dials has the short timeout.
    await pauseOutlasts(FTP_TIMEOUTS, '/ftp-short/pausing', async () => ok(await createStorage(ts, admin, '/ftp-short', 'FTP', remote.additionOf('FTP'))));
  }, 60_000);

  it('WebDav: a client quiet for longer than the driver\'s idle timeout still uploads the whole file', async () => {
    await pauseOutlasts(DAV_TIMEOUTS, '/webdav/pausing');
  }, 60_000);
});

describe('FTP: clients that upload slowly (a slow uplink)', () => {
  it('six uploads waiting on their clients do not stop the storage from listing and taking another upload', async () => {
    ok(await putFile(ts, admin, '/ftp/stalled/keep.txt', 'keep'));
    const body = BIG.subarray(0, 4 << 20);
    const held = Array.from({ length: 6 }, (_, i) => slowPut(`/ftp/stalled/up${i}.bin`, body));
    try {
      await new Promise((r) => setTimeout(r, 1000)); // the uploads reach the driver
      // Each upload held one of the pool's 4 connections while its client was quiet.
      expect(await within(listNames('/ftp/stalled'), 20_000, 'listing')).toEqual(['keep.txt']);
      const put = await within(fetch(`${ts.url}/dav/ftp/stalled/other.txt`, { method: 'PUT', headers: { authorization: davAuth }, body: 'other' }), 20_000, 'another upload');
      expect(put.status).toBe(201);
      // The slow uploads were waited for, not cut: they finish once their clients send the rest.
      expect(await held[0]!.finish()).toBe(201);
      expect((await getAll('/ftp/stalled/up0.bin')).body.equals(body)).toBe(true);
    } finally {
      for (const h of held) h.cut();
    }
  }, 90_000);
});
