/**
 * WebDAV over one keep-alive connection, as mounted clients use it: the server remembers, per
 * connection, the Authorization header it last verified (protocols/webdav/auth.ts) and the small
 * upload bodies that have all arrived are taken whole (protocols/upload-body.ts). Neither may change
 * an answer: a password change, a disabled user or another user's header on the same connection is
 * judged as on a new one, and the connection stays usable after each upload.
 */
import { readFile } from 'node:fs/promises';
import { Agent, request } from 'node:http';
import { connect, type Socket } from 'node:net';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ADMIN_PASSWORD, startTestServer, type TestServer } from './harness.js';
import { makeUser, mkdir, ok, PERM } from './fs-helpers.js';
import { davRequest } from './clients/webdav.js';

let s: TestServer;
let admin: string;

beforeAll(async () => {
  s = await startTestServer({ env: { TREEGATE_SFTP_ENABLE: 'false' } });
  admin = await s.login();
});
afterAll(async () => {
  await s?.close();
});

const basic = (user: string, password: string) => 'Basic ' + Buffer.from(`${user}:${password}`).toString('base64');

/** Requests on one kept-alive connection; `sockets` holds every socket used (one, if kept alive). */
function connection() {
  const agent = new Agent({ keepAlive: true, maxSockets: 1 });
  const sockets = new Set<Socket>();
  const send = (method: string, path: string, authorization: string, body?: Buffer | string) =>
    new Promise<{ status: number; body: string }>((resolve, reject) => {
      const u = new URL(s.url);
      const headers: Record<string, string> = { authorization };
      if (body !== undefined) headers['content-length'] = String(Buffer.byteLength(body));
      const req = request({ host: u.hostname, port: u.port, path, method, headers, agent }, (res) => {
        let text = '';
        res.on('data', (c: Buffer) => (text += c));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, body: text }));
      });
      req.on('socket', (sock) => sockets.add(sock));
      req.on('error', reject);
      req.end(body);
    });
  return { send, sockets, close: () => agent.destroy() };
}

async function userId(name: string): Promise<number> {
  const r = await s.api<{ content: Array<{ id: number; username: string }> }>('/api/admin/user/list', { token: admin });
  return r.data!.content.find((u) => u.username === name)!.id;
}

describe('credentials on a kept-alive connection', () => {
  it('a password change refuses the old header on the same connection, and the new one is accepted', async () => {
    const token = await makeUser(s, admin, 'kaye', PERM.WEBDAV_READ);
    const c = connection();
    try {
      const old = basic('kaye', 'pw-kaye-123');
      expect((await c.send('PROPFIND', '/dav/', old)).status).toBe(207);
      expect((await c.send('PROPFIND', '/dav/', old)).status).toBe(207);
      ok(await s.api('/api/me/update', { token, body: { username: 'kaye', password: 'pw-kaye-456' } }));
      expect((await c.send('PROPFIND', '/dav/', old)).status).toBe(401);
      expect((await c.send('PROPFIND', '/dav/', basic('kaye', 'pw-kaye-456'))).status).toBe(207);
      expect(c.sockets.size).toBe(1);
    } finally {
      c.close();
    }
  });

  it('a user disabled meanwhile is refused on the same connection', async () => {
    await makeUser(s, admin, 'dora', PERM.WEBDAV_READ);
    const c = connection();
    try {
      const dora = basic('dora', 'pw-dora-123');
      expect((await c.send('PROPFIND', '/dav/', dora)).status).toBe(207);
      const id = await userId('dora');
      ok(await s.api('/api/admin/user/update', { token: admin, body: { id, username: 'dora', permission: PERM.WEBDAV_READ, base_path: '/', role: 0, disabled: true } }));
      expect((await c.send('PROPFIND', '/dav/', dora)).status).toBe(403);
      expect(c.sockets.size).toBe(1);
    } finally {
      c.close();
    }
  });

  it('another header on the same connection is its own login: a wrong password is refused, another user is that user', async () => {
    for (const home of ['/rita', '/sam']) ok(await mkdir(s, admin, home));
    await makeUser(s, admin, 'rita', PERM.WEBDAV_READ | PERM.WEBDAV_MANAGE | PERM.WRITE, '/rita');
    await makeUser(s, admin, 'sam', PERM.WEBDAV_READ | PERM.WEBDAV_MANAGE | PERM.WRITE, '/sam');
    const c = connection();
    try {
      const rita = basic('rita', 'pw-rita-123');
      expect((await c.send('PUT', '/dav/mine.txt', rita, 'rita wrote this')).status).toBe(201);
      expect((await c.send('PROPFIND', '/dav/', basic('rita', 'wrong'))).status).toBe(401);
      expect((await c.send('PUT', '/dav/mine.txt', basic('sam', 'pw-sam-123'), 'sam wrote this')).status).toBe(201);
      expect((await c.send('GET', '/dav/mine.txt', rita)).body).toBe('rita wrote this');
      expect(c.sockets.size).toBe(1);
    } finally {
      c.close();
    }
    expect(await readFile(join(s.dataDir, 'storage', 'rita', 'mine.txt'), 'utf8')).toBe('rita wrote this');
    expect(await readFile(join(s.dataDir, 'storage', 'sam', 'mine.txt'), 'utf8')).toBe('sam wrote this');
  });
});

