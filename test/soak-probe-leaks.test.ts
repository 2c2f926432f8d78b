/**
 * Resource-leak soak probe: a server on a NAS runs for years, so nothing a client does (or fails to
 * do) may leave anything behind. Traffic of every kind on REST, WebDAV and SFTP, normal and broken
 * (uploads and downloads cut off, sessions killed with handles open, bad logins, missing paths,
 * keep-alive connections reset), then, once the server is quiet:
 * - no descriptor more than before (files under DATA, sockets, pipes);
 * - no upload temp file (Local's `.treegate-upload-*`, SFTP's `DATA/tmp/sftp-*`, As-Task spools);
 * - no VFS write under way, no hold on a storage (an edit of it would wait for ever), no SFTP channel,
 *   no connection open on the HTTP server;
 * - every request and response object the HTTP server made is garbage (WeakRefs, after a forced GC).
 *
 * Found by it (each has its own case below):
 * - A response queued behind a pipelined one gets no 'close' from Node < 26 when the client hangs up
 *   (nodejs/node#62534): a WebDAV GET or /d download queued so kept its file open and its request
 *   for good (one fd and ~15 KB each), any other request its connection's objects.
 * - An upload whose client went away while an async step ran before the upload started (REST's
 *   token check; WebDAV's lookups) never ended: the request's 'close' had come and gone, so its body
 *   never ended or failed. The put held its storage, its temp file and two fds for good; a
 *   multipart form's promise never settled.
 */
import dc from 'node:diagnostics_channel';
import { readdir, readlink, mkdir, writeFile } from 'node:fs/promises';
import { request, Agent, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { connect as tcpConnect, type Socket } from 'node:net';
import { join } from 'node:path';
import ssh2 from 'ssh2';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ADMIN_PASSWORD, startTestServer, type TestServer } from './harness.js';

type Sftp = ssh2.SFTPWrapper;
type Cb<T> = (err: Error | null | undefined, v: T) => void;
const p = <T>(call: (cb: Cb<T>) => void) => new Promise<T>((res, rej) => call((e, v) => (e ? rej(e) : res(v))));
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const BASIC = 'Basic ' + Buffer.from(`admin:${ADMIN_PASSWORD}`).toString('base64');
const D = { authorization: BASIC };
const LOCK_BODY = '<?xml version="1.0"?><D:lockinfo xmlns:D="DAV:"><D:lockscope><D:exclusive/></D:lockscope><D:locktype><D:write/></D:locktype><D:owner>probe</D:owner></D:lockinfo>';

let s: TestServer;
let token: string;
let httpServer: Server | undefined;
/** Every request and response the HTTP server made, to check they are all collected. */
let made: Array<{ ref: WeakRef<object>; what: string }> = [];
/** What to do to a request when it arrives (by its `x-probe` header): the client "leaves" then. */
const onArrival = new Map<string, (req: IncomingMessage) => void>();

const onStart = (msg: unknown) => {
  const { request: req, response: res, server } = msg as { request: IncomingMessage; response: ServerResponse; server: Server };
  const port = (server.address() as { port?: number } | null)?.port;
  if (!s || port !== Number(new URL(s.url).port)) return;
  httpServer = server;
  made.push({ ref: new WeakRef(req), what: `request ${req.method} ${req.url}` }, { ref: new WeakRef(res), what: `response to ${req.method} ${req.url}` });
  const probe = req.headers['x-probe'];
  if (typeof probe === 'string') onArrival.get(probe)?.(req);
};

beforeAll(async () => {
  dc.subscribe('http.server.request.start', onStart);
  s = await startTestServer();
  const r = await http('POST', '/api/auth/login', { body: JSON.stringify({ username: 'admin', password: ADMIN_PASSWORD }), headers: { 'content-type': 'application/json' } });
  token = (JSON.parse(r.body.toString()) as { data: { token: string } }).data.token;
  await mkdir(join(s.dataDir, 'storage', 'leak'), { recursive: true });
  await writeFile(join(s.dataDir, 'storage', 'leak', 'big.bin'), Buffer.alloc(8 << 20, 1));
  for (let i = 0; i < 5; i++) await writeFile(join(s.dataDir, 'storage', 'leak', `f${i}.txt`), `file ${i}`);
});

