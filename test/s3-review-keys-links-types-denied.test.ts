/**
 * Code-review probe of the S3 driver through the whole server: each test proves one defect found by
 * reading drivers/s3/, against s3rver on loopback.
 */
import { createServer, request } from 'node:http';
import { CreateBucketCommand, HeadObjectCommand, ListObjectsCommand, PutObjectCommand, S3Client } from '@aws-sdk/client-s3';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ADMIN_PASSWORD, type TestServer } from './harness.js';
import { ok, putFile, startRestServer } from './fs-helpers.js';
import { createStorage, startRemoteServers, type RemoteServers } from './remote-servers.js';

let ts: TestServer;
let admin: string;
let remote: RemoteServers<'S3'>;
let s3: S3Client;
const davAuth = 'Basic ' + Buffer.from(`admin:${ADMIN_PASSWORD}`).toString('base64');

beforeAll(async () => {
  remote = await startRemoteServers(['S3'] as const);
  ts = await startRestServer();
  admin = await ts.login();
  ok(await createStorage(ts, admin, '/s3', 'S3', remote.additionOf('S3')));
  s3 = new S3Client({
    endpoint: `http://127.0.0.1:${remote.s3.port}`, region: 'us-east-1', forcePathStyle: true,
    credentials: { accessKeyId: remote.s3.accessKeyId, secretAccessKey: remote.s3.secretAccessKey },
  });
}, 60_000);

afterAll(async () => {
  s3?.destroy();
  await ts?.close();
  await remote?.stop();
});

/** Put objects straight into the bucket, behind treegate's back (as another S3 client would). */
const seedKeys = async (keys: string[]) => {
  for (const Key of keys) await s3.send(new PutObjectCommand({ Bucket: remote.s3.bucket, Key, Body: 'x' }));
};
const bucketKeys = async (Prefix: string) =>
  ((await s3.send(new ListObjectsCommand({ Bucket: remote.s3.bucket, Prefix }))).Contents ?? []).map((o) => o.Key!).sort();
const list = (path: string) =>
  ts.api<{ content: Array<{ name: string; is_dir: boolean }> | null }>('/api/fs/list', { token: admin, body: { path, refresh: true } });

function propfind(path: string): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const req = request(`${ts.url}/dav${path}`, { method: 'PROPFIND', headers: { authorization: davAuth, depth: '1' } }, (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (c: string) => { body += c; });
      res.on('end', () => resolve({ status: res.statusCode!, body }));
    });
    req.on('error', reject);
    req.end();
  });
}

describe('S3: keys a virtual path cannot carry', () => {
  it('a folder holding a key with a backslash (as Windows tools write) still lists over REST and WebDAV; that key is left out', async () => {
    // (s3rver keeps keys as host paths, so it cannot hold `.`/`..` segments: only the backslash is shown.)
    await seedKeys(['bs/ok.txt', 'bs/win\\file.txt', 'bs/sub\\dir/inner.txt']);
    const r = await list('/s3/bs');
    ok(r);
    expect((r.data!.content ?? []).map((e) => e.name)).toEqual(['ok.txt']);
    const dav = await propfind('/s3/bs');
    expect(dav.status).toBe(207);
    expect(dav.body).toContain('ok.txt');
    // The folder itself is still whole: removing it removes every key below it.
    ok(await ts.api('/api/fs/remove', { token: admin, body: { dir: '/s3', names: ['bs'] } }));
    expect(await bucketKeys('bs/')).toEqual([]);
  });
});

describe('S3: links through a custom host', () => {
  it('remove_bucket drops the bucket from the path, not from a host name that contains it', async () => {
    // A CDN named after its bucket (bucket `media` behind `media.example.com`) is common; here the
    // bucket is `localhost` behind a CDN at http://localhost:<port> that maps /<key> to /localhost/<key>.
    await s3.send(new CreateBucketCommand({ Bucket: 'localhost' }));
    const cdn = createServer((req, res) => {
      const up = request({ host: '127.0.0.1', port: remote.s3.port, path: '/localhost' + req.url }, (r) => { res.writeHead(r.statusCode!, r.headers); r.pipe(res); });
      up.on('error', () => res.destroy());
      up.end();
    });
    await new Promise<void>((r) => cdn.listen(0, 'localhost', r));
    try {
      const port = (cdn.address() as { port: number }).port;
      ok(await createStorage(ts, admin, '/cdn', 'S3', { ...remote.additionOf('S3'), bucket: 'localhost', custom_host: `http://localhost:${port}`, remove_bucket: true }));
      ok(await putFile(ts, admin, '/cdn/dir/photo.txt', 'through the cdn'));
      const got = await ts.api<{ raw_url: string }>('/api/fs/get', { token: admin, body: { path: '/cdn/dir/photo.txt' } });
      ok(got);
      expect(got.data!.raw_url).toBe(`http://localhost:${port}/dir/photo.txt`);
      const res = await fetch(got.data!.raw_url);
      expect(await res.text()).toBe('through the cdn');
    } finally {
      cdn.closeAllConnections();
      await new Promise((r) => cdn.close(r));
    }
  });
});

describe('S3: links that name the file', () => {
  it("add_filename_to_disposition escapes ' ( ) * as RFC 5987 asks (as REST downloads do), so strict browsers keep the name", async () => {
    ok(await createStorage(ts, admin, '/named', 'S3', { ...remote.additionOf('S3'), root_folder_path: '/named', add_filename_to_disposition: true }));
    ok(await putFile(ts, admin, "/named/it's (1)*.txt", 'x'));
    const got = await ts.api<{ raw_url: string }>('/api/fs/get', { token: admin, body: { path: "/named/it's (1)*.txt" } });
    ok(got);
    const res = await fetch(got.data!.raw_url);
    expect(await res.text()).toBe('x');
    expect(res.headers.get('content-disposition')).toBe("attachment; filename*=UTF-8''it%27s%20%281%29%2A.txt");
  });
});

