/**
 * Timestamps probe: how modification times are written, read, compared and printed over REST,
 * WebDAV and SFTP, on Local and Memory storages and through the SFTP (OpenSSH sshd) and FTP
 * (vsftpd) drivers. Every file gets a fixed date (utimes, X-OC-Mtime, Last-Modified, SETSTAT), so
 * every time asserted is exact. Found and fixed here:
 * - REST `modified`/`created` printed `.000+00:00`; AList (Go's RFC3339Nano) trims the fraction's
 *   zeros and writes a zero offset as `Z`; `/` without a storage is Go's zero time, not 1970;
 * - conditional requests read dates with Date.parse: `If-Modified-Since: 2023` answered 304 and a
 *   garbage If-Unmodified-Since 412 (REST /d and WebDAV); PROPPATCH Win32LastModifiedTime `2023`
 *   set the file's mtime;
 * - X-OC-Mtime: negative (pre-1970) seconds were ignored, a repeated header ignored, and a time past
 *   what a Date holds kept by Memory as "Invalid Date" (ETag "NaN-1"); REST Last-Modified ignored
 *   negative milliseconds (AList's ParseInt takes them); the VFS took an Invalid Date;
 * - SFTP attrs wrapped times outside uint32 (1969 showed as 2106, 2200 as 2063);
 * - the SFTP driver set a time outside uint32 wrapped (2200 became 2063), silently;
 * - the FTP driver reported the time asked for as kept (vsftpd stores 1901-12-13 for 1900).
 */
import { Readable } from 'node:stream';
import { stat, utimes, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import ssh2 from 'ssh2';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ADMIN_PASSWORD, startTestServer, type TestServer } from './harness.js';
import { davClient, davRequest, DAV, type DavClient } from './clients/webdav.js';
import { ok, putFile } from './fs-helpers.js';
import { settle } from './tasks-helpers.js';
import { withSsh2Sftp } from './clients/sftp.js';
import { createStorage, startRemoteServers, type RemoteServers } from './remote-servers.js';
import { isVfsError } from '../src/errors.js';
import { ctx, makeCore, principal, storage } from '../src/vfs/testing.js';

type Sftp = ssh2.SFTPWrapper;
type Cb<T> = (err: (Error & { code?: number }) | null | undefined, v: T) => void;
const p = <T>(call: (cb: Cb<T>) => void) => new Promise<T>((res, rej) => call((e, v) => (e ? rej(e) : res(v))));

let s: TestServer;
let admin: string;
let dav: DavClient;
let remote: RemoteServers<'SFTP' | 'FTP'>;
const savedTz = process.env.TZ;
const RFC1123 = /^(Mon|Tue|Wed|Thu|Fri|Sat|Sun), \d\d (Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec) \d{4} \d\d:\d\d:\d\d GMT$/;

/** A file on the Local storage at `/` (the host folder DATA/storage) with a fixed mtime. */
async function localFile(name: string, when: Date, body = 'x'): Promise<void> {
  const f = join(s.dataDir, 'storage', name);
  await writeFile(f, body);
  await utimes(f, when, when); // a Date: Node turns a negative *number* into "now"
}

async function restGet(path: string): Promise<{ modified: string; created: string; sign: string }> {
  const r = await s.api<{ modified: string; created: string; sign: string }>('/api/fs/get', { token: admin, body: { path } });
  ok(r);
  return r.data!;
}
const modifiedOf = async (path: string) => (await restGet(path)).modified;

async function listed(path: string): Promise<Record<string, string>> {
  const r = await s.api<{ content: Array<{ name: string; modified: string }> }>('/api/fs/list', { token: admin, body: { path, refresh: false } });
  ok(r);
  return Object.fromEntries(r.data!.content.map((e) => [e.name, e.modified]));
}

async function davLastModified(path: string): Promise<string> {
  const r = await dav('PROPFIND', path, { headers: { depth: '0' } });
  expect(r.status).toBe(207);
  return /<D:getlastmodified>([^<]*)</.exec(r.body)![1]!;
}

const sftpSession = <T>(fn: (sftp: Sftp) => Promise<T>) => withSsh2Sftp({ port: s.sftpPort, username: 'admin', password: ADMIN_PASSWORD }, fn);

