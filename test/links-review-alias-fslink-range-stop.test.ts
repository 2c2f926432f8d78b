/**
 * Code-review findings on downloads and links (/d, /p, fs/link), each proven against the real
 * server on loopback.
 */
import { randomBytes } from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { signWith } from '../src/sign.js';
import type { TestServer } from './harness.js';
import { ok, putFile, seed, startRestServer } from './fs-helpers.js';
import { createStorage, startRemoteServers } from './remote-servers.js';

let ts: TestServer;
let admin: string;

beforeAll(async () => {
  ts = await startRestServer();
  admin = await ts.login();
});
afterAll(async () => ts?.close());

describe('fs/link', () => {
  it('the link it gives for a file of an Alias storage (served by treegate) downloads the file', async () => {
    await seed(ts, admin, { '/src/a.bin': 'alias-bytes' });
    ok(await ts.api('/api/admin/storage/create', { token: admin, body: { mount_path: '/al', driver: 'Alias', addition: JSON.stringify({ paths: '/src' }) } }));
    const r = await ts.api<{ url: string; header: unknown }>('/api/fs/link', { token: admin, body: { path: '/al/a.bin' } });
    ok(r);
    const res = await fetch(r.data!.url);
    expect(res.status).toBe(200);
    expect(await res.text()).toBe('alias-bytes');
  });
});

/**
 * An HTTP proxy to `target` that drops the Range header of presigned GETs (an S3-compatible server
 * that ignores Range answers 200 with the whole object), counting the body bytes it forwards.
 */
async function rangeIgnoringProxy(target: number) {
  const gets: Array<{ forwarded: number; closed: Promise<void> }> = [];
  const server = http.createServer((req, res) => {
    const presigned = req.method === 'GET' && (req.url ?? '').includes('X-Amz-Signature');
    const headers = { ...req.headers };
    if (presigned) delete headers.range;
    const up = http.request({ host: '127.0.0.1', port: target, method: req.method, path: req.url, headers }, (ur) => {
      res.writeHead(ur.statusCode ?? 502, ur.headers);
      if (!presigned) return void ur.pipe(res);
      const rec = { forwarded: 0, closed: new Promise<void>((r) => res.once('close', () => r())) };
      gets.push(rec);
      ur.on('data', (c: Buffer) => (rec.forwarded += c.length));
      ur.pipe(res);
    });
    res.once('close', () => up.destroy());
    up.once('error', () => res.destroy());
    req.pipe(up);
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  return { port: (server.address() as AddressInfo).port, gets, close: () => new Promise<void>((r) => { server.closeAllConnections(); server.close(() => r()); }) };
}

describe('/p streaming a url link from a server that ignores Range', () => {
  it('serves the asked bytes and stops reading the upstream once they are sent', async () => {
    const remote = await startRemoteServers(['S3']);
    const proxy = await rangeIgnoringProxy(remote.portOf('S3'));
    try {
      ok(await createStorage(ts, admin, '/s3np', 'S3', remote.additionOf('S3', proxy.port), { web_proxy: true }));
      const big = randomBytes(32 << 20); // far past every socket buffer on the way
      ok(await putFile(ts, admin, '/s3np/big.bin', big));
      const url = `${ts.url}/p/s3np/big.bin?sign=${signWith(ts.running.core.settings.get('token'), '/s3np/big.bin', 0)}`;
      const res = await fetch(url, { headers: { range: 'bytes=10-19' } });
      expect(res.status).toBe(206);
      expect(Buffer.from(await res.arrayBuffer()).equals(big.subarray(10, 20))).toBe(true);
      const get = proxy.gets.at(-1)!;
      await get.closed;
      expect(get.forwarded).toBeLessThan(big.length);
    } finally {
      await proxy.close();
      await remote.stop();
    }
  }, 60_000);
});
