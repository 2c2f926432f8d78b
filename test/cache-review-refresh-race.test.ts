/**
 * The listing cache (src/vfs/cache.ts) under a refresh: found reviewing the REST read routes, shown
 * against the real server over loopback (a WebDav storage mounting a second treegate).
 */
import { createServer, request, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ADMIN_PASSWORD, type TestServer } from './harness.js';
import { list, names, ok, putFile, startRestServer } from './fs-helpers.js';

let ts: TestServer;
let admin: string;

beforeAll(async () => {
  ts = await startRestServer();
  admin = await ts.login();
}, 30_000);
afterAll(async () => ts?.close());

/**
 * A loopback HTTP relay to `target` that can hold back the answer to the next folder listing
 * (PROPFIND with Depth 1): the answer is fetched from the target at once (so it shows the folder as
 * it was then) but delivered only when released.
 */
function relay(target: string): Promise<{ url: string; server: Server; holdNext: () => { held: Promise<void>; release: () => void } }> {
  const t = new URL(target);
  let gate: { onHeld: () => void; released: Promise<void> } | undefined;
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const mine = req.method === 'PROPFIND' && req.headers.depth === '1' ? gate : undefined;
      if (mine) gate = undefined;
      const up = request({ host: t.hostname, port: t.port, method: req.method, path: req.url, headers: { ...req.headers, host: t.host } }, (ur) => {
        const body: Buffer[] = [];
        ur.on('data', (c: Buffer) => body.push(c));
        ur.on('end', async () => {
          if (mine) {
            mine.onHeld();
            await mine.released;
          }
          res.writeHead(ur.statusCode ?? 502, ur.headers);
          res.end(Buffer.concat(body));
        });
      });
      up.end(Buffer.concat(chunks));
    });
  });
  return new Promise((resolve) => {
    server.listen(0, '127.0.0.1', () => {
      const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
      resolve({
        url, server,
        holdNext: () => {
          let onHeld!: () => void;
          let release!: () => void;
          const held = new Promise<void>((r) => (onHeld = r));
          gate = { onHeld, released: new Promise<void>((r) => (release = r)) };
          return { held, release };
        },
      });
    });
  });
}

describe('listing cache and refresh', () => {
  it('a plain listing that was in flight when a refresh started does not put its older answer back in the cache', async () => {
    const remote = await startRestServer();
    const r = await relay(remote.url);
    try {
      const remoteAdmin = await remote.login();
      ok(await remote.api('/api/fs/mkdir', { token: remoteAdmin, body: { path: '/shared' } }));
      ok(await putFile(remote, remoteAdmin, '/shared/old.txt', 'o'));
      ok(await ts.api('/api/admin/storage/create', {
        token: admin,
        body: {
          mount_path: '/remote', driver: 'WebDav', cache_expiration: 30,
          addition: JSON.stringify({ address: `${r.url}/dav`, username: 'admin', password: ADMIN_PASSWORD, root_folder_path: '/shared' }),
        },
      }));
      // A plain listing whose answer (without new.txt) is held on its way back.
      const gate = r.holdNext();
      const slow = list(ts, admin, '/remote');
      await gate.held;
      // The folder changes on the remote; the user asks for a refresh, which answers at once.
      ok(await putFile(remote, remoteAdmin, '/shared/new.txt', 'n'));
      const fresh = await list(ts, admin, '/remote', { refresh: true });
      ok(fresh);
      expect(fresh.data!.content.map((e) => e.name).sort()).toEqual(['new.txt', 'old.txt']);
      // Only now does the older answer arrive.
      gate.release();
      ok(await slow);
      // It stored itself over the refreshed listing: new.txt was gone again for 30 minutes.
      expect(await names(ts, admin, '/remote')).toEqual(['new.txt', 'old.txt']);
    } finally {
      await remote.close();
      await new Promise((res) => r.server.close(res));
    }
  }, 30_000);
});
