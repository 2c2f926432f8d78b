/**
 * Concurrent operations on the same paths across protocols (REST, WebDAV, SFTP) against one real
 * server: uploads racing uploads, reads racing replacements/removals/renames, folder moves under
 * uploads, listings under removals, storage disable/edit under transfers, many clients at once.
 */
import { createHash, randomBytes } from 'node:crypto';
import { mkdir, readdir, readFile, rename, rm, stat, writeFile } from 'node:fs/promises';
import { request } from 'node:http';
import { join } from 'node:path';
import ssh2 from 'ssh2';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ADMIN_PASSWORD, startTestServer, type TestServer } from './harness.js';
import { ok } from './fs-helpers.js';
import { uploadLeftovers } from './clients/sftp.js';
import { addLocalStorage } from './tasks-helpers.js';
import { openFiles } from './open-fds.js';

const STATUS = ssh2.utils.sftp.STATUS_CODE;
type Sftp = ssh2.SFTPWrapper;
type Cb<T> = (err: (Error & { code?: number }) | null | undefined, v: T) => void;
const p = <T>(call: (cb: Cb<T>) => void) => new Promise<T>((res, rej) => call((e, v) => (e ? rej(e) : res(v))));
const sha = (b: Buffer) => createHash('sha256').update(b).digest('hex').slice(0, 16);
const BASIC = 'Basic ' + Buffer.from(`admin:${ADMIN_PASSWORD}`).toString('base64');

let s: TestServer;
let admin: string;
const conns: ssh2.Client[] = [];
const storage = (...parts: string[]) => join(s.dataDir, 'storage', ...parts);

async function connect(): Promise<Sftp> {
  const client = new ssh2.Client();
  conns.push(client);
  await new Promise<void>((resolve, reject) => {
    client.once('ready', () => resolve());
    client.once('error', reject);
    client.connect({ host: '127.0.0.1', port: s.sftpPort, username: 'admin', password: ADMIN_PASSWORD, readyTimeout: 20_000 });
  });
  return p<Sftp>((cb) => client.sftp((e, v) => cb(e, v)));
}

/** One raw HTTP request; the body as bytes. */
function http(method: string, path: string, body?: Buffer, headers: Record<string, string> = {}): Promise<{ status: number; body: Buffer; headers: Record<string, unknown> }> {
  return new Promise((resolve, reject) => {
    const u = new URL(s.url);
    const h: Record<string, string> = { ...headers };
    if (body) h['content-length'] = String(body.length);
    const req = request({ host: u.hostname, port: u.port, method, path, headers: h, agent: false }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => resolve({ status: res.statusCode!, body: Buffer.concat(chunks), headers: res.headers }));
      res.on('error', reject);
      res.on('aborted', () => reject(new Error('aborted')));
    });
    req.setTimeout(30_000, () => req.destroy(new Error(`${method} ${path}: timeout`)));
    req.on('error', reject);
    req.end(body);
  });
}

/** A PUT of `body` with its first `half` bytes sent: `finish` sends the rest; `done` is "status body". */
function halfSentPut(path: string, headers: Record<string, string>, body: Buffer, half: number): { done: Promise<string>; finish: () => void } {
  const u = new URL(s.url);
  const req = request({ host: u.hostname, port: u.port, method: 'PUT', path, headers: { ...headers, 'content-length': String(body.length) } });
  const done = new Promise<string>((resolve, reject) => {
    req.on('response', (res) => {
      let t = '';
      res.on('data', (c: Buffer) => (t += c.toString()));
      res.on('end', () => resolve(`${res.statusCode} ${t}`));
    });
    req.on('error', reject);
  });
  req.write(body.subarray(0, half));
  return { done, finish: () => req.end(body.subarray(half)) };
}

const davPut = (path: string, body: Buffer) => http('PUT', '/dav' + path, body, { authorization: BASIC });
const davGet = (path: string) => http('GET', '/dav' + path, undefined, { authorization: BASIC });
const restPut = (path: string, body: Buffer) =>
  http('PUT', '/api/fs/put', body, { authorization: admin, 'file-path': encodeURIComponent(path), 'content-type': 'application/octet-stream' });

