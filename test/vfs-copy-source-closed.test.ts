/**
 * A copy under a new name inside one storage streams the source into the driver's put (vfs-transfer.ts
 * copyAs). A put refused before it read anything left the source's read stream open: one file
 * descriptor held for good per refused copy.
 */
import { execFileSync } from 'node:child_process';
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { ADMIN_PASSWORD, startTestServer, type TestServer } from './harness.js';
import { davClient, type DavClient } from './clients/webdav.js';
import { fdsOn } from './open-fds.js';

let ts: TestServer;
let dav: DavClient;

beforeAll(async () => {
  ts = await startTestServer({ env: { TREEGATE_SFTP_ENABLE: 'false' } });
  dav = davClient(ts.url, 'admin', ADMIN_PASSWORD);
});
afterAll(async () => ts?.close());

it('a copy refused by the put closes its source', async () => {
  const storage = join(ts.dataDir, 'storage');
  const source = join(storage, 'copy-src.bin');
  await writeFile(source, Buffer.alloc(1 << 20, 7));
  // A FIFO is not served, so the copy's target looks free, and Local's put refuses to replace it
  // (not a regular file) before it reads a byte of the source.
  execFileSync('mkfifo', [join(storage, 'copy-fifo')]);
  for (let i = 0; i < 3; i++) {
    const r = await dav('COPY', '/copy-src.bin', { headers: { Destination: `${ts.url}/dav/copy-fifo`, Overwrite: 'T' } });
    expect(r.status).toBe(403);
  }
  await new Promise((r) => setTimeout(r, 200)); // a read stream opens its file asynchronously
  expect(fdsOn(source)).toBe(0);
});
