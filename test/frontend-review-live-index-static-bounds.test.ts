/**
 * Code review of the front-end hosting, second pass: defects found by reading
 * protocols/rest/routes/frontend.ts and protocols/rest/frontend/*, each shown against a running server.
 */
import { connect } from 'node:net';
import { appendFile, mkdir, rename, rm, symlink, unlink, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestServer, type TestServer } from './harness.js';
import { davRequest } from './clients/webdav.js';
import { INDEX_HTML, makeFakeFrontend, type FakeFrontend } from './frontend-fixture.js';

/** One raw request (any method, no redirects followed). */
const raw = (base: string, path: string, method = 'GET', headers: Record<string, string> = {}) => davRequest(base, method, path, { headers });

let fe: FakeFrontend;
let srv: TestServer;

beforeAll(async () => {
  fe = await makeFakeFrontend();
  srv = await startTestServer({ env: { TREEGATE_DIST_DIR: fe.dist, TREEGATE_SFTP_ENABLE: 'false' } });
  await srv.running.core.settings.save({ site_title: 'Rebuilt & Co' });
});

afterAll(async () => {
  await srv?.close();
  await rm(fe.dir, { recursive: true, force: true });
});

describe('index.html', () => {
  // A front end rebuilt in place (new hashed asset names) while the server runs: the assets are read
  // from disk on every request, so an index.html read once at start named assets that no longer exist
  // and the whole UI stayed blank until a restart.
  it('follows a rebuilt index.html, and keeps the last one while it is empty or missing mid-rebuild', async () => {
    const before = await raw(srv.url, '/@login');
    expect(before.body).toContain('/assets/index.js');
    const rebuilt = INDEX_HTML.replace('/assets/index.js', '/assets/index-NEWHASH.js');
    await writeFile(join(fe.dist, 'index.html'), rebuilt);
    const after = await raw(srv.url, '/@login');
    expect(after.status).toBe(200);
    expect(after.body).toContain('/assets/index-NEWHASH.js');
    expect(after.body).toContain('<title>Rebuilt &#38; Co</title>'); // placeholders still filled
    await writeFile(join(fe.dist, 'index.html'), ''); // truncated, not yet written
    const empty = await raw(srv.url, '/foo');
    expect([empty.status, empty.body.includes('/assets/index-NEWHASH.js')]).toEqual([200, true]);
    await unlink(join(fe.dist, 'index.html'));
    const gone = await raw(srv.url, '/foo');
    expect(gone.status).toBe(200);
    expect(gone.body).toContain('/assets/index-NEWHASH.js');
  });
});

describe('static folders', () => {
  // A build whose files are links into a content-addressed store (names without extension): the type
  // came from the link target's name, so browsers refused the module script (application/octet-stream).
  it('take the content type from the requested name, not from a symlink target', async () => {
    await mkdir(join(fe.dist, 'blobs'), { recursive: true });
    await writeFile(join(fe.dist, 'blobs', '5f2a9c'), 'console.log(1)');
    await symlink(join(fe.dist, 'blobs', '5f2a9c'), join(fe.dist, 'assets', 'entry-5f2a9c.js'));
    const r = await raw(srv.url, '/assets/entry-5f2a9c.js');
    expect(r.status).toBe(200);
    expect(r.body).toBe('console.log(1)');
    expect(r.headers['content-type']).toBe('text/javascript; charset=utf-8');
  });

  // A file that grows while it is sent (a build writing into dist, a media file under /static):
  // the body ran past the Content-Length already sent, and on a keep-alive connection the extra bytes
  // were read by the client as the start of the next response.
  it('never send more bytes than the Content-Length they announced', async () => {
    const size = 24 * 1024 * 1024;
    await writeFile(join(fe.dist, 'static', 'big.bin'), Buffer.alloc(size, 1));
    const { port } = new URL(srv.url);
    const received = await new Promise<Buffer>((resolve, reject) => {
      const chunks: Buffer[] = [];
      const sock = connect(Number(port), '127.0.0.1', () => sock.write('GET /static/big.bin HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n'));
      sock.once('data', () => {
        // The server has started sending: grow the file before it reaches the old end.
        sock.pause();
        appendFile(join(fe.dist, 'static', 'big.bin'), Buffer.alloc(1024 * 1024, 2)).then(() => sock.resume(), reject);
      });
      sock.on('data', (c: Buffer) => chunks.push(c));
      sock.on('end', () => resolve(Buffer.concat(chunks)));
      sock.on('error', reject);
    });
    const headEnd = received.indexOf('\r\n\r\n');
    const head = received.subarray(0, headEnd).toString('latin1');
    expect(head).toMatch(/^HTTP\/1\.1 200/);
    expect(head).toContain(`content-length: ${size}`);
    expect(received.length - headEnd - 4).toBe(size);
  });
});