beforeAll(async () => {
  process.env.TZ = 'UTC'; // AList prints the server's local offset: fixed here so strings are exact
  remote = await startRemoteServers(['SFTP', 'FTP']);
  s = await startTestServer();
  admin = await s.login();
  dav = davClient(s.url, 'admin', ADMIN_PASSWORD);
  ok(await createStorage(s, admin, '/mem', 'Memory', {}, { cache_expiration: 30 }));
  ok(await createStorage(s, admin, '/sftp', 'SFTP', remote.additionOf('SFTP')));
  ok(await createStorage(s, admin, '/ftp', 'FTP', remote.additionOf('FTP')));
}, 60_000);

afterAll(async () => {
  if (savedTz === undefined) delete process.env.TZ;
  else process.env.TZ = savedTz;
  await s?.close();
  await remote?.stop();
});

describe('printing times', () => {
  it('REST modified, created and fs/dirs print as Go RFC3339Nano: trimmed fraction, Z for UTC, the local offset otherwise', async () => {
    await localFile('whole.txt', new Date('2021-03-04T05:06:07Z'));
    await localFile('frac.txt', new Date('2021-03-04T05:06:07.250Z'));
    ok(await s.api('/api/fs/mkdir', { token: admin, body: { path: '/when' } }));
    await utimes(join(s.dataDir, 'storage', 'when'), new Date('2020-02-03T04:05:06.100Z'), new Date('2020-02-03T04:05:06.100Z'));
    expect(await modifiedOf('/whole.txt')).toBe('2021-03-04T05:06:07Z');
    expect(await modifiedOf('/frac.txt')).toBe('2021-03-04T05:06:07.25Z');
    const all = await listed('/');
    expect([all['whole.txt'], all['frac.txt'], all['when']]).toEqual(['2021-03-04T05:06:07Z', '2021-03-04T05:06:07.25Z', '2020-02-03T04:05:06.1Z']);
    const dirs = await s.api<Array<{ name: string; modified: string }>>('/api/fs/dirs', { token: admin, body: { path: '/' } });
    expect(dirs.data!.find((d) => d.name === 'when')?.modified).toBe('2020-02-03T04:05:06.1Z');
    // `created` on Memory is set by the server at upload: only its shape can be fixed here.
    ok(await putFile(s, admin, '/mem/c.txt', 'x'));
    expect((await restGet('/mem/c.txt')).created).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d{1,2}[1-9]|\.[1-9])?Z$/);
    process.env.TZ = 'Asia/Kolkata'; // +05:30
    try {
      expect(await modifiedOf('/frac.txt')).toBe('2021-03-04T10:36:07.25+05:30');
      process.env.TZ = 'America/St_Johns'; // -03:30 in March 2021
      expect(await modifiedOf('/whole.txt')).toBe('2021-03-04T01:36:07-03:30');
    } finally {
      process.env.TZ = 'UTC';
    }
  });

  it('`/` without a storage is AList\'s root with Go\'s zero time', async () => {
    ok(await s.api('/api/admin/storage/delete?id=1', { token: admin, body: {} }));
    try {
      const root = await s.api<{ name: string; modified: string }>('/api/fs/get', { token: admin, body: { path: '/' } });
      expect([root.data?.name, root.data?.modified]).toEqual(['root', '0001-01-01T00:00:00Z']);
    } finally {
      ok(await createStorage(s, admin, '/', 'Local', { root_folder_path: join(s.dataDir, 'storage') }));
    }
  });

  it('SFTP attrs clamp times SFTP cannot carry (uint32 seconds) instead of wrapping them; longnames keep the true date', async () => {
    await localFile('y1969.txt', new Date('1969-12-31T00:00:00Z'));
    await localFile('y2200.txt', new Date('2200-01-01T00:00:00Z'));
    await localFile('y2100.txt', new Date('2100-01-01T00:00:00.500Z'));
    await sftpSession(async (sftp) => {
      const times = async (n: string) => {
        const st = await p<ssh2.Stats>((cb) => sftp.stat('/' + n, cb));
        return [st.mtime, st.atime];
      };
      expect(await times('y1969.txt')).toEqual([0, 0]);
      expect(await times('y2200.txt')).toEqual([2 ** 32 - 1, 2 ** 32 - 1]);
      expect(await times('y2100.txt')).toEqual([4102444800, 4102444800]);
      const list = await p<ssh2.FileEntry[]>((cb) => sftp.readdir('/', cb));
      const row = (n: string) => list.find((e) => e.filename === n)!;
      expect([row('y1969.txt').attrs.mtime, row('y2200.txt').attrs.mtime]).toEqual([0, 2 ** 32 - 1]);
      expect(row('y1969.txt').longname).toMatch(/ Dec 31 {2}1969 y1969\.txt$/);
      expect(row('y2200.txt').longname).toMatch(/ Jan {2}1 {2}2200 y2200\.txt$/);
    });
  });
});

