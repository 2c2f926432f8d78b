/**
 * Files past 2^31, 2^32 bytes on every surface: sparse files (cheap to make and to read) with
 * 16-byte markers straddling 2^31 and 2^32, read back by exact offsets over REST (/d, /p), WebDAV
 * and SFTP, from the Local storage and through every remote driver against its real server; and
 * uploads that announce more than 4 GiB.
 */
import { randomBytes } from 'node:crypto';
import { open, readdir, readFile, rm, stat } from 'node:fs/promises';
import { request } from 'node:http';
import { join } from 'node:path';
import ssh2 from 'ssh2';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ADMIN_PASSWORD, startTestServer, type TestServer } from './harness.js';
import { list, ok, putFile, rawRequest } from './fs-helpers.js';
import { until, uploadLeftovers, withSsh2Sftp } from './clients/sftp.js';
import { createStorage, REMOTE_DRIVERS, startRemoteServers, type RemoteServers } from './remote-servers.js';

const G2 = 2 ** 31;
const G4 = 2 ** 32;
/** Odd, past 2^32 + 4096. */
const SIZE = G4 + (1 << 20) + 17;
/** Each marker is 16 bytes: the first two straddle 2^31 and 2^32. */
const MARKS = [G2 - 8, G4 - 8, G4 + 4096, SIZE - 16];
const markAt = (o: number) => Buffer.from(`<${o.toString(16)}>`.padEnd(16, '#'));

/** The bytes of the sparse file at [start, end]: zeros except where markers lie. */
function expected(start: number, end: number): Buffer {
  const out = Buffer.alloc(end - start + 1);
  for (const m of MARKS) {
    const mk = markAt(m);
    for (let i = 0; i < 16; i++) if (m + i >= start && m + i <= end) out[m + i - start] = mk[i]!;
  }
  return out;
}

async function makeSparse(path: string): Promise<void> {
  const fh = await open(path, 'w');
  try {
    await fh.truncate(SIZE);
    for (const m of MARKS) await fh.write(markAt(m), 0, 16, m);
  } finally {
    await fh.close();
  }
}

let ts: TestServer;
let admin: string;
let remote: RemoteServers;
const sparse: string[] = [];
const davAuth = 'Basic ' + Buffer.from(`admin:${ADMIN_PASSWORD}`).toString('base64');
const sftpLogin = () => ({ port: ts.sftpPort, username: 'admin', password: ADMIN_PASSWORD });

/** A raw request (fs-helpers' rawRequest) to this file's server. */
const http = (method: string, path: string, headers: Record<string, string> = {}) => rawRequest(ts, method, path, headers);

/** `/d` or `/p` URL of a file, signed. */
async function signed(prefix: '/d' | '/p', path: string): Promise<string> {
  const r = await ts.api<{ sign: string }>('/api/fs/get', { token: admin, body: { path } });
  ok(r);
  return `${prefix}${path}?sign=${encodeURIComponent(r.data!.sign)}`;
}

type Cb<T> = (err: (Error & { code?: number }) | null | undefined, v: T) => void;
const p = <T>(call: (cb: Cb<T>) => void) => new Promise<T>((res, rej) => call((e, v) => (e ? rej(e) : res(v))));

/** SFTP READs of 16 bytes at each offset through one handle, and the handle's FSTAT size. */
async function sftpReads(path: string, offsets: number[]): Promise<{ size: number; stat: number; reads: Buffer[] }> {
  return withSsh2Sftp(sftpLogin(), async (sftp) => {
    const stat = (await p<ssh2.Stats>((cb) => sftp.stat(path, cb))).size;
    const h = await p<Buffer>((cb) => sftp.open(path, 'r', cb));
    const size = (await p<ssh2.Stats>((cb) => sftp.fstat(h, cb))).size;
    const reads: Buffer[] = [];
    for (const o of offsets) {
      const b = Buffer.alloc(16);
      const n = await p<number>((cb) => sftp.read(h, b, 0, 16, o, cb));
      reads.push(b.subarray(0, n));
    }
    await p<void>((cb) => sftp.close(h, (e) => cb(e, undefined)));
    return { size, stat, reads };
  });
}