afterAll(async () => {
  dc.unsubscribe('http.server.request.start', onStart);
  await s?.close();
});

// ---------- clients (node:http with no pooling unless an agent is given: nothing stays open) ----------

interface Res {
  status: number;
  body: Buffer;
  headers: Record<string, unknown>;
}

function http(method: string, path: string, o: { body?: string | Buffer; headers?: Record<string, string>; agent?: Agent; localAddress?: string } = {}): Promise<Res> {
  return new Promise((resolve, reject) => {
    const u = new URL(s.url);
    const headers: Record<string, string> = { ...o.headers };
    if (o.body !== undefined) headers['content-length'] = String(Buffer.byteLength(o.body));
    const req = request({ host: u.hostname, port: u.port, method, path, headers, agent: o.agent ?? false, localAddress: o.localAddress }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => resolve({ status: res.statusCode!, body: Buffer.concat(chunks), headers: res.headers }));
      res.on('error', reject);
    });
    req.setTimeout(30_000, () => req.destroy(new Error(`${method} ${path}: timeout`)));
    req.on('error', reject);
    req.end(o.body);
  });
}

const api = async <T>(path: string, body: unknown): Promise<{ code: number; message: string; data: T }> =>
  JSON.parse((await http('POST', path, { body: JSON.stringify(body), headers: { authorization: token, 'content-type': 'application/json' } })).body.toString());

function multipart(data: Buffer): { body: Buffer; type: string } {
  const b = '----probe' + Math.random().toString(16).slice(2);
  const head = Buffer.from(`--${b}\r\nContent-Disposition: form-data; name="file"; filename="x.bin"\r\nContent-Type: application/octet-stream\r\n\r\n`);
  return { body: Buffer.concat([head, data, Buffer.from(`\r\n--${b}--\r\n`)]), type: `multipart/form-data; boundary=${b}` };
}

/** Headers and `sent` bytes of a body announced as `total` bytes, then the connection is cut. */
function cutUpload(method: string, path: string, headers: Record<string, string>, total: number, sent: Buffer): Promise<void> {
  return new Promise((resolve) => {
    const u = new URL(s.url);
    const req = request({ host: u.hostname, port: u.port, method, path, headers: { ...headers, 'content-length': String(total) }, agent: false });
    req.on('error', () => resolve());
    req.on('response', (res) => (res.resume(), res.on('close', () => resolve())));
    req.write(sent, () => setTimeout(() => (req.destroy(), resolve()), 5));
  });
}

/** A GET whose client goes away after the first chunk of the answer. */
function cutDownload(path: string, headers: Record<string, string> = {}): Promise<void> {
  return new Promise((resolve) => {
    const u = new URL(s.url);
    const req = request({ host: u.hostname, port: u.port, method: 'GET', path, headers, agent: false }, (res) => {
      res.once('data', () => (req.destroy(), resolve()));
      res.on('end', () => resolve());
      res.on('error', () => resolve());
    });
    req.on('error', () => resolve());
    req.end();
  });
}

/** Raw requests written at once on one connection (pipelined); reset after `cutAt` bytes of answers. */
function pipelined(raw: string, cutAt: number): Promise<void> {
  return new Promise((resolve) => {
    const sock = tcpConnect(Number(new URL(s.url).port), '127.0.0.1');
    let got = 0;
    sock.on('error', () => resolve());
    sock.on('close', () => resolve());
    sock.on('connect', () => sock.write(raw));
    sock.on('data', (d: Buffer) => {
      got += d.length;
      if (got >= cutAt) sock.resetAndDestroy();
    });
  });
}
const rawReq = (method: string, path: string, headers: Record<string, string> = {}, body = '') =>
  `${method} ${path} HTTP/1.1\r\nHost: probe\r\n` +
  Object.entries({ ...headers, ...(body ? { 'Content-Length': String(body.length) } : {}) }).map(([k, v]) => `${k}: ${v}\r\n`).join('') +
  '\r\n' + body;

