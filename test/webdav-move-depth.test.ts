/**
 * MOVE and the Depth header (RFC 4918 §9.9.2): a collection moves whole, so Depth 0 on one is a bad
 * request; on a file Depth means nothing and the MOVE is done (as Apache's mod_dav does). Depth 1 is
 * never a COPY or MOVE depth.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ADMIN_PASSWORD, startTestServer, type TestServer } from './harness.js';
import { davClient, type DavClient } from './clients/webdav.js';

let ts: TestServer;
let dav: DavClient;

beforeAll(async () => {
  ts = await startTestServer({ env: { TREEGATE_SFTP_ENABLE: 'false' } });
  dav = davClient(ts.url, 'admin', ADMIN_PASSWORD);
});
afterAll(async () => {
  await ts?.close();
});

const to = (p: string, depth: string) => ({ headers: { Destination: `${ts.url}/dav${p}`, Depth: depth } });

describe('MOVE with a Depth header', () => {
  it('moves a file with Depth 0', async () => {
    expect((await dav('PUT', '/md-a.txt', { body: 'a' })).status).toBe(201);
    expect((await dav('MOVE', '/md-a.txt', to('/md-b.txt', '0'))).status).toBe(201);
    expect((await dav('GET', '/md-b.txt')).body).toBe('a');
    expect((await dav('GET', '/md-a.txt')).status).toBe(404);
  });

  it('refuses Depth 0 on a collection and leaves it in place', async () => {
    expect((await dav('MKCOL', '/md-dir')).status).toBe(201);
    expect((await dav('PUT', '/md-dir/x.txt', { body: 'x' })).status).toBe(201);
    expect((await dav('MOVE', '/md-dir/', to('/md-dir2/', '0'))).status).toBe(400);
    expect((await dav('GET', '/md-dir/x.txt')).body).toBe('x');
    expect((await dav('PROPFIND', '/md-dir2/', { headers: { Depth: '0' } })).status).toBe(404);
  });

  it('refuses Depth 1 for MOVE and COPY alike', async () => {
    expect((await dav('PUT', '/md-c.txt', { body: 'c' })).status).toBe(201);
    expect((await dav('MOVE', '/md-c.txt', to('/md-d.txt', '1'))).status).toBe(400);
    expect((await dav('COPY', '/md-c.txt', to('/md-d.txt', '1'))).status).toBe(400);
    expect((await dav('GET', '/md-c.txt')).body).toBe('c');
  });
});