/** A WRITE carrying no data, sent raw: ssh2's client answers a zero-length write itself. */
function emptyWrite(sftp: ssh2.SFTPWrapper, handle: Buffer, offset: number): Promise<void> {
  type Raw = { _writeReqid: number; _requests: Record<number, { cb(err?: Error): void }>; outgoing: { id: number; window: number }; _protocol: { channelData(id: number, b: Buffer): void } };
  const s = sftp as unknown as Raw;
  const out = Buffer.alloc(4 + 1 + 4 + 4 + handle.length + 8 + 4);
  out.writeUInt32BE(out.length - 4, 0);
  out[4] = 6; // SSH_FXP_WRITE: id, handle, uint64 offset, empty data
  const id = (s._writeReqid = (s._writeReqid + 1) >>> 0);
  out.writeUInt32BE(id, 5);
  out.writeUInt32BE(handle.length, 9);
  handle.copy(out, 13);
  out.writeBigUInt64BE(BigInt(offset), 13 + handle.length);
  return new Promise((resolve, reject) => {
    s._requests[id] = { cb: (err) => (err ? reject(err) : resolve()) };
    s.outgoing.window -= out.length;
    s._protocol.channelData(s.outgoing.id, out);
  });
}

const RANGES: Array<[header: string, start: number, end: number]> = [
  [`bytes=${G2 - 8}-${G2 + 7}`, G2 - 8, G2 + 7],
  [`bytes=${G4 - 8}-${G4 + 7}`, G4 - 8, G4 + 7],
  [`bytes=${G4}-${G4}`, G4, G4],
  [`bytes=${G4 + 4096}-${G4 + 4111}`, G4 + 4096, G4 + 4111],
  [`bytes=${SIZE - 16}-`, SIZE - 16, SIZE - 1],
  ['bytes=-16', SIZE - 16, SIZE - 1],
  [`bytes=${SIZE - 16}-${2 ** 53 + 2}`, SIZE - 16, SIZE - 1],
];

async function expectRanges(url: string, headers: Record<string, string> = {}): Promise<void> {
  for (const [range, start, end] of RANGES) {
    const r = await http('GET', url, { ...headers, range });
    expect({ range, status: r.status, len: r.headers['content-length'], cr: r.headers['content-range'] })
      .toEqual({ range, status: 206, len: String(end - start + 1), cr: `bytes ${start}-${end}/${SIZE}` });
    expect(r.body.equals(expected(start, end)), `${url} ${range}: ${JSON.stringify(r.body.toString('latin1'))}`).toBe(true);
  }
  const head = await http('HEAD', url, headers);
  expect([head.status, head.headers['content-length']]).toEqual([200, String(SIZE)]);
  const again = await http('GET', url, { ...headers, range: `bytes=${G4}-${G4 + 15}`, 'if-range': String(head.headers.etag) });
  expect([again.status, again.body.equals(expected(G4, G4 + 15))]).toEqual([206, true]);
  const past = await http('GET', url, { ...headers, range: `bytes=${SIZE}-` });
  expect([past.status, past.headers['content-range']]).toEqual([416, `bytes */${SIZE}`]);
}

/** This test's s3rver bucket folder (objects as `<key>._S3rver_object`). */
const s3rverBucket = () => join(remote.s3.dir, remote.s3.bucket);
const exists = (f: string) => stat(f).then(() => true, () => false);

/** An HTTP request that announces `length` bytes, sends `send` of them, and waits for `ready` before giving up. */
function cutUpload(path: string, headers: Record<string, string>, length: number, send: number, ready: () => Promise<boolean> = async () => true) {
  const u = new URL(ts.url);
  return new Promise<boolean>((resolve) => {
    const req = request({ host: u.hostname, port: u.port, method: 'PUT', path, headers: { ...headers, 'content-length': String(length) } });
    req.on('error', () => undefined);
    req.write(Buffer.alloc(send, 7), () => void ready().then((r) => (req.destroy(), resolve(r))));
  });
}

beforeAll(async () => {
  remote = await startRemoteServers(REMOTE_DRIVERS);
  ts = await startTestServer();
  admin = await ts.login();
  for (const d of REMOTE_DRIVERS) ok(await createStorage(ts, admin, `/${d.toLowerCase()}`, d, remote.additionOf(d), { webdav_policy: 'native_proxy', web_proxy: true }));
}, 60_000);