describe('writing times', () => {
  it('X-OC-Mtime on Local and Memory: seconds, fractions, 0, negative and a repeated header are kept; garbage and out-of-range times are ignored', async () => {
    const cases: Array<[value: string | string[], kept: string | undefined]> = [
      ['1600000000', '2020-09-13T12:26:40Z'],
      ['1600000000.123', '2020-09-13T12:26:40.123Z'],
      ['0', '1970-01-01T00:00:00Z'],
      ['-86400', '1969-12-31T00:00:00Z'],
      [['1600000000', '1700000000'], '2020-09-13T12:26:40Z'],
      ['99999999999999', undefined],
      ['abc', undefined],
      ['1e9', undefined],
    ];
    for (const root of ['', '/mem']) {
      for (const [i, [value, kept]] of cases.entries()) {
        const path = `${root}/oc-${i}.txt`;
        // node:http sends an array as the header repeated
        const r = await dav('PUT', path, { body: 'x', headers: { 'x-oc-mtime': value as string } });
        expect([path, r.status, r.headers['x-oc-mtime']]).toEqual([path, 201, kept === undefined ? undefined : 'accepted']);
        expect(r.headers.etag).toMatch(/^"-?[0-9a-f]+-1"$/); // not "NaN-1"
        const lm = await davLastModified(path);
        expect(lm).toMatch(RFC1123);
        if (kept !== undefined) {
          expect([path, await modifiedOf(path)]).toEqual([path, kept]);
          expect(Date.parse(lm)).toBe(Math.floor(Date.parse(kept) / 1000) * 1000);
        }
      }
    }
    expect((await stat(join(s.dataDir, 'storage', 'oc-3.txt'))).mtimeMs).toBe(-86400_000);
  });

  it('REST Last-Modified takes negative milliseconds (dates before 1970) as AList does', async () => {
    for (const root of ['', '/mem']) {
      ok(await putFile(s, admin, `${root}/lm-old.txt`, 'x', { 'last-modified': '-86400000' }));
      ok(await putFile(s, admin, `${root}/lm-new.txt`, 'x', { 'last-modified': '1600000000700' }));
      expect([await modifiedOf(`${root}/lm-old.txt`), await modifiedOf(`${root}/lm-new.txt`)]).toEqual(['1969-12-31T00:00:00Z', '2020-09-13T12:26:40.7Z']);
    }
  });

  it('PROPPATCH Win32LastModifiedTime sets the mtime from an HTTP-date only', async () => {
    await localFile('win.txt', new Date('2021-03-04T05:06:07Z'));
    const patch = (v: string) =>
      dav('PROPPATCH', '/win.txt', {
        headers: { 'content-type': 'application/xml' },
        body: `<?xml version="1.0"?><D:propertyupdate xmlns:D="DAV:" xmlns:Z="urn:schemas-microsoft-com:"><D:set><D:prop><Z:Win32LastModifiedTime>${v}</Z:Win32LastModifiedTime></D:prop></D:set></D:propertyupdate>`,
      });
    expect((await patch('2023')).status).toBe(207);
    expect(await modifiedOf('/win.txt')).toBe('2021-03-04T05:06:07Z');
    expect((await patch('Tue, 01 Jan 2019 10:00:00 GMT')).status).toBe(207);
    expect(await modifiedOf('/win.txt')).toBe('2019-01-01T10:00:00Z');
  });

  it('the VFS refuses an Invalid Date for put and setModified (INVALID), leaving nothing behind', async () => {
    const core = await makeCore();
    try {
      await core.storages.create(storage('/', 'Memory'));
      const c = ctx(principal(0xffff));
      const bad = new Date(Number.NaN);
      const put = await core.vfs.put(c, '/bad.txt', Readable.from([Buffer.from('x')]), { modified: bad }).catch((e: unknown) => e);
      expect(isVfsError(put, 'INVALID')).toBe(true);
      await expect(core.vfs.stat(c, '/bad.txt')).rejects.toThrow();
      await core.vfs.put(c, '/ok.txt', Readable.from([Buffer.from('x')]), { modified: new Date('2020-01-01T00:00:00Z') });
      expect(isVfsError(await core.vfs.setModified(c, '/ok.txt', bad).catch((e: unknown) => e), 'INVALID')).toBe(true);
      expect((await core.vfs.stat(c, '/ok.txt')).modified.toISOString()).toBe('2020-01-01T00:00:00.000Z');
    } finally {
      await core.cleanup();
    }
  });

  it('SFTP SETSTAT of 0, 2^31-1 and 2^32-1 reads back the same over SFTP, REST and WebDAV, and a cached listing shows it', async () => {
    expect(await listed('/mem')).toHaveProperty('c.txt'); // the Memory storage caches this listing (30 min)
    await sftpSession(async (sftp) => {
      for (const [t, iso, http] of [
        [0, '1970-01-01T00:00:00Z', 'Thu, 01 Jan 1970 00:00:00 GMT'],
        [2 ** 31 - 1, '2038-01-19T03:14:07Z', 'Tue, 19 Jan 2038 03:14:07 GMT'],
        [2 ** 32 - 1, '2106-02-07T06:28:15Z', 'Sun, 07 Feb 2106 06:28:15 GMT'],
      ] as const) {
        for (const path of ['/frac.txt', '/mem/c.txt']) {
          await p<void>((cb) => sftp.utimes(path, t, t, cb as Cb<void>));
          expect((await p<ssh2.Stats>((cb) => sftp.stat(path, cb))).mtime).toBe(t);
          expect([path, await modifiedOf(path), await davLastModified(path)]).toEqual([path, iso, http]);
        }
        expect((await listed('/mem'))['c.txt']).toBe(iso);
      }
    });
  });
});

