/**
 * A REST upload whose remote storage dies mid-body: the client gets an envelope naming the storage's
 * failure (5xx code), not a TCP reset and not "operation aborted" (the client did not go away).
 */
import { readdirSync } from 'node:fs';
import { request } from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ADMIN_PASSWORD, type TestServer } from './harness.js';
import { ok, putFile, startRestServer } from './fs-helpers.js';
import { startVsftpd, type Vsftpd } from '../drivers/testing/vsftpd.js';
import { startNginxDav, type NginxDav } from '../drivers/testing/nginx-dav.js';
import { switchProxy, type SwitchProxy } from '../drivers/testing/switch-proxy.js';

let ts: TestServer;
let admin: string;
let ftpd: Vsftpd;
let dav: NginxDav;
const proxies: Record<string, SwitchProxy> = {};

beforeAll(async () => {
  [ftpd, dav] = await Promise.all([startVsftpd(), startNginxDav()]);
  proxies.ftp = await switchProxy(ftpd.port);
  proxies.dav = await switchProxy(dav.port);
  ts = await startRestServer();
  admin = await ts.login();
  const create = (mount_path: string, driver: string, addition: Record<string, unknown>) => ts.api('/api/admin/storage/create', {
    token: admin, body: { mount_path, driver, addition: JSON.stringify(addition), cache_expiration: 0 },
  });
  ok(await create('/ftp', 'FTP', { address: `127.0.0.1:${proxies.ftp!.port}`, encoding: 'UTF-8', username: ftpd.user, password: ftpd.password, root_folder_path: '/' }));
  ok(await create('/dav', 'WebDav', { address: `http://127.0.0.1:${proxies.dav!.port}`, username: dav.user, password: dav.password, root_folder_path: '/' }));
}, 60_000);

afterAll(async () => {
  await Promise.allSettled(Object.values(proxies).map((p) => p.close()));
  await ts?.close();
  await Promise.allSettled([ftpd?.stop(), dav?.stop()]);
});

/**
 * PUT 8 MiB (REST, or WebDAV when `davPath` is given); once `started()` says the remote is being
 * written, take the remote down and send the rest. What counts is the answer, or the reset before one.
 */
function putThenKill(path: string, proxy: SwitchProxy, started: () => boolean, davPath?: string): Promise<{ status?: number; text: string; error?: string }> {
  const u = new URL(ts.url);
  const chunk = Buffer.alloc(1 << 20, 7);
  const headers = davPath
    ? { authorization: 'Basic ' + Buffer.from(`admin:${ADMIN_PASSWORD}`).toString('base64'), 'content-length': String(8 << 20) }
    : { authorization: admin, 'file-path': encodeURIComponent(path), 'content-length': String(8 << 20) };
  return new Promise((resolve) => {
    const req = request({ host: u.hostname, port: u.port, method: 'PUT', path: davPath ?? '/api/fs/put', headers });
    let status: number | undefined;
    let text = '';
    req.on('error', (e) => resolve({ status, text, error: status === undefined ? ((e as NodeJS.ErrnoException).code ?? e.message) : undefined }));
    req.on('response', (res) => {
      status = res.statusCode;
      res.setEncoding('utf8');
      res.on('data', (d: string) => { text += d; });
      res.on('end', () => resolve({ status, text }));
      res.on('error', () => resolve({ status, text }));
    });
    req.write(Buffer.concat([chunk, chunk]), async () => {
      const until = Date.now() + 10_000;
      while (Date.now() < until && !started()) await new Promise((r) => setTimeout(r, 20));
      await new Promise((r) => setTimeout(r, 200));
      await proxy.down();
      for (let i = 2; i < 8 && !req.destroyed; i++) {
        await new Promise((r) => setTimeout(r, 50));
        if (!req.destroyed) req.write(chunk);
      }
      if (!req.destroyed) req.end();
    });
  });
}

describe('a remote storage that dies during a REST upload', () => {
  const cases = [
    ['FTP', '/ftp', () => proxies.ftp!, () => readdirSync(ftpd.dataDir).some((n) => n.startsWith('.dies.bin.tg-'))],
    // nginx spools the body in its own temp folder: the fixed 200 ms wait after 2 MiB is the cue.
    ['WebDAV', '/dav', () => proxies.dav!, () => true],
  ] as const;
  for (const [name, mount, proxy, started] of cases) {
    it(`${name}: the client gets a 5xx envelope with the storage's error, not a reset or "operation aborted"`, async () => {
      try {
        const r = await putThenKill(`${mount}/dies.bin`, proxy(), started);
        expect(r.error).toBeUndefined();
        expect(r.status).toBe(200);
        const env = JSON.parse(r.text) as { code: number; message: string };
        expect(env.code).toBeGreaterThanOrEqual(500);
        expect(env.message).not.toMatch(/operation aborted/);
        expect(env.message).toMatch(/ftp|webdav|storage backend/i);
        // The server still serves; once the remote is back, uploads there work again.
        await proxy().up();
        ok(await putFile(ts, admin, `${mount}/after.txt`, 'back'));
      } finally {
        await proxy().up();
      }
    });
  }

  it('WebDAV protocol PUT into an FTP storage: a 5xx status, not a reset', async () => {
    try {
      const started = () => readdirSync(ftpd.dataDir).some((n) => n.startsWith('.dies-dav.bin.tg-'));
      const r = await putThenKill('', proxies.ftp!, started, '/dav/ftp/dies-dav.bin');
      expect(r.error).toBeUndefined();
      expect(r.status).toBeGreaterThanOrEqual(500);
      await proxies.ftp!.up();
      ok(await putFile(ts, admin, '/ftp/after-dav.txt', 'back'));
    } finally {
      await proxies.ftp!.up();
    }
  });
});
