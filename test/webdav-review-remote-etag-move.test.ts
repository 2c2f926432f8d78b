/**
 * Code review of the WebDAV server over the remote drivers (S3, SFTP, FTP, WebDav): each test proves
 * one defect found by reading where the method handlers meet the drivers, against real servers on
 * loopback. PUT answered an ETag made from treegate's clock (S3, FTP, WebDav), which the stored file
 * never had: the client's next If-Match with it failed 412. A MOVE of an S3 folder without marker
 * objects to another storage was done, then answered 404 (the folder went with its last member).
 */
import { mkdir, readdir, readFile } from 'node:fs/promises';
import { createServer, request } from 'node:http';
import { join } from 'node:path';
import { PutObjectCommand, S3Client } from '@aws-sdk/client-s3';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ADMIN_PASSWORD, type TestServer } from './harness.js';
import { ok, startRestServer } from './fs-helpers.js';
import { davClient, type DavClient } from './clients/webdav.js';
import { startVsftpd, type Vsftpd } from '../drivers/testing/vsftpd.js';
import { createStorage, startRemoteServers, additionFor, type RemoteServers } from './remote-servers.js';

let ts: TestServer;
let admin: string;
let dav: DavClient;
let remote: RemoteServers<'S3' | 'SFTP' | 'WebDav'>;
let ftpd: Vsftpd;

beforeAll(async () => {
  [remote, ftpd] = await Promise.all([startRemoteServers(['S3', 'SFTP', 'WebDav'] as const), startVsftpd()]);
  ts = await startRestServer();
  admin = await ts.login();
  dav = davClient(ts.url, 'admin', ADMIN_PASSWORD);
  for (const d of ['S3', 'SFTP', 'WebDav'] as const) ok(await createStorage(ts, admin, `/${d.toLowerCase()}`, d, remote.additionOf(d)));
  ok(await createStorage(ts, admin, '/ftp', 'FTP', additionFor.FTP(ftpd)));
}, 60_000);

afterAll(async () => {
  await ts?.close();
  await Promise.allSettled([remote?.stop(), ftpd?.stop()]);
});

const etagIn = (xml: string) => /<D:getetag>([^<]*)<\/D:getetag>/.exec(xml)?.[1]?.replace(/&quot;/g, '"');

describe('the ETag a PUT answers', () => {
  it.each(['/s3', '/ftp', '/webdav'])('%s: is the one the stored file then has, so If-Match with it is not 412', async (m) => {
    const put = await dav('PUT', `${m}/etag.txt`, { body: 'first version' });
    expect(put.status).toBe(201);
    const head = await dav('HEAD', `${m}/etag.txt`);
    expect(head.headers.etag).toBe(put.headers.etag);
    const pf = await dav('PROPFIND', `${m}/etag.txt`, { headers: { depth: '0' } });
    expect(etagIn(pf.body)).toBe(put.headers.etag);
    // A client's lost-update guard: the next save names the version it saved last.
    const again = await dav('PUT', `${m}/etag.txt`, { body: 'second version', headers: { 'if-match': String(put.headers.etag) } });
    expect(again.status).toBe(204);
  });
});

/** Objects written straight into the bucket, as other S3 tools do: no folder marker objects. */
async function putObjects(keys: string[]): Promise<void> {
  const c = new S3Client({
    endpoint: `http://127.0.0.1:${remote.s3.port}`, region: 'us-east-1', forcePathStyle: true,
    credentials: { accessKeyId: remote.s3.accessKeyId, secretAccessKey: remote.s3.secretAccessKey },
  });
  try {
    for (const Key of keys) await c.send(new PutObjectCommand({ Bucket: remote.s3.bucket, Key, Body: Key }));
  } finally {
    c.destroy();
  }
}

describe('MOVE of an S3 folder to another storage', () => {
  it.each(['/sftp', '/ftp', '/webdav'])('a folder without marker objects (written by another S3 tool) moves to %s with 201', async (to) => {
    const name = `tool-made-${to.slice(1)}`;
    await putObjects([`${name}/a.txt`, `${name}/sub/b.txt`]);
    const r = await dav('MOVE', `/s3/${name}`, { headers: { destination: `/dav${to}/${name}` } });
    expect(r.status).toBe(201);
    expect((await dav('PROPFIND', `/s3/${name}`, { headers: { depth: '0' } })).status).toBe(404);
    const b = await dav('GET', `${to}/${name}/sub/b.txt`);
    expect([b.status, b.body]).toEqual([200, `${name}/sub/b.txt`]);
  });
});

describe('a Finder save (decomposed name) while the remote stumbles on the stored name\'s lookup', () => {
  it('fails with the remote\'s error instead of writing a second, identical-looking file', async () => {
    // A proxy in front of the WebDav remote that answers 502 to PROPFINDs of the composed name
    // while `failing` (a remote hiccup), and passes everything else on.
    const nfc = 'caf\u00e9.txt';
    let failing = false;
    const proxy = createServer((req, res) => {
      if (failing && req.method === 'PROPFIND' && decodeURIComponent(req.url!).endsWith(nfc)) return void res.writeHead(502).end();
      const up = request({ host: '127.0.0.1', port: remote.dav.port, method: req.method, path: req.url, headers: req.headers }, (r) => { res.writeHead(r.statusCode!, r.headers); r.pipe(res); });
      up.on('error', () => res.destroy());
      req.pipe(up);
    });
    await new Promise<void>((r) => proxy.listen(0, '127.0.0.1', r));
    try {
      await mkdir(join(remote.dav.dataDir, 'finder'));
      ok(await createStorage(ts, admin, '/hiccup', 'WebDav', { ...remote.additionOf('WebDav', (proxy.address() as { port: number }).port), root_folder_path: '/finder' }));
      expect((await dav('PUT', `/hiccup/${encodeURIComponent(nfc)}`, { body: 'first' })).status).toBe(201);
      failing = true;
      const r = await dav('PUT', `/hiccup/${encodeURIComponent(nfc.normalize('NFD'))}`, { body: 'second' });
      failing = false;
      expect(r.status).toBeGreaterThanOrEqual(500);
      expect(await readdir(join(remote.dav.dataDir, 'finder'))).toEqual([nfc]);
      expect(await readFile(join(remote.dav.dataDir, 'finder', nfc), 'utf8')).toBe('first');
    } finally {
      proxy.closeAllConnections();
      await new Promise((r) => proxy.close(r));
    }
  });
});