describe('conditional requests', () => {
  const T = new Date('2022-01-01T12:00:00.700Z');
  const AT = 'Sat, 01 Jan 2022 12:00:00 GMT';
  let url: string;
  beforeAll(async () => {
    await localFile('cond.txt', T, 'hello');
    url = `${s.url}/d/cond.txt?sign=${encodeURIComponent((await restGet('/cond.txt')).sign)}`;
  });
  const rest = async (h: Record<string, string>) => (await fetch(url, { headers: h })).status;
  const webdav = async (h: Record<string, string>) => (await dav('GET', '/cond.txt', { headers: h })).status;

  it('REST /d and WebDAV GET compare whole seconds and ignore what is not an HTTP-date', async () => {
    const cases: Array<[header: string, value: string, status: number]> = [
      ['if-modified-since', AT, 304], // 12:00:00.700 is not newer than 12:00:00
      ['if-modified-since', 'Sat, 01 Jan 2022 11:59:59 GMT', 200],
      ['if-modified-since', 'Saturday, 01-Jan-22 12:00:00 GMT', 304], // RFC 850
      ['if-modified-since', 'Sat Jan  1 12:00:00 2022', 304], // asctime
      ['if-modified-since', '2023', 200], // not an HTTP-date: Date.parse made it 2023-01-01
      ['if-modified-since', 'Sat, 01 Jan 2023 12:00:00', 200], // no zone
      ['if-modified-since', 'Mon, 31 Feb 2025 00:00:00 GMT', 200], // no such day
      ['if-unmodified-since', AT, 200],
      ['if-unmodified-since', 'Sat, 01 Jan 2022 11:59:59 GMT', 412],
      ['if-unmodified-since', '1', 200], // Date.parse: 2001-01-01, so 412
      ['if-unmodified-since', 'garbage', 200],
    ];
    for (const [h, v, status] of cases) {
      expect([h, v, await rest({ [h]: v }), await webdav({ [h]: v })]).toEqual([h, v, status, status]);
    }
  });

  it('If-Range with a date serves the range only when it equals Last-Modified', async () => {
    for (const [v, status] of [[AT, 206], ['Sat, 01 Jan 2022 12:00:01 GMT', 200], ['Sat, 01 Jan 2022 12:00:00', 200]] as const) {
      const h = { 'if-range': v, range: 'bytes=0-1' };
      expect([v, await rest(h), await webdav(h)]).toEqual([v, status, status]);
    }
  });

  it('a WebDAV PUT ignores an If-Unmodified-Since that is not a date', async () => {
    const r = await davRequest(s.url, 'PUT', `${DAV}/cond-put.txt`, { user: 'admin', password: ADMIN_PASSWORD, body: 'x' });
    expect(r.status).toBe(201);
    const again = await dav('PUT', '/cond-put.txt', { body: 'y', headers: { 'if-unmodified-since': '1' } });
    expect(again.status).toBe(204);
  });
});