describe('small uploads on a kept-alive connection', () => {
  it('stores each body exactly, an empty one and one of 64 KiB too, and the connection carries on', async () => {
    const c = connection();
    const auth = basic('admin', ADMIN_PASSWORD);
    const bodies = [Buffer.from('one'), Buffer.alloc(0), Buffer.alloc(64 * 1024, 7), Buffer.from('last, after the big one')];
    try {
      for (const [i, b] of bodies.entries()) expect((await c.send('PUT', `/dav/ka-${i}.bin`, auth, b)).status).toBe(201);
      for (const [i, b] of bodies.entries()) expect((await c.send('PUT', `/dav/ka-${i}.bin`, auth, b)).status).toBe(204);
      expect((await c.send('PROPFIND', '/dav/', auth)).status).toBe(207);
      expect(c.sockets.size).toBe(1);
    } finally {
      c.close();
    }
    for (const [i, b] of bodies.entries()) expect((await readFile(join(s.dataDir, 'storage', `ka-${i}.bin`))).equals(b)).toBe(true);
  });
});

describe('small uploads taken whole, then', () => {
  it('a PUT refused after its body was taken (no write right) answers 403, and the connection carries on', async () => {
    await makeUser(s, admin, 'reader', PERM.WEBDAV_READ | PERM.WEBDAV_MANAGE);
    const c = connection();
    try {
      const reader = basic('reader', 'pw-reader-123');
      expect((await c.send('PUT', '/dav/refused.txt', reader, 'not stored')).status).toBe(403);
      expect((await c.send('PROPFIND', '/dav/', reader)).status).toBe(207);
      expect((await c.send('PUT', '/dav/refused.txt', reader, 'still not')).status).toBe(403);
      expect(c.sockets.size).toBe(1);
    } finally {
      c.close();
    }
    expect((await davRequest(s.url, 'GET', '/dav/refused.txt', { user: 'admin', password: ADMIN_PASSWORD })).status).toBe(404);
  });

  it('two PUTs sent back to back on one connection (pipelined) each store their own body', async () => {
    const auth = basic('admin', ADMIN_PASSWORD);
    const put = (name: string, body: string) => `PUT /dav/${name} HTTP/1.1\r\nHost: x\r\nAuthorization: ${auth}\r\nContent-Length: ${body.length}\r\n\r\n${body}`;
    const answers = await new Promise<string>((resolve, reject) => {
      const sock = connect(Number(new URL(s.url).port), '127.0.0.1');
      let got = '';
      sock.on('data', (b: Buffer) => {
        got += b.toString('latin1');
        if ((got.match(/^HTTP\/1\.1 \d+/gm) ?? []).length === 2) sock.end();
      });
      sock.on('error', reject);
      sock.on('close', () => resolve(got));
      sock.write(put('piped-1.txt', 'first body') + put('piped-2.txt', 'the second, longer body'));
    });
    expect(answers.match(/^HTTP\/1\.1 \d+/gm)).toEqual(['HTTP/1.1 201', 'HTTP/1.1 201']);
    expect(await readFile(join(s.dataDir, 'storage', 'piped-1.txt'), 'utf8')).toBe('first body');
    expect(await readFile(join(s.dataDir, 'storage', 'piped-2.txt'), 'utf8')).toBe('the second, longer body');
  });

  it('a storage that streams (Memory) stores a body taken whole', async () => {
    ok(await s.api('/api/admin/storage/create', { token: admin, body: { mount_path: '/mem', driver: 'Memory', addition: '{}' } }));
    const c = connection();
    const auth = basic('admin', ADMIN_PASSWORD);
    try {
      expect((await c.send('PUT', '/dav/mem/small.txt', auth, 'kept in memory')).status).toBe(201);
      expect((await c.send('GET', '/dav/mem/small.txt', auth)).body).toBe('kept in memory');
    } finally {
      c.close();
    }
  });
});
