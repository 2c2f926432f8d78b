/**
 * Code review of the front end's static file serving (protocols/rest/frontend/static.ts): defects
 * found by reading it, each shown against a running server.
 */
import { createRequire, syncBuiltinESMExports } from 'node:module';
import { connect } from 'node:net';
import { rename, rm, truncate, unlink, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestServer, type TestServer } from './harness.js';
import { davRequest } from './clients/webdav.js';
import { makeFakeFrontend, type FakeFrontend } from './frontend-fixture.js';

const raw = (base: string, path: string, method = 'GET', headers: Record<string, string> = {}) => davRequest(base, method, path, { headers });

let fe: FakeFrontend;
let srv: TestServer;

beforeAll(async () => {
  fe = await makeFakeFrontend();
  srv = await startTestServer({ env: { TREEGATE_DIST_DIR: fe.dist, TREEGATE_SFTP_ENABLE: 'false' } });
});

afterAll(async () => {
  await srv?.close();
  await rm(fe.dir, { recursive: true, force: true });
});

describe('static folders', () => {
  /**
   * Run `fn` while `fsp[name]` calls `after(path)` once it has returned for `file`: a rebuild's
   * change to the file made to land deterministically right after the server's look-up of it.
   */
  async function afterLookup<T>(name: 'stat' | 'realpath', file: string, after: () => Promise<unknown>, fn: () => Promise<T>): Promise<T> {
    const fsp = createRequire(import.meta.url)('node:fs/promises') as Record<string, unknown>;
    const real = fsp[name] as (...a: unknown[]) => Promise<unknown>;
    fsp[name] = async (...a: unknown[]) => {
      const out = await real(...a);
      if (String(a[0]) === file) await after();
      return out;
    };
    syncBuiltinESMExports();
    try {
      return await fn();
    } finally {
      fsp[name] = real;
      syncBuiltinESMExports();
    }
  }

  // An asset deleted by a rebuild between its look-up (stat) and its open: the read stream's ENOENT
  // went to the JSON error handler, which answered HTTP 200 with an error envelope under the asset's
  // `Cache-Control: public, max-age=15552000` and ETag, so browsers kept the error as the script for
  // 180 days. Replaced in between, the new file's bytes went out cut to the old one's length under
  // the old one's ETag. The file is now opened first and described from its handle.
  it('never answer a file that changed after its look-up with its cache headers', async () => {
    const file = join(fe.dist, 'assets', 'vanishing.js');
    for (const [change, when] of [['deleted', 'stat'], ['replaced', 'stat'], ['deleted', 'realpath']] as const) {
      await writeFile(file, 'vanish()');
      const r = await afterLookup(when, file, () => change === 'deleted'
        ? unlink(file)
        : writeFile(file + '.new', 'replacement-is-longer()').then(() => rename(file + '.new', file)), () => raw(srv.url, '/assets/vanishing.js'));
      const what = `${change} after ${when}`;
      if (r.status === 200) {
        expect(['vanish()', 'replacement-is-longer()'], what).toContain(r.body);
        expect(r.headers['content-type'], what).toBe('text/javascript; charset=utf-8');
        expect(r.headers.etag, what).toMatch(new RegExp(`-${r.body.length.toString(16)}"$`));
      } else {
        expect([r.status, r.headers['cache-control'], r.headers.etag], what).toEqual([404, undefined, undefined]);
      }
    }
  });

  // An asset truncated while it is sent (a rebuild rewriting it in place): the read stream hit the
  // new end of file and the response ended short of its Content-Length with the connection kept
  // open, so a keep-alive client waited for the missing bytes and read the next response's bytes as
  // them (here a pipelined request's answer spliced into the asset). The download route cuts the
  // connection in that case; static files now do too.
  it('cut the connection when a file shrinks below the Content-Length sent', async () => {
    const size = 24 * 1024 * 1024;
    const file = join(fe.dist, 'static', 'shrinking.bin');
    await writeFile(file, Buffer.alloc(size, 1));
    const { port } = new URL(srv.url);
    const received = await new Promise<Buffer>((resolve, reject) => {
      const chunks: Buffer[] = [];
      const sock = connect(Number(port), '127.0.0.1', () => sock.write(
        'GET /static/shrinking.bin HTTP/1.1\r\nHost: x\r\n\r\n' +
        'GET /assets/index.js HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n'));
      sock.once('data', () => {
        // The server has started sending: shrink the file before it reaches the end.
        sock.pause();
        truncate(file, 0).then(() => sock.resume(), reject);
      });
      sock.on('data', (c: Buffer) => chunks.push(c));
      sock.on('close', () => resolve(Buffer.concat(chunks)));
      sock.on('error', () => undefined); // a reset is an acceptable way to cut it
    });
    const headEnd = received.indexOf('\r\n\r\n');
    expect(received.subarray(0, headEnd).toString('latin1')).toContain(`content-length: ${size}`);
    const body = received.subarray(headEnd + 4);
    expect(body.length).toBeLessThan(size); // it did shrink mid-body
    expect(body.includes('HTTP/1.1')).toBe(false); // and no other response was read as its bytes
    expect(body.every((b) => b === 1)).toBe(true);
  });
});