async function sftpPut(sftp: Sftp, path: string, body: Buffer, chunk = 32 << 10): Promise<void> {
  const h = await p<Buffer>((cb) => sftp.open(path, 'w', cb));
  try {
    for (let off = 0; off < body.length; off += chunk) {
      const n = Math.min(chunk, body.length - off);
      await p<void>((cb) => sftp.write(h, body, off, n, off, (e) => cb(e, undefined)));
    }
  } finally {
    await p<void>((cb) => sftp.close(h, (e) => cb(e, undefined)));
  }
}

async function sftpGet(sftp: Sftp, path: string): Promise<Buffer> {
  const h = await p<Buffer>((cb) => sftp.open(path, 'r', cb));
  try {
    return await readAll(sftp, h);
  } finally {
    await p<void>((cb) => sftp.close(h, (e) => cb(e, undefined))).catch(() => undefined);
  }
}

/** The process' descriptors that are not sockets (files, inotify, pipes), by what they point at. */
/** Whether `cond` came true within `ms`. */
async function until(cond: () => Promise<boolean>, ms: number): Promise<boolean> {
  for (const end = Date.now() + ms; Date.now() < end; await new Promise((r) => setTimeout(r, 50))) if (await cond()) return true;
  return cond();
}

/** READ an open handle to its end (32 KiB requests, as a client does). */
async function readAll(sftp: Sftp, h: Buffer): Promise<Buffer> {
  const out: Buffer[] = [];
  for (let off = 0; ; ) {
    const buf = Buffer.alloc(32 << 10);
    const n = await new Promise<number>((res, rej) =>
      sftp.read(h, buf, 0, buf.length, off, (e, n) => (e ? ((e as { code?: number }).code === STATUS.EOF ? res(0) : rej(e)) : res(n))),
    );
    if (!n) break;
    out.push(buf.subarray(0, n));
    off += n;
  }
  return Buffer.concat(out);
}

beforeAll(async () => {
  s = await startTestServer();
  admin = await s.login();
});
afterAll(async () => {
  for (const c of conns) c.end();
  await s?.close();
});

describe('reads racing a replacement', () => {
  it('an SFTP handle opened before the file is replaced, deleted or renamed reads the old file whole', async () => {
    const sftp = await connect();
    const before = (await openFiles()).length;
    for (let i = 0; i < 20; i++) {
      const oldB = Buffer.alloc(1000 + i, 'o');
      const newB = Buffer.alloc(200_000 + i, 'n');
      await rm(storage('sftp-renamed.bin'), { force: true });
      await writeFile(storage('sftp-replaced.bin'), oldB);
      const h = await p<Buffer>((cb) => sftp.open('/sftp-replaced.bin', 'r', cb));
      // Between OPEN and the first READ (a round trip of the client), from each protocol in turn.
      const what = i % 5;
      if (what === 0) ok(JSON.parse((await restPut('/sftp-replaced.bin', newB)).body.toString()));
      else if (what === 1) expect((await davPut('/sftp-replaced.bin', newB)).status).toBe(204);
      else if (what === 2) await sftpPut(await connect(), '/sftp-replaced.bin', newB);
      else if (what === 3) expect((await http('DELETE', '/dav/sftp-replaced.bin', undefined, { authorization: BASIC })).status).toBe(204);
      else ok(await s.api('/api/fs/rename', { token: admin, body: { path: '/sftp-replaced.bin', name: 'sftp-renamed.bin' } }));
      const got = await readAll(sftp, h);
      expect({ i, size: got.length, sha: sha(got) }).toEqual({ i, size: oldB.length, sha: sha(oldB) });
      await p<void>((cb) => sftp.close(h, (e) => cb(e, undefined)));
      if (what < 3) expect(sha(await readFile(storage('sftp-replaced.bin')))).toBe(sha(newB));
    }
    for (const c of conns.splice(0)) c.end();
    // The handles' descriptors are closed again.
    expect(await until(async () => (await openFiles()).length <= before, 10_000)).toBe(true);
  });

  it('HTTP GETs (REST /d, WebDAV) racing renames over the file get one whole file or a cut body', async () => {
    const small = Buffer.alloc(100_000, 'o');
    const big = Buffer.alloc(300_000, 'n');
    await writeFile(storage('http-replaced.bin'), small);
    const sign = (await s.api<{ sign: string }>('/api/fs/get', { token: admin, body: { path: '/http-replaced.bin' } })).data!.sign;
    let stop = false;
    // Another program (or the uploads of other clients) renames new versions over the path.
    const swapper = (async () => {
      for (let i = 0; !stop; i++) {
        const t = storage(`.swap-${i % 2}`);
        await writeFile(t, i % 2 ? small : big);
        await rename(t, storage('http-replaced.bin'));
      }
    })();
    const outcomes: Record<string, number> = {};
    try {
      for (let i = 0; i < 60; i++) {
        const rs = await Promise.allSettled([
          ...Array.from({ length: 4 }, () => http('GET', '/d/http-replaced.bin?sign=' + encodeURIComponent(sign))),
          ...Array.from({ length: 4 }, () => davGet('/http-replaced.bin')),
        ]);
        rs.forEach((x, k) => {
          const via = k < 4 ? 'rest' : 'dav';
          // A cut body (the server saw the change after the head was out) is an error, never data.
          const what = x.status === 'rejected' ? 'cut' : x.value.body.equals(small) ? 'old-or-new' : x.value.body.equals(big) ? 'old-or-new' : `mixed ${x.value.status} ${x.value.body.length}`;
          outcomes[`${via} ${what}`] = (outcomes[`${via} ${what}`] ?? 0) + 1;
        });
      }
    } finally {
      stop = true;
      await swapper;
    }
    expect(Object.keys(outcomes).filter((k) => k.includes('mixed'))).toEqual([]);
    expect(outcomes['rest old-or-new']).toBeGreaterThan(0);
    expect(outcomes['dav old-or-new']).toBeGreaterThan(0);
  });
});