describe('without dist_dir, under a base path', () => {
  it('the page at /tg links /ping under the base path', async () => {
    const tg = await startTestServer({ env: { TREEGATE_SITE_URL: 'http://nas.example/tg', TREEGATE_SFTP_ENABLE: 'false' } });
    try {
      for (const at of ['/tg', '/tg/']) {
        const r = await raw(tg.url, at);
        expect(r.body).toContain('The API is up');
        const href = /<a href="([^"]*)"><code>\/ping<\/code>/.exec(r.body)?.[1];
        expect(href, at).toBeDefined();
        expect(new URL(href!, `http://nas.example${at}`).pathname, at).toBe('/tg/ping');
      }
    } finally {
      await tg.close();
    }
  });
});

describe('dist_dir as a symlink to the current release', () => {
  // The usual deploy: build into a new folder, point the link at it, delete the old one. The server
  // resolved the link once at start, so it went on serving the old release's page while its assets
  // were gone (a blank UI until a restart).
  it('follows the link when it is switched to a new release', async () => {
    const v1 = await makeFakeFrontend();
    const v2 = join(v1.dir, 'v2');
    await mkdir(join(v2, 'assets'), { recursive: true });
    await writeFile(join(v2, 'index.html'), INDEX_HTML.replace('/assets/index.js', '/assets/index-V2.js'));
    await writeFile(join(v2, 'assets', 'index-V2.js'), 'v2()');
    await symlink(join(v1.dir, 'secret.txt'), join(v2, 'assets', 'escape.txt')); // out of v2
    const current = join(v1.dir, 'current');
    await symlink(v1.dist, current);
    const s = await startTestServer({ env: { TREEGATE_DIST_DIR: current, TREEGATE_SFTP_ENABLE: 'false' } });
    try {
      expect((await raw(s.url, '/')).body).toContain('/assets/index.js');
      await symlink(v2, current + '.new');
      await rename(current + '.new', current); // atomic switch
      await rm(v1.dist, { recursive: true, force: true });
      const page = await raw(s.url, '/');
      expect(page.status).toBe(200);
      expect(page.body).toContain('/assets/index-V2.js');
      const js = await raw(s.url, '/assets/index-V2.js');
      expect([js.status, js.body]).toEqual([200, 'v2()']);
      expect((await raw(s.url, '/assets/escape.txt')).status).toBe(404); // still no way out
    } finally {
      await s.close();
      await rm(v1.dir, { recursive: true, force: true });
    }
  });
});

describe('static folders, preconditions', () => {
  // Go's FileServer (AList's static folders) checks them first; a client resuming a download of a
  // file that changed since (Range with If-Unmodified-Since) got the new file's tail spliced onto
  // the old head.
  it('answer 412 to a failed If-Match or If-Unmodified-Since', async () => {
    await writeFile(join(fe.dist, 'static', 'clip.bin'), 'new content');
    const head = await raw(srv.url, '/static/clip.bin', 'HEAD');
    const etag = String(head.headers.etag);
    const stale = await raw(srv.url, '/static/clip.bin', 'GET', { range: 'bytes=4-', 'if-unmodified-since': 'Sun, 06 Nov 1994 08:49:37 GMT' });
    expect(stale.status).toBe(412);
    expect(stale.body).not.toContain('content');
    expect((await raw(srv.url, '/static/clip.bin', 'GET', { 'if-match': '"other"' })).status).toBe(412);
    const fresh = await raw(srv.url, '/static/clip.bin', 'GET', { range: 'bytes=4-', 'if-match': etag });
    expect([fresh.status, fresh.body]).toEqual([206, 'content']);
  });
});