async function sshConnect(opts: Partial<ssh2.ConnectConfig> = {}): Promise<ssh2.Client> {
  const c = new ssh2.Client();
  await new Promise<void>((resolve, reject) => {
    c.once('ready', () => resolve());
    c.once('error', reject);
    c.connect({ host: '127.0.0.1', port: s.sftpPort, username: 'admin', password: ADMIN_PASSWORD, readyTimeout: 20_000, ...opts });
  });
  c.on('error', () => undefined);
  return c;
}
const endSsh = (c: ssh2.Client) => new Promise<void>((r) => (c.once('close', () => r()), c.end()));
/** The client dies: its socket is destroyed without any SSH goodbye. */
const killSsh = (c: ssh2.Client) => new Promise<void>((r) => (c.once('close', () => r()), (c as unknown as { _sock: Socket })._sock.destroy()));

// ---------- what must be back to where it was ----------

interface State {
  /** Descriptors other than sockets (files under DATA and elsewhere, pipes, event fds), by target. */
  files: string[];
  sockets: number;
  pendingWrites: number;
  storageHolds: number;
  sftpChannels: number;
  httpConnections: number;
  /** Upload temp files in DATA. */
  leftovers: string[];
}

async function state(): Promise<State> {
  const files: string[] = [];
  let sockets = 0;
  for (const fd of await readdir('/proc/self/fd')) {
    const target = await readlink(`/proc/self/fd/${fd}`).catch(() => undefined);
    if (target === undefined) continue;
    if (target.startsWith('socket:')) sockets++;
    else files.push(target.replace(/\[\d+\]$/, '[]')); // pipe:[1234] → pipe:[]
  }
  return {
    files: files.sort(),
    sockets,
    pendingWrites: s.running.core.vfs.pendingWrites,
    storageHolds: s.running.core.mounts.all().reduce((n, m) => n + m.holds, 0),
    sftpChannels: s.running.sftp?.channels() ?? 0,
    httpConnections: await connections(),
    leftovers: await leftovers(),
  };
}

/** Upload temp files anywhere in DATA: Local's, SFTP's spill files, As-Task spools. */
async function leftovers(): Promise<string[]> {
  const all = (await readdir(s.dataDir, { recursive: true })).map(String);
  return all.filter((n) => n.includes('.treegate-upload-') || /^tmp\/sftp-/.test(n) || /^temp\/upload\/./.test(n));
}

const connections = () => new Promise<number>((resolve) => (httpServer ? httpServer.getConnections((_e, n) => resolve(n)) : resolve(0)));

/** Wait (bounded) until nothing is under way any more than in `before`; the caller then asserts. */
async function quiesce(before?: State): Promise<void> {
  for (let i = 0; i < 50; i++) {
    const now = await state();
    if (now.pendingWrites <= (before?.pendingWrites ?? 0) && now.storageHolds <= (before?.storageHolds ?? 0) && now.sftpChannels === 0 && now.httpConnections === 0) break;
    await sleep(100);
  }
  await sleep(200);
}

/** The HTTP server's requests and responses that survive a full collection. */
async function surviving(): Promise<string[]> {
  const gc = (globalThis as { gc?: () => void }).gc;
  expect(gc, 'run with --expose-gc (vitest.config.ts does)').toBeTypeOf('function');
  for (let i = 0; i < 3; i++) {
    await sleep(20); // a WeakRef deref'd in this job stays alive until it ends
    gc!();
  }
  await sleep(20);
  made = made.filter((m) => m.ref.deref() !== undefined);
  return made.map((m) => m.what.split('?')[0]!);
}

/** The state as before (leaks of an earlier case are not counted again), and no request kept. */
async function expectNothingLeft(before: State): Promise<void> {
  await quiesce(before);
  const { files, ...now } = await state();
  const { files: filesBefore, ...then } = before;
  expect(now).toEqual(then);
  expect(files, 'descriptors other than sockets').toEqual(filesBefore);
  // A request still being decided (a first login's password check) lets go of its objects when done.
  for (let i = 0; i < 30 && (await surviving()).length; i++) await sleep(100);
  expect(await surviving(), 'HTTP requests and responses still reachable').toEqual([]);
}

