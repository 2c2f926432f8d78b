/**
 * Adversarial probe of the remote drivers under failure, through the whole server: treegate's
 * WebDAV front end (Basic auth as admin) in front, a storage whose remote sits behind a loopback
 * proxy that can cut every connection (the remote died) or freeze them (the remote stops answering,
 * sockets open). A download or upload that loses its remote must end with an error for treegate's
 * client within a bound, leave nothing under the final name, and leave treegate serving.
 */
import { randomBytes } from 'node:crypto';
import { readdir } from 'node:fs/promises';
import { request } from 'node:http';
import net from 'node:net';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ADMIN_PASSWORD, type TestServer } from './harness.js';
import { names, ok, putFile, startRestServer } from './fs-helpers.js';
import { startVsftpd } from '../drivers/testing/vsftpd.js';
import { switchProxy } from '../drivers/testing/switch-proxy.js';
import { DAV_TIMEOUTS } from '../drivers/webdav/http.js';
import { additionFor, createStorage, startRemoteServers, type RemoteServers } from './remote-servers.js';

/** A loopback TCP proxy to `target` that can cut its connections or freeze them (no byte either way). */
interface FreezeProxy {
  port: number;
  cut(): void;
  freeze(): void;
  close(): Promise<void>;
}

async function freezeProxy(target: number): Promise<FreezeProxy> {
  const pairs = new Set<[net.Socket, net.Socket]>();
  let frozen = false;
  const server = net.createServer((client) => {
    const upstream = net.connect(target, '127.0.0.1');
    const pair: [net.Socket, net.Socket] = [client, upstream];
    pairs.add(pair);
    for (const s of pair) {
      s.on('error', () => { client.destroy(); upstream.destroy(); });
      s.on('close', () => { pairs.delete(pair); client.destroy(); upstream.destroy(); });
    }
    if (frozen) return; // accepted, never forwarded
    client.pipe(upstream).pipe(client);
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  return {
    port: (server.address() as net.AddressInfo).port,
    cut: () => { for (const [a, b] of pairs) { a.destroy(); b.destroy(); } },
    freeze: () => {
      frozen = true;
      for (const [a, b] of pairs) { a.unpipe(b); b.unpipe(a); a.pause(); b.pause(); }
    },
    close: () => new Promise<void>((r) => { for (const [a, b] of pairs) { a.destroy(); b.destroy(); } server.close(() => r()); }),
  };
}

/** `p`, or a rejection after `ms`: a probe that would hang fails instead. */
function within<T>(p: Promise<T>, ms: number, what: string): Promise<T> {
  let t: NodeJS.Timeout | undefined;
  return Promise.race([p, new Promise<never>((_, reject) => { t = setTimeout(() => reject(new Error(`${what}: no end in ${ms} ms`)), ms); })])
    .finally(() => clearTimeout(t));
}

let ts: TestServer;
let admin: string;
/** FTP's server is started by the one test that needs it. */
type DriverName = 'S3' | 'SFTP' | 'WebDav';
let remote: RemoteServers<DriverName>;
const proxies: FreezeProxy[] = [];
const davAuth = 'Basic ' + Buffer.from(`admin:${ADMIN_PASSWORD}`).toString('base64');

beforeAll(async () => {
  remote = await startRemoteServers<DriverName>(['S3', 'SFTP', 'WebDav']);
  ts = await startRestServer();
  admin = await ts.login();
}, 60_000);

afterAll(async () => {
  await Promise.allSettled(proxies.map((p) => p.close()));
  await ts?.close();
  await remote?.stop();
});

/** Mounted with webdav_policy native_proxy, so /dav GETs stream through treegate (S3 would redirect). */
async function mount(path: string, driver: DriverName, port: number): Promise<void> {
  ok(await createStorage(ts, admin, path, driver, remote.additionOf(driver, port), { webdav_policy: 'native_proxy' }));
}

/** name → size of a folder's listing (refreshed). */
async function sizes(path: string): Promise<Record<string, number>> {
  const r = await ts.api<{ content: Array<{ name: string; size: number }> }>('/api/fs/list', { token: admin, body: { path, refresh: true } });
  ok(r);
  return Object.fromEntries(r.data!.content.map((e) => [e.name, e.size]));
}

/**
 * PUT `body` through treegate's /dav, calling `cut` once 8 MiB are sent; the status, or the
 * request's error message when the connection broke first.
 */
function putCutOff(path: string, body: Buffer, cut: () => void): Promise<number | string> {
  return new Promise((resolve) => {
    const req = request(`${ts.url}/dav${path}`, { method: 'PUT', headers: { authorization: davAuth, 'content-length': String(body.length) } }, (res) => {
      res.resume();
      resolve(res.statusCode ?? 0);
    });
    req.once('error', (e) => resolve(e.message));
    let sent = 0;
    const pump = () => {
      while (sent < body.length) {
        const chunk = body.subarray(sent, sent + (1 << 20));
        sent += chunk.length;
        if (sent > 8 << 20 && sent - chunk.length <= 8 << 20) setTimeout(cut, 200);
        if (!req.write(chunk)) return void req.once('drain', () => setTimeout(pump, 20));
      }
      req.end();
    };
    pump();
  });
}

/** GET a file through treegate's /dav: resolves after the first body bytes with a reader for the rest. */
function davGet(path: string): Promise<{ status: number; rest(): Promise<number> }> {
  return new Promise((resolve, reject) => {
    const req = request(`${ts.url}/dav${encodeURI(path)}`, { headers: { authorization: davAuth } }, (res) => {
      res.once('data', (first: Buffer) => {
        res.pause();
        resolve({
          status: res.statusCode ?? 0,
          rest: () => new Promise<number>((ok2, fail) => {
            let n = first.length;
            res.on('data', (c: Buffer) => { n += c.length; });
            res.once('end', () => (res.complete ? ok2(n) : fail(new Error('response cut short'))));
            res.once('error', fail);
            res.once('aborted', () => fail(new Error('response aborted')));
            res.resume();
          }),
        });
      });
      res.once('error', reject);
    });
    req.once('error', reject);
    req.end();
  });
}

describe.each(['WebDav', 'SFTP', 'S3'] as const)('%s: the remote fails mid-transfer', (driver) => {
  const big = randomBytes(48 << 20);
  let proxy: FreezeProxy;
  let direct: string;
  let flaky: string;

  beforeAll(async () => {
    proxy = await freezeProxy(remote.portOf(driver));
    proxies.push(proxy);
    direct = `/direct-${driver.toLowerCase()}`;
    flaky = `/flaky-${driver.toLowerCase()}`;
    await mount(direct, driver, remote.portOf(driver));
    await mount(flaky, driver, proxy.port);
    ok(await putFile(ts, admin, `${direct}/probe/big.bin`, big));
  }, 60_000);

  it('a download whose remote dies ends with an error, promptly, and treegate keeps serving', async () => {
    const dl = await davGet(`${flaky}/probe/big.bin`);
    expect(dl.status).toBe(200);
    proxy.cut();
    const err = await within(dl.rest().then((n) => new Error(`got all ${n} bytes`), (e: Error) => e), 20_000, 'download');
    expect(err.message).toMatch(/cut short|aborted|ECONNRESET|socket hang up/);
    expect(await names(ts, admin, `${direct}/probe`)).toEqual(['big.bin']);
  }, 40_000);

  it('an upload whose remote dies ends with an error and leaves nothing under the final name', async () => {
    const status = await within(putCutOff(`${flaky}/probe/up.bin`, big, () => proxy.cut()), 60_000, 'upload');
    const seen = await sizes(`${direct}/probe`);
    if (status === 201 || status === 204) {
      // S3's SDK retries a part on a new connection (parts are buffered): a complete upload is fine.
      expect(seen['up.bin']).toBe(big.length);
    } else {
      expect(seen['up.bin']).toBeUndefined();
    }
    // A temporary file the cut left behind goes once the storage reaches its remote again. Listings
    // leave temp names out, so the remote's own folder is read (S3 writes no temp files).
    const remoteDir = driver === 'SFTP' ? join(remote.sshd.dataDir, 'probe') : driver === 'WebDav' ? join(remote.dav.dataDir, 'probe') : undefined;
    await within((async () => {
      for (;;) {
        await sizes(`${flaky}/probe`).catch(() => undefined);
        if (!remoteDir || !(await readdir(remoteDir)).some((n) => n.endsWith('.tmp'))) return;
        await new Promise((r) => setTimeout(r, 200));
      }
    })(), 15_000, 'temporary file removal');
  }, 90_000);
});

describe('a remote that stops answering mid-download (sockets stay open)', () => {
  it('WebDav: the download fails once the connection is idle for the driver\'s idle timeout', async () => {
    const saved = DAV_TIMEOUTS.idleMs;
    DAV_TIMEOUTS.idleMs = 1500;
    const proxy = await freezeProxy(remote.dav.port);
    proxies.push(proxy);
    try {
      await mount('/frozen-dav', 'WebDav', proxy.port);
      ok(await putFile(ts, admin, '/frozen-dav/f/big.bin', randomBytes(48 << 20)));
      const dl = await davGet('/frozen-dav/f/big.bin');
      proxy.freeze();
      const err = await within(dl.rest().then((n) => new Error(`got all ${n} bytes`), (e: Error) => e), 20_000, 'frozen download');
      expect(err.message).toMatch(/cut short|aborted/);
      expect(await names(ts, admin, '/')).toContain('frozen-dav');
    } finally {
      DAV_TIMEOUTS.idleMs = saved;
    }
  }, 60_000);
});

describe('FTP: an upload cut off with its server', () => {
  it('leaves no temporary file once the server is back (it was visible in listings for good)', async () => {
    const ftpd = await startVsftpd();
    const proxy = await switchProxy(ftpd.port);
    try {
      ok(await createStorage(ts, admin, '/left-ftp', 'FTP', additionFor.FTP(ftpd, proxy.port)));
      ok(await putFile(ts, admin, '/left-ftp/d/seed.txt', 'x'));
      const big = randomBytes(32 << 20);
      // The data connection goes straight to vsftpd; taking the control connection's port down
      // fails the upload at its end and refuses the temp file's removal.
      const status = await within(putCutOff('/left-ftp/d/up.bin', big, () => void proxy.down()), 60_000, 'upload');
      expect([200, 201, 204]).not.toContain(status); // 502, or EPIPE when the answer comes before the body is sent
      expect(await readdir(join(ftpd.dataDir, 'd'))).not.toContain('up.bin');
      await proxy.up();
      await within((async () => {
        for (;;) {
          const r = await ts.api<{ content: Array<{ name: string }> }>('/api/fs/list', { token: admin, body: { path: '/left-ftp/d', refresh: true } });
          if (r.code === 200 && (await readdir(join(ftpd.dataDir, 'd'))).join() === 'seed.txt') return;
          await new Promise((res) => setTimeout(res, 250));
        }
      })(), 15_000, 'temporary file removal');
    } finally {
      await proxy.close();
      await ftpd.stop();
    }
  }, 120_000);
});