describe('uploads racing uploads', () => {
  it('REST, WebDAV and two SFTP uploads to one path at once leave exactly one of the bodies, no temp file', async () => {
    const sftp = [await connect(), await connect()];
    for (let i = 0; i < 15; i++) {
      // Sizes around SMALL_BODY (64 KiB): both the buffered and the streamed write paths race.
      const bodies = [randomBytes(150_000 + i), randomBytes(60_000 + i), randomBytes(40_000 + i), randomBytes(300_000 + i)];
      const rs = await Promise.all([
        restPut('/same.bin', bodies[0]!).then((r) => JSON.parse(r.body.toString()).code as number),
        davPut('/same.bin', bodies[1]!).then((r) => r.status),
        sftpPut(sftp[0]!, '/same.bin', bodies[2]!).then(() => 'ok'),
        sftpPut(sftp[1]!, '/same.bin', bodies[3]!).then(() => 'ok'),
      ]);
      expect(rs[0]).toBe(200);
      expect([201, 204]).toContain(rs[1]);
      const got = await readFile(storage('same.bin'));
      expect(bodies.map((b) => sha(b))).toContain(sha(got));
      expect(await uploadLeftovers(s.dataDir)).toEqual([]);
    }
  });
});

describe('a folder renamed under uploads', () => {
  it('streaming uploads into it fail cleanly (not found) and leave no temp file behind', async () => {
    const sftp = await connect();
    for (let i = 0; i < 5; i++) {
      ok(await s.api('/api/fs/mkdir', { token: admin, body: { path: `/mv${i}/a` } }));
      const body = randomBytes(2 << 20);
      const half = 1 << 20;
      // Each upload half sent: SFTP WRITEs, a WebDAV PUT and a REST PUT, all streaming into /mv/a.
      const h = await p<Buffer>((cb) => sftp.open(`/mv${i}/a/s.bin`, 'w', cb));
      await p<void>((cb) => sftp.write(h, body, 0, half, 0, (e) => cb(e, undefined)));
      const partial = (path: string, headers: Record<string, string>) => halfSentPut(path, headers, body, half);
      const dav = partial(`/dav/mv${i}/a/d.bin`, { authorization: BASIC });
      const rest = partial('/api/fs/put', { authorization: admin, 'file-path': encodeURIComponent(`/mv${i}/a/r.bin`) });
      expect(await until(async () => (await readdir(storage(`mv${i}`, 'a'))).length === 3, 10_000)).toBe(true);
      // The temp files are in the folder when it goes: they move along with it.
      ok(await s.api('/api/fs/rename', { token: admin, body: { path: `/mv${i}/a`, name: 'b' } }));
      await p<void>((cb) => sftp.write(h, body, half, half, half, (e) => cb(e, undefined)));
      const closed = await new Promise<number | undefined>((res) => sftp.close(h, (e) => res(e ? (e as { code?: number }).code : undefined)));
      dav.finish();
      rest.finish();
      expect(closed).toBe(STATUS.NO_SUCH_FILE);
      expect(await dav.done).toMatch(/^404 /);
      expect(await rest.done).toBe('200 {"code":500,"message":"object not found","data":null}');
      expect(await readdir(storage(`mv${i}`, 'b'))).toEqual([]);
      expect(await uploadLeftovers(s.dataDir)).toEqual([]);
      // The server keeps serving the folder under its new name.
      ok(await restPut(`/mv${i}/b/after.txt`, Buffer.from('after')).then((r) => JSON.parse(r.body.toString())));
      expect((await sftpGet(sftp, `/mv${i}/b/after.txt`)).toString()).toBe('after');
      const listed = await s.api<{ content: Array<{ name: string }> }>('/api/fs/list', { token: admin, body: { path: `/mv${i}/b` } });
      expect(listed.data!.content.map((e) => e.name)).toEqual(['after.txt']);
    }
  });
});