/** The state to come back to, once the previous case's traffic is over. */
async function baseline(): Promise<State> {
  await quiesce();
  await surviving();
  made = [];
  return state();
}

// ---------- traffic ----------

const small = Buffer.alloc(1024, 'a');
const big = Buffer.alloc(200 * 1024, 'b');

async function davCycle(i: number, agent: Agent): Promise<void> {
  const path = `/dav/leak/d${i % 7}.bin`;
  expect((await http('PUT', path, { body: i % 2 ? big : small, headers: D, agent })).status).toBeLessThan(300);
  expect((await http('GET', path, { headers: D, agent })).status).toBe(200);
  expect((await http('GET', '/dav/leak/big.bin', { headers: { ...D, range: `bytes=${i}-${i + 70_000}` }, agent })).status).toBe(206);
  expect((await http('PROPFIND', '/dav/leak/', { headers: { ...D, depth: '1' }, agent })).status).toBe(207);
  const lock = await http('LOCK', path, { body: LOCK_BODY, headers: { ...D, timeout: 'Second-600', 'content-type': 'application/xml' }, agent });
  expect(lock.status).toBe(200);
  expect((await http('UNLOCK', path, { headers: { ...D, 'lock-token': String(lock.headers['lock-token']) }, agent })).status).toBe(204);
  const to = `/dav/leak/m${i % 7}.bin`;
  expect((await http('MOVE', path, { headers: { ...D, destination: s.url + to, overwrite: 'T' }, agent })).status).toBeLessThan(300);
  expect((await http('DELETE', to, { headers: D, agent })).status).toBe(204);
}

async function restCycle(i: number, agent: Agent): Promise<void> {
  expect((await api('/api/fs/list', { path: '/leak' })).code).toBe(200);
  const put = await http('PUT', '/api/fs/put', { body: i % 2 ? big : small, headers: { authorization: token, 'file-path': `/leak/r${i % 7}.bin`, 'content-type': 'application/octet-stream' }, agent });
  expect(JSON.parse(put.body.toString()).code).toBe(200);
  const form = multipart(i % 2 ? small : big);
  const f = await http('PUT', '/api/fs/form', { body: form.body, headers: { authorization: token, 'file-path': `/leak/form${i % 7}.bin`, 'content-type': form.type }, agent });
  expect(JSON.parse(f.body.toString()).code).toBe(200);
  const link = new URL((await api<{ raw_url: string }>('/api/fs/get', { path: '/leak/big.bin' })).data.raw_url);
  expect((await http('GET', link.pathname + link.search, { headers: { range: `bytes=${i}-${i + 100_000}` }, agent })).status).toBe(206);
  expect((await api('/api/fs/remove', { dir: '/leak', names: [`r${i % 7}.bin`] })).code).toBe(200);
}

async function sftpCycle(i: number): Promise<void> {
  const c = await sshConnect();
  const sf = await p<Sftp>((cb) => c.sftp(cb));
  const name = `/leak/s${i % 7}.bin`;
  const w = await p<Buffer>((cb) => sf.open(name, 'w', cb));
  await p<void>((cb) => sf.write(w, big, 0, big.length, 0, cb));
  await p<void>((cb) => sf.close(w, cb));
  const r = await p<Buffer>((cb) => sf.open('/leak/big.bin', 'r', cb));
  await p<number>((cb) => sf.read(r, Buffer.alloc(65536), 0, 65536, i * 1000, cb));
  await p<void>((cb) => sf.close(r, cb));
  await p<unknown>((cb) => sf.readdir('/leak', cb));
  await p<void>((cb) => sf.unlink(name, cb));
  await endSsh(c);
}