describe('remote drivers', () => {
  it('SFTP storage: a time SFTP cannot carry is not kept (no wrap to 2063); a valid one is, through sshd', async () => {
    const big = await dav('PUT', '/sftp/y2200.txt', { body: 'x', headers: { 'x-oc-mtime': '7258118400' } });
    expect([big.status, big.headers['x-oc-mtime']]).toEqual([201, undefined]);
    const onDisk = (await stat(join(remote.sshd.dataDir, 'y2200.txt'))).mtime;
    expect(onDisk.getUTCFullYear()).not.toBe(2063);
    expect(Date.parse(await modifiedOf('/sftp/y2200.txt'))).toBe(Math.floor(onDisk.getTime() / 1000) * 1000);
    ok(await putFile(s, admin, '/sftp/y1969.txt', 'x', { 'last-modified': '-86400000' }));
    expect((await stat(join(remote.sshd.dataDir, 'y1969.txt'))).mtime.getUTCFullYear()).not.toBe(2106);
    const fine = await dav('PUT', '/sftp/fine.txt', { body: 'x', headers: { 'x-oc-mtime': '1600000000' } });
    expect(fine.headers['x-oc-mtime']).toBe('accepted');
    expect((await stat(join(remote.sshd.dataDir, 'fine.txt'))).mtimeMs).toBe(1600000000_000);
    expect(await modifiedOf('/sftp/fine.txt')).toBe('2020-09-13T12:26:40Z');
  });

  it('FTP storage: what vsftpd kept is what is reported (1900 is stored as 1901-12-13: not accepted)', async () => {
    const old = await dav('PUT', '/ftp/y1900.txt', { body: 'x', headers: { 'x-oc-mtime': '-2208988800' } });
    expect([old.status, old.headers['x-oc-mtime']]).toEqual([201, undefined]);
    expect(await modifiedOf('/ftp/y1900.txt')).toBe('1901-12-13T20:45:52Z');
    const y1969 = await dav('PUT', '/ftp/y1969.txt', { body: 'x', headers: { 'x-oc-mtime': '-86400' } });
    expect(y1969.headers['x-oc-mtime']).toBe('accepted');
    expect(await modifiedOf('/ftp/y1969.txt')).toBe('1969-12-31T00:00:00Z');
  });

  it('copies keep the source mtime: REST copy tasks to Memory, SFTP and FTP, WebDAV COPY to Memory and Local', async () => {
    await localFile('src.txt', new Date('2021-03-04T05:06:07.250Z'), 'abc');
    for (const dst of ['/mem', '/sftp', '/ftp']) ok(await s.api('/api/fs/copy', { token: admin, body: { src_dir: '/', dst_dir: dst, names: ['src.txt'] } }));
    const done = await settle(s, admin, 'copy', 30_000);
    expect(done.filter((t) => t.state !== 2).map((t) => `${t.name}: ${t.error}`)).toEqual([]);
    expect(await modifiedOf('/mem/src.txt')).toBe('2021-03-04T05:06:07.25Z');
    expect(await modifiedOf('/sftp/src.txt')).toBe('2021-03-04T05:06:07Z'); // SFTP and FTP keep seconds
    expect(await modifiedOf('/ftp/src.txt')).toBe('2021-03-04T05:06:07Z');
    for (const to of ['/mem/dcopy.txt', '/dcopy.txt']) {
      expect((await dav('COPY', '/src.txt', { headers: { destination: `${s.url}${DAV}${to}` } })).status).toBe(201);
      expect(await modifiedOf(to)).toBe('2021-03-04T05:06:07.25Z');
    }
  });
});