describe('folders removed while they are listed', () => {
  const sftpCode = (call: (cb: (e: (Error & { code?: number }) | null | undefined) => void) => void) =>
    new Promise<string>((res) => call((e) => res(e ? `${e.code} ${e.message}` : 'ok')));

  it('SFTP READDIR pages, PROPFIND and fs/list racing a remove: whole listings or clean errors', async () => {
    const sftp = await connect();
    for (let i = 0; i < 6; i++) {
      await mkdir(storage('ld', 'x'), { recursive: true });
      for (let k = 0; k < 1500; k++) await writeFile(storage('ld', 'x', `f${k}`), 'x');
      const h = await p<Buffer>((cb) => sftp.opendir('/ld/x', cb));
      const pages: number[] = [(await p<ssh2.FileEntryWithStats[]>((cb) => sftp.readdir(h, cb))).length];
      const [removed, list, propfind] = await Promise.all([
        s.api('/api/fs/remove', { token: admin, body: { dir: '/ld', names: ['x'] } }),
        s.api<{ total: number }>('/api/fs/list', { token: admin, body: { path: '/ld/x' } }),
        http('PROPFIND', '/dav/ld/x', undefined, { authorization: BASIC, depth: '1' }),
      ]);
      // The rest of the pages: the listing OPENDIR took, to its end (then EOF).
      for (;;) {
        const page = await new Promise<number>((res, rej) => sftp.readdir(h, (e, l) => (e ? ((e as { code?: number }).code === STATUS.EOF ? res(0) : rej(e)) : res(l.length))));
        if (!page) break;
        pages.push(page);
      }
      await p<void>((cb) => sftp.close(h, (e) => cb(e, undefined)));
      ok(removed);
      expect(pages.reduce((a, b) => a + b, 0)).toBe(1500);
      // Listings made while the files go are what was there as each entry was looked at (ls during rm -r).
      if (list.code === 200) expect(list.data!.total).toBeLessThanOrEqual(1500);
      else expect(list.message).toBe('object not found');
      expect([207, 404]).toContain(propfind.status);
      if (propfind.status === 207) {
        const responses = propfind.body.toString().split('<D:response>').length - 1;
        expect(responses).toBeGreaterThanOrEqual(1);
        expect(responses).toBeLessThanOrEqual(1501);
      }
      expect(await stat(storage('ld', 'x')).then(() => 'there', () => 'gone')).toBe('gone');
    }
  });

  it('mkdir and remove of one name from all three protocols at once: precise answers, a consistent end', async () => {
    const sftp = await connect();
    ok(await s.api('/api/fs/mkdir', { token: admin, body: { path: '/mr' } }));
    const seen = new Set<string>();
    for (let i = 0; i < 25; i++) {
      const r = await Promise.all([
        s.api('/api/fs/mkdir', { token: admin, body: { path: '/mr/y' } }).then((e) => `rest mkdir ${e.code} ${e.message}`),
        http('MKCOL', '/dav/mr/y', undefined, { authorization: BASIC }).then((e) => `dav mkcol ${e.status}`),
        sftpCode((cb) => sftp.mkdir('/mr/y', cb)).then((e) => `sftp mkdir ${e}`),
        s.api('/api/fs/remove', { token: admin, body: { dir: '/mr', names: ['y'] } }).then((e) => `rest remove ${e.code} ${e.message}`),
        http('DELETE', '/dav/mr/y', undefined, { authorization: BASIC }).then((e) => `dav delete ${e.status}`),
        sftpCode((cb) => sftp.rmdir('/mr/y', cb)).then((e) => `sftp rmdir ${e}`),
      ]);
      r.forEach((x) => seen.add(x));
      const listed = await s.api<{ content: Array<{ name: string }> }>('/api/fs/list', { token: admin, body: { path: '/mr' } });
      const onDisk = await readdir(storage('mr'));
      expect(listed.data!.content.map((e) => e.name)).toEqual(onDisk);
      await rm(storage('mr', 'y'), { recursive: true, force: true });
    }
    const allowed = new Set([
      'rest mkdir 200 success', 'dav mkcol 201', 'dav mkcol 405', 'dav mkcol 409', 'sftp mkdir ok', `sftp mkdir ${STATUS.FAILURE} file exists`,
      'rest remove 200 success', 'dav delete 204', 'dav delete 404', 'sftp rmdir ok', `sftp rmdir ${STATUS.NO_SUCH_FILE} No such file`,
    ]);
    expect([...seen].filter((x) => !allowed.has(x))).toEqual([]);
  });
});
describe('a storage disabled or edited under transfers', () => {
  it('uploads and downloads on all three protocols end whole; new requests get a clean error; no descriptor is left', async () => {
    const root = await addLocalStorage(s, admin, '/st');
    const list = await s.api<{ content: Array<Record<string, unknown>> }>('/api/admin/storage/list', { token: admin });
    const record = list.data!.content.find((r) => r.mount_path === '/st')!;
    const big = randomBytes(4 << 20);
    const half = 1 << 20;
    await writeFile(join(root, 'src.bin'), big);
    const u = new URL(s.url);
    const baseline = await openFiles();
    for (const action of ['disable', 'update'] as const) {
      const sftp = await connect();
      // In flight when the storage changes: an SFTP upload and download, WebDAV and REST uploads
      // half sent, and a WebDAV download its client has not read yet.
      const wh = await p<Buffer>((cb) => sftp.open('/st/up-s.bin', 'w', cb));
      await p<void>((cb) => sftp.write(wh, big, 0, half, 0, (e) => cb(e, undefined)));
      const rh = await p<Buffer>((cb) => sftp.open('/st/src.bin', 'r', cb));
      const partial = (path: string, headers: Record<string, string>) => halfSentPut(path, headers, big, half);
      const dav = partial('/dav/st/up-d.bin', { authorization: BASIC });
      const rest = partial('/api/fs/put', { authorization: admin, 'file-path': encodeURIComponent('/st/up-r.bin') });
      let resume = () => {};
      const download = new Promise<Buffer>((resolve, reject) => {
        const req = request({ host: u.hostname, port: u.port, path: '/dav/st/src.bin', headers: { authorization: BASIC } }, (res) => {
          const chunks: Buffer[] = [];
          res.pause();
          resume = () => res.resume();
          res.on('data', (c: Buffer) => chunks.push(c));
          res.on('end', () => resolve(Buffer.concat(chunks)));
          res.on('error', reject);
        });
        req.on('error', reject);
        req.end();
      });
      expect(await until(async () => (await readdir(root)).filter((n) => n.startsWith('.treegate-upload-')).length === 3, 10_000)).toBe(true);
      if (action === 'disable') ok(await s.api(`/api/admin/storage/disable?id=${record.id}`, { token: admin, method: 'POST' }));
      else ok(await s.api('/api/admin/storage/update', { token: admin, body: { ...record, remark: 'edited mid-transfer' } }));
      if (action === 'disable') {
        // New requests: a clean "storage not available" on each protocol.
        expect(await new Promise((res) => sftp.stat('/st/src.bin', (e) => res(e ? `${(e as { code?: number }).code} ${e.message}` : 'ok')))).toBe(`${STATUS.FAILURE} storage not available`);
        expect((await davGet('/st/src.bin')).status).toBe(502);
        expect((await s.api('/api/fs/list', { token: admin, body: { path: '/st' } })).code).toBe(500);
      }
      // An SFTP handle's every READ, WRITE and CLOSE is a request of its own: after an edit in place
      // (remark) the handles go on; after a disable the admin has taken the storage out, and they are
      // refused, the upload landing nothing (docs/architecture.md; mounts-review-retired-handles).
      const outcome = (e: unknown) => (e ? `${(e as { code?: number }).code} ${(e as Error).message}` : 'ok');
      const writeRest = await new Promise((res) => sftp.write(wh, big, half, big.length - half, half, (e) => res(outcome(e))));
      const closed = await new Promise((res) => sftp.close(wh, (e) => res(outcome(e))));
      if (action === 'disable') {
        expect(writeRest).toBe(`${STATUS.FAILURE} storage not available`);
        expect(closed).toBe(`${STATUS.FAILURE} storage not available`);
        await expect(readAll(sftp, rh)).rejects.toThrow('storage not available');
      } else {
        expect([writeRest, closed]).toEqual(['ok', 'ok']);
        expect(sha(await readAll(sftp, rh))).toBe(sha(big));
      }
      await p<void>((cb) => sftp.close(rh, (e) => cb(e, undefined)));
      // Requests already under way (a WebDAV or REST body half sent, a download not yet read) finish.
      dav.finish();
      rest.finish();
      resume();
      expect(await dav.done).toMatch(/^20[14] /);
      expect(await rest.done).toBe('200 {"code":200,"message":"success","data":null}');
      expect(sha(await download)).toBe(sha(big));
      const landed = action === 'disable' ? ['up-d.bin', 'up-r.bin'] : ['up-d.bin', 'up-r.bin', 'up-s.bin'];
      for (const n of landed) expect(sha(await readFile(join(root, n)))).toBe(sha(big));
      expect((await readdir(root)).filter((n) => !n.startsWith('after-')).sort()).toEqual(['src.bin', ...landed]);
      if (action === 'disable') ok(await s.api(`/api/admin/storage/enable?id=${record.id}`, { token: admin, method: 'POST' }));
      // Works again: a read and a write on each protocol.
      expect(sha((await davGet('/st/src.bin')).body)).toBe(sha(big));
      expect(sha(await sftpGet(sftp, '/st/up-d.bin'))).toBe(sha(big));
      ok(JSON.parse((await restPut(`/st/after-${action}.txt`, Buffer.from(action))).body.toString()));
      expect(await readFile(join(root, `after-${action}.txt`), 'utf8')).toBe(action);
      for (const c of conns.splice(0)) c.end();
    }
    // Descriptors other than sockets (keep-alive connections come and go): back to where they were.
    expect(await until(async () => (await openFiles()).length <= baseline.length, 10_000), JSON.stringify({ baseline, now: await openFiles() })).toBe(true);
  });
});