/** SFTP clients that go away without tidying up, four ways. */
async function sftpBroken(i: number): Promise<void> {
  const c = await sshConnect();
  const sf = await p<Sftp>((cb) => c.sftp(cb));
  const ignore = () => undefined;
  switch (i % 4) {
    case 0: {
      // killed mid-upload, with an out-of-order WRITE waiting in the reorder buffer
      const h = await p<Buffer>((cb) => sf.open(`/leak/b${i}.bin`, 'w', cb));
      sf.write(h, big, 0, big.length, 0, ignore);
      sf.write(h, big, 0, big.length, 3 * big.length, ignore);
      break;
    }
    case 1: {
      // killed mid-download, READs pipelined
      const h = await p<Buffer>((cb) => sf.open('/leak/big.bin', 'r', cb));
      for (let k = 0; k < 16; k++) sf.read(h, Buffer.alloc(65536), 0, 65536, k * 65536, ignore);
      break;
    }
    case 2: {
      // handles of every kind left open (an append spills to DATA/tmp), then a clean end
      await p<Buffer>((cb) => sf.open('/leak/big.bin', 'r', cb));
      await p<Buffer>((cb) => sf.opendir('/leak', cb));
      const w = await p<Buffer>((cb) => sf.open(`/leak/f${i % 5}.txt`, 'a', cb));
      await p<void>((cb) => sf.write(w, small, 0, small.length, 0, cb));
      return endSsh(c);
    }
    default: {
      // CLOSE sent, and the connection killed at once
      const h = await p<Buffer>((cb) => sf.open(`/leak/c${i}.bin`, 'w', cb));
      await p<void>((cb) => sf.write(h, small, 0, small.length, 0, cb));
      sf.close(h, ignore);
    }
  }
  await new Promise((r) => setImmediate(r));
  await killSsh(c);
}

async function httpBroken(i: number, agent: Agent): Promise<void> {
  const up = { authorization: token, 'content-type': 'application/octet-stream' };
  const form = multipart(Buffer.alloc(300 * 1024));
  await cutUpload('PUT', `/dav/leak/cut${i}.bin`, D, 1 << 20, big); // streamed
  await cutUpload('PUT', `/dav/leak/cut${i}.bin`, D, 1 << 20, small); // still being buffered
  await cutUpload('PUT', '/api/fs/put', { ...up, 'file-path': `/leak/rcut${i}.bin` }, 1 << 20, big);
  await cutUpload('PUT', '/api/fs/put', { ...up, 'file-path': `/leak/rcut${i}.bin`, 'as-task': 'true' }, 1 << 20, big);
  await cutUpload('PUT', '/api/fs/form', { authorization: token, 'file-path': `/leak/fcut${i}.bin`, 'content-type': form.type }, form.body.length, form.body.subarray(0, 150 * 1024));
  await cutDownload('/dav/leak/big.bin', D);
  const link = new URL((await api<{ raw_url: string }>('/api/fs/get', { path: '/leak/big.bin' })).data.raw_url);
  await cutDownload(link.pathname + link.search, { range: 'bytes=100-' });
  // Bad credentials from other loopback addresses (the throttle counts per IP), a bad token, missing paths.
  const other = `127.0.${1 + (i >> 8)}.${2 + (i & 0xff)}`;
  expect((await http('PROPFIND', '/dav/leak/', { headers: { authorization: 'Basic ' + Buffer.from(`admin:wrong${i}`).toString('base64'), depth: '0' }, localAddress: other })).status).toBe(401);
  await expect(sshConnect({ password: 'wrong', localAddress: other })).rejects.toThrow();
  expect((await http('GET', '/api/me', { headers: { authorization: `bogus.token.${i}` } })).status).toBe(200);
  expect((await http('GET', `/dav/leak/missing${i}`, { headers: D, agent })).status).toBe(404);
  expect((await api('/api/fs/get', { path: `/leak/missing${i}` })).code).toBe(500);
  await http('GET', `/d/leak/missing${i}`);
  // A keep-alive connection reset while answering.
  await pipelined(rawReq('GET', '/dav/leak/f1.txt', D) + rawReq('PROPFIND', '/dav/leak/', { ...D, Depth: '1' }), 400);
}