describe('S3: uploads', () => {
  it('an uploaded object gets the Content-Type of its name (as AList sets it), so its link opens in a browser', async () => {
    const files = { 'page.html': 'text/html; charset=utf-8', 'doc.pdf': 'application/pdf', 'clip.mp4': 'video/mp4', 'blob.bin': 'application/octet-stream' };
    for (const name of Object.keys(files)) ok(await putFile(ts, admin, `/s3/types/${name}`, 'x'));
    const got = Object.fromEntries(await Promise.all(Object.keys(files).map(async (name) =>
      [name, (await s3.send(new HeadObjectCommand({ Bucket: remote.s3.bucket, Key: `types/${name}` }))).ContentType])));
    expect(got).toEqual(files);
    const link = await ts.api<{ raw_url: string }>('/api/fs/get', { token: admin, body: { path: '/s3/types/doc.pdf' } });
    expect((await fetch(link.data!.raw_url)).headers.get('content-type')).toBe('application/pdf');
  });
});

describe('S3: refusals', () => {
  it('an action the bucket policy refuses (AccessDenied) is a 403 refusal, not a 500 blaming the credentials', async () => {
    // s3rver enforces no policies: a loopback proxy answers deletes as S3 does for a key allowed to
    // read and write but not delete (s3:DeleteObject denied), and passes everything else on.
    const denied = '<?xml version="1.0" encoding="UTF-8"?><Error><Code>AccessDenied</Code><Message>Access Denied</Message></Error>';
    const proxy = createServer((req, res) => {
      if (req.method === 'DELETE') {
        res.writeHead(403, { 'content-type': 'application/xml' }).end(denied);
        return;
      }
      if (req.method === 'POST' && /[?&]delete(=|&|$)/.test(req.url!)) { // DeleteObjects: refusals per key, in a 200
        req.resume();
        res.writeHead(200, { 'content-type': 'application/xml' }).end('<?xml version="1.0" encoding="UTF-8"?><DeleteResult>'
          + '<Error><Key>keep/a.txt</Key><Code>AccessDenied</Code><Message>Access Denied</Message></Error></DeleteResult>');
        return;
      }
      const up = request({ host: '127.0.0.1', port: remote.s3.port, method: req.method, path: req.url, headers: req.headers }, (r) => { res.writeHead(r.statusCode!, r.headers); r.pipe(res); });
      up.on('error', () => res.destroy());
      req.pipe(up);
    });
    await new Promise<void>((r) => proxy.listen(0, '127.0.0.1', r));
    try {
      ok(await createStorage(ts, admin, '/nodelete', 'S3', remote.additionOf('S3', (proxy.address() as { port: number }).port)));
      ok(await putFile(ts, admin, '/nodelete/keep/a.txt', 'x'));
      const r = await ts.api('/api/fs/remove', { token: admin, body: { dir: '/nodelete/keep', names: ['a.txt'] } });
      expect(r.code).toBe(403);
      expect(r.message).toMatch(/S3 refused it \(AccessDenied\)/);
      expect(r.message).not.toMatch(/access_key_id/);
      const dir = await ts.api('/api/fs/remove', { token: admin, body: { dir: '/nodelete', names: ['keep'] } });
      expect([dir.code, dir.message]).toEqual([403, 'S3 refused to delete 1 object(s): AccessDenied']);
      expect(await bucketKeys('keep/')).toEqual(['keep/', 'keep/a.txt']);
    } finally {
      proxy.closeAllConnections();
      await new Promise((r) => proxy.close(r));
    }
  });
});

describe('S3: removing a large folder', () => {
  it('deletes each page of keys as it is listed, never holding the whole folder (was: list all, then delete)', async () => {
    // A proxy that notes each listing and each DeleteObjects, in order, and passes them on.
    const seen: string[] = [];
    const proxy = createServer((req, res) => {
      if (req.method === 'POST' && /[?&]delete(=|&|$)/.test(req.url!)) seen.push('delete');
      // Listings of the folder's keys (not the existence checks, which ask for one key).
      else if (req.method === 'GET' && /[?&]prefix=big%2F/.test(req.url!) && !/[?&]max-keys=1(&|$)/.test(req.url!)) seen.push('list');
      const up = request({ host: '127.0.0.1', port: remote.s3.port, method: req.method, path: req.url, headers: req.headers }, (r) => { res.writeHead(r.statusCode!, r.headers); r.pipe(res); });
      up.on('error', () => res.destroy());
      req.pipe(up);
    });
    await new Promise<void>((r) => proxy.listen(0, '127.0.0.1', r));
    try {
      const keys = Array.from({ length: 1001 }, (_, i) => `big/${String(i).padStart(4, '0')}.txt`);
      for (let i = 0; i < keys.length; i += 50) await seedKeys(keys.slice(i, i + 50));
      ok(await createStorage(ts, admin, '/paged', 'S3', remote.additionOf('S3', (proxy.address() as { port: number }).port)));
      seen.length = 0;
      ok(await ts.api('/api/fs/remove', { token: admin, body: { dir: '/paged', names: ['big'] } }));
      // Two pages of at most 1,000 keys: each deleted before the next is listed.
      expect(seen).toEqual(['list', 'delete', 'list', 'delete']);
      expect(await bucketKeys('big/')).toEqual([]);
    } finally {
      proxy.closeAllConnections();
      await new Promise((r) => proxy.close(r));
    }
  }, 60_000);
});