describe('many clients on one folder', () => {
  it('20 SFTP and 6 WebDAV clients creating, renaming and deleting shared names: REST sees what is on disk', async () => {
    ok(await s.api('/api/fs/mkdir', { token: admin, body: { path: '/crowd' } }));
    const baseline = await openFiles();
    const sftps = await Promise.all(Array.from({ length: 20 }, () => connect()));
    const answers = new Set<string>();
    const sftpAnswer = (what: string, call: (cb: (e: (Error & { code?: number }) | null | undefined) => void) => void) =>
      new Promise<void>((res) => call((e) => (answers.add(`sftp ${what} ${e ? `${e.code} ${e.message}` : 'ok'}`), res())));
    // Names shared by everyone (n0..n7): most operations meet another one on the same name.
    const name = (k: number) => `/crowd/n${k % 8}`;
    const body = (c: number, k: number) => Buffer.alloc(1000 + ((c * 31 + k * 7) % 5000) * 20, `${c}-${k}|`);
    const sftpWork = sftps.map(async (sftp, c) => {
      for (let k = 0; k < 12; k++) {
        const op = (c + k) % 4;
        if (op === 0) await sftpPut(sftp, name(c + k), body(c, k)).then(() => answers.add('sftp put ok'), (e: Error & { code?: number }) => answers.add(`sftp put ${e.code} ${e.message}`));
        else if (op === 1) await sftpAnswer('rename', (cb) => sftp.rename(name(c + k), name(c + k + 1) + '.r', cb));
        else if (op === 2) await sftpAnswer('remove', (cb) => sftp.unlink(name(c + k), cb));
        else await sftpAnswer('rename-back', (cb) => sftp.rename(name(c + k - 1) + '.r', name(c + k), cb));
      }
    });
    const davWork = Array.from({ length: 6 }, async (_, c) => {
      for (let k = 0; k < 12; k++) {
        const op = (c + k) % 3;
        const r =
          op === 0 ? await davPut(name(c + k + 3), body(100 + c, k))
          : op === 1 ? await http('MOVE', '/dav' + name(c + k + 3), undefined, { authorization: BASIC, destination: `${s.url}/dav${name(c + k + 4)}.r`, overwrite: 'T' })
          : await http('DELETE', '/dav' + name(c + k + 3), undefined, { authorization: BASIC });
        answers.add(`dav ${['put', 'move', 'delete'][op]} ${r.status}`);
      }
    });
    await Promise.all([...sftpWork, ...davWork]);
    const listed = await s.api<{ content: Array<{ name: string; size: number }> }>('/api/fs/list', { token: admin, body: { path: '/crowd', refresh: true } });
    ok(listed);
    const onDisk = (await readdir(storage('crowd'))).sort();
    expect(listed.data!.content.map((e) => e.name).sort()).toEqual(onDisk);
    for (const e of listed.data!.content) expect((await stat(storage('crowd', e.name))).size).toBe(e.size);
    // Every file holds one whole body: its first marker repeated to its length.
    for (const n of onDisk) {
      const b = await readFile(storage('crowd', n));
      const marker = b.subarray(0, b.indexOf('|') + 1);
      expect(b.equals(Buffer.alloc(b.length, marker)), n).toBe(true);
    }
    expect(await uploadLeftovers(s.dataDir)).toEqual([]);
    const allowed = new Set([
      'sftp put ok', 'sftp rename ok', 'sftp remove ok', 'sftp rename-back ok',
      `sftp rename ${STATUS.NO_SUCH_FILE} No such file`, `sftp remove ${STATUS.NO_SUCH_FILE} No such file`, `sftp rename-back ${STATUS.NO_SUCH_FILE} No such file`,
      `sftp rename ${STATUS.FAILURE} file exists`, `sftp rename-back ${STATUS.FAILURE} file exists`,
      'dav put 201', 'dav put 204', 'dav move 201', 'dav move 204', 'dav move 404', 'dav delete 204', 'dav delete 404',
    ]);
    // An SFTP v3 RENAME onto an existing name has no status of its own: FAILURE, naming the file.
    expect([...answers].map((a) => a.replace(/file \[n\d(\.r)?\] exists$/, 'file exists')).filter((a) => !allowed.has(a))).toEqual([]);
    for (const c of conns.splice(0)) c.end();
    expect(await until(async () => (await openFiles()).length <= baseline.length, 10_000), JSON.stringify({ baseline, now: await openFiles() })).toBe(true);
  });
});