afterAll(async () => {
  for (const f of sparse) await rm(f, { force: true });
  await ts?.close();
  await remote?.stop();
});

describe('a sparse file past 4 GiB on the Local storage', () => {
  beforeAll(async () => {
    const f = join(ts.dataDir, 'storage', 'big.bin');
    sparse.push(f);
    await makeSparse(f);
  });

  it('fs/list and fs/get give the exact size', async () => {
    const l = await list(ts, admin, '/', { refresh: true });
    ok(l);
    expect(l.data!.content.find((e) => e.name === 'big.bin')?.size).toBe(SIZE);
    const g = await ts.api<{ size: number }>('/api/fs/get', { token: admin, body: { path: '/big.bin' } });
    expect(g.data?.size).toBe(SIZE);
  });

  it('/d and /p answer ranges past 2^31 and 2^32 with the right bytes and headers', async () => {
    await expectRanges(await signed('/d', '/big.bin'));
    await expectRanges(await signed('/p', '/big.bin'));
  });

  it('WebDAV: PROPFIND getcontentlength, GET ranges, HEAD', async () => {
    const pf = await new Promise<string>((resolve, reject) => {
      const u = new URL(ts.url);
      const req = request({ host: u.hostname, port: u.port, method: 'PROPFIND', path: '/dav/big.bin', headers: { authorization: davAuth, depth: '0' } }, (res) => {
        let b = '';
        res.on('data', (c: Buffer) => (b += c.toString()));
        res.on('end', () => resolve(b));
      });
      req.on('error', reject);
      req.end();
    });
    expect(/<D:getcontentlength>(\d+)</.exec(pf)?.[1]).toBe(String(SIZE));
    await expectRanges('/dav/big.bin', { authorization: davAuth });
  });

  it('SFTP: STAT, FSTAT, READDIR sizes and READs at offsets past 2^32', async () => {
    const offs = [G2 - 8, G4 - 8, G4, G4 + 4096, SIZE - 16, SIZE - 1];
    const r = await sftpReads('/big.bin', offs);
    expect([r.stat, r.size]).toEqual([SIZE, SIZE]);
    r.reads.forEach((b, i) => expect(b.equals(expected(offs[i]!, Math.min(offs[i]! + 15, SIZE - 1))), `READ at ${offs[i]}`).toBe(true));
    const entries = await withSsh2Sftp(sftpLogin(), (sftp) => p<ssh2.FileEntry[]>((cb) => sftp.readdir('/', cb)));
    const e = entries.find((x) => x.filename === 'big.bin')!;
    expect(e.attrs.size).toBe(SIZE);
    expect(e.longname.split(/\s+/)[4]).toBe(String(SIZE));
  });
});

describe('remote drivers reading a sparse file past 4 GiB', () => {
  const name = `big-${randomBytes(4).toString('hex')}.bin`;
  beforeAll(async () => {
    const files = [join(remote.sshd.dataDir, name), join(remote.dav.dataDir, name), join(remote.ftpd.dataDir, name)];
    // s3rver keeps each object as `<key>._S3rver_object` in its store: upload a stub, then grow it there.
    ok(await putFile(ts, admin, `/s3/${name}`, 'stub'));
    files.push(join(s3rverBucket(), `${name}._S3rver_object`));
    expect(await exists(files[3]!)).toBe(true);
    for (const f of files) {
      sparse.push(f);
      await makeSparse(f);
    }
  });

  it.each(REMOTE_DRIVERS)('%s: exact size, /p ranges, WebDAV GET and SFTP READs at 2^32', async (driver) => {
    const path = `/${driver.toLowerCase()}/${name}`;
    const l = await list(ts, admin, `/${driver.toLowerCase()}`, { refresh: true });
    ok(l);
    expect(l.data!.content.find((e) => e.name === name)?.size).toBe(SIZE);
    await expectRanges(await signed('/p', path));
    const dav = await http('GET', `/dav${path}`, { authorization: davAuth, range: `bytes=${G4 - 8}-${G4 + 7}` });
    expect([dav.status, dav.headers['content-range'], dav.body.equals(expected(G4 - 8, G4 + 7))]).toEqual([206, `bytes ${G4 - 8}-${G4 + 7}/${SIZE}`, true]);
    const offs = [G4 - 8, G4 + 4096, SIZE - 16];
    const r = await sftpReads(path, offs);
    expect([r.stat, r.size]).toEqual([SIZE, SIZE]);
    r.reads.forEach((b, i) => expect(b.equals(expected(offs[i]!, offs[i]! + 15)), `${driver} READ at ${offs[i]}: ${b.toString('latin1')}`).toBe(true));
  });
});