describe('resource-leak soak probe', () => {
  it('normal and broken traffic on REST, WebDAV and SFTP leaves no descriptor, temp file, hold or request behind', async () => {
    const agent = new Agent({ keepAlive: true, maxSockets: 2 });
    // One of each first: files opened once for good (journals) are opened now, not counted below.
    await davCycle(0, agent);
    await restCycle(0, agent);
    await sftpCycle(0);
    agent.destroy();
    const before = await baseline();

    const ka = new Agent({ keepAlive: true, maxSockets: 2 });
    for (let i = 1; i <= 24; i++) {
      await davCycle(i, ka);
      await restCycle(i, ka);
      if (i % 3 === 0) await sftpCycle(i);
      if (i % 2 === 0) await sftpBroken(i / 2);
      if (i % 3 === 1) await httpBroken(i, ka);
    }
    ka.destroy();
    await expectNothingLeft(before);
  });

  it('an upload whose client left during an async step before it (REST token check, WebDAV password check) ends: put, As-Task, form, WebDAV PUT', async () => {
    const before = await baseline();
    // The client goes at the moment the request arrives (the socket is destroyed then): the REST
    // handler runs after the token check, when the request's 'aborted' and 'close' are over.
    onArrival.set('gone', (req) => req.socket.destroy());
    // WebDAV too: a user's first request checks the password (scrypt, tens of milliseconds), and
    // the client goes meanwhile. Then the PUT looks its target up (cached listings: no I/O, so the
    // aborted signal is never looked at) and reads a body that will never come.
    const davUsers: string[] = [];
    for (let i = 0; i < 4; i++) {
      const r = await api('/api/admin/user/create', { username: `gone${i}`, password: `gone-pass-${i}`, base_path: '/', role: 0, permission: 8 | 256 | 512 });
      expect(r.code).toBe(200);
      davUsers.push('Basic ' + Buffer.from(`gone${i}:gone-pass-${i}`).toString('base64'));
    }
    const form = multipart(Buffer.alloc(100));
    const up = { authorization: token, 'content-type': 'application/octet-stream', 'x-probe': 'gone' };
    for (let i = 0; i < 6; i++) {
      await cutUpload('PUT', '/api/fs/put', { ...up, 'file-path': `/leak/g${i}.bin` }, small.length, small);
      await cutUpload('PUT', '/api/fs/put', { ...up, 'file-path': `/leak/g${i}.bin` }, 1 << 20, small);
      await cutUpload('PUT', '/api/fs/put', { ...up, 'file-path': `/leak/g${i}.bin`, 'as-task': 'true' }, 1 << 20, small);
      await cutUpload('PUT', '/api/fs/form', { ...up, 'file-path': `/leak/g${i}.bin`, 'content-type': form.type }, form.body.length, form.body);
    }
    expect((await http('PROPFIND', '/dav/leak/', { headers: { ...D, depth: '1' } })).status).toBe(207);
    for (const [i, authorization] of davUsers.entries()) {
      await cutUpload('PUT', `/dav/leak/w${i}.bin`, { authorization, 'x-probe': 'gone' }, small.length, small);
    }
    onArrival.clear();
    await expectNothingLeft(before);
  });

  it('requests pipelined behind a download are released when the client resets the connection', async () => {
    const before = await baseline();
    const logged = () => s.logs.filter((l) => l.includes('"msg":"webdav"')).length;
    const logs0 = logged();
    const link = new URL((await api<{ raw_url: string }>('/api/fs/get', { path: '/leak/f2.txt' })).data.raw_url);
    const queued = [
      rawReq('GET', '/dav/leak/f1.txt', D),
      rawReq('PROPFIND', '/dav/leak/', { ...D, Depth: '1' }),
      rawReq('PUT', '/dav/leak/piped.bin', D, 'x'.repeat(100)),
      rawReq('GET', link.pathname + link.search),
      rawReq('POST', '/api/fs/list', { Authorization: token, 'Content-Type': 'application/json' }, JSON.stringify({ path: '/leak' })),
    ].join('');
    const N = 8;
    // The first answer (8 MiB) is still going out when the client resets: everything after it is queued.
    for (let i = 0; i < N; i++) await pipelined(rawReq('GET', '/dav/leak/big.bin', D) + queued, 200_000);
    await expectNothingLeft(before);
    // Every WebDAV request is logged once it is over (answered, or 499 when the client went away);
    // lines reach the log in batches (src/log.ts), so they are waited for, bounded.
    for (let i = 0; i < 30 && logged() - logs0 < N * 4; i++) await sleep(100);
    expect(logged() - logs0, 'WebDAV access lines').toBe(N * 4);
  });
});