describe('uploads announcing more than 4 GiB', () => {
  const FIVE_G = 5 * 2 ** 30 + 7;

  it('REST and WebDAV PUTs announcing 5 GiB and cut after 2 MiB leave nothing, under the name or as temp files', async () => {
    await cutUpload('/api/fs/put', { authorization: admin, 'file-path': '/cut-rest.bin' }, FIVE_G, 2 << 20);
    await cutUpload('/dav/cut-dav.bin', { authorization: davAuth }, FIVE_G, 2 << 20);
    const gone = async () => !(await exists(join(ts.dataDir, 'storage', 'cut-rest.bin'))) && !(await exists(join(ts.dataDir, 'storage', 'cut-dav.bin')));
    expect(await until(async () => (await gone()) && (await uploadLeftovers(ts.dataDir)).length === 0, 5000)).toBe(true);
  });

  it('S3: an upload announcing 64 GiB is sent in parts that fit S3\'s 10,000 (5 MiB parts stopped at 48.8 GiB)', async () => {
    const size = 64 * 2 ** 30;
    const key = `huge-${randomBytes(4).toString('hex')}.bin`;
    // s3rver writes part N of an upload to `._S3rver_uploads/<id>/N`, beside a `key` file.
    const firstPart = async () => {
      const uploads = join(s3rverBucket(), '._S3rver_uploads');
      for (const id of await readdir(uploads).catch(() => [])) {
        const dir = join(uploads, id);
        if ((await readFile(join(dir, 'key'), 'utf8').catch(() => '')) === key) return stat(join(dir, '1')).then((st) => st.size, () => 0);
      }
      return 0;
    };
    let seen = 0;
    await cutUpload('/api/fs/put', { authorization: admin, 'file-path': `/s3/${key}` }, size, 8 << 20, () => until(async () => (seen = await firstPart()) === Math.ceil(size / 10_000), 10_000));
    expect(seen).toBe(Math.ceil(size / 10_000));
    // The cut upload fails: no object (s3rver keeps aborted uploads' parts: it has no store call to drop them).
    const l = await list(ts, admin, '/s3', { refresh: true });
    expect(l.data!.content.map((e) => e.name)).not.toContain(key);
  });

  it('SFTP: a WRITE of no bytes at 2^32 + 10 changes nothing (as pwrite); CLOSE lands the file as written', async () => {
    await withSsh2Sftp(sftpLogin(), async (sftp) => {
      const h = await p<Buffer>((cb) => sftp.open('/empty-write.bin', 'w', cb));
      await p<void>((cb) => sftp.write(h, Buffer.from('ab'), 0, 2, 0, (e) => cb(e, undefined)));
      await emptyWrite(sftp, h, G4 + 10);
      expect((await p<ssh2.Stats>((cb) => sftp.fstat(h, cb))).size).toBe(2);
      await p<void>((cb) => sftp.close(h, (e) => cb(e, undefined)));
    });
    expect(await readFile(join(ts.dataDir, 'storage', 'empty-write.bin'), 'utf8')).toBe('ab');
  });

  it('SFTP: SETSTAT of a size past 2^32 is refused and leaves the file as it was', async () => {
    const f = join(ts.dataDir, 'storage', 'keep-size.bin');
    await makeSparse(f);
    sparse.push(f);
    const code = await withSsh2Sftp(sftpLogin(), (sftp) => new Promise<number | undefined>((res) => sftp.setstat('/keep-size.bin', { size: G4 + 7 }, (e) => res((e as { code?: number } | undefined)?.code))));
    expect(code).toBe(ssh2.utils.sftp.STATUS_CODE.OP_UNSUPPORTED);
    expect((await stat(f)).size).toBe(SIZE);
  });
});
