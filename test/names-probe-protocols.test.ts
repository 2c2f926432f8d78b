/**
 * File-name probe across REST, WebDAV and SFTP: every name a user can legitimately have on a Linux
 * Local storage must round-trip byte for byte whatever protocol made it and whatever protocol lists,
 * reads, renames, moves or deletes it; names the storage cannot hold get a clear error and create
 * nothing. Clients: REST (fs/put and fs/form with `File-Path` URL-encoded as AList's front end does,
 * fs/mkdir, fs/list, fs/get, fs/rename, fs/move, fs/copy, fs/remove, /d and /p downloads), WebDAV
 * (exact percent-encoding on the wire, PROPFIND hrefs and displaynames, rclone, davfs2), SFTP
 * (ssh2's client, and OpenSSH `sftp` in batch mode), and an FTP storage for a remote driver.
 *
 * By design (asserted as such): a backslash is refused like `/` (AList reads it as a separator);
 * XML 1.0 cannot carry C0 controls or U+FFFE/U+FFFF, so displaynames show U+FFFD there while
 * hrefs keep the name; a WebDAV request naming an NFD spelling whose NFC twin exists (and no
 * exact match) reaches the twin (Finder, protocols/webdav/unicode-names.ts).
 *
 * Defects this file found, each fixed, with the test that shows it:
 * - SFTP takes a name that is not UTF-8 (a Latin-1 client's `café`) as U+FFFD: two different names
 *   land on one file, the second upload silently replacing the first (ssh2 decodes names lossily).
 * - REST `File-Path` sent as raw bytes and WebDAV `Destination` with bytes that are not UTF-8 are
 *   decoded lossily (protocols/header-text.ts) into U+FFFD names instead of answering 400.
 * - REST JSON names with a lone UTF-16 surrogate (`"\ud800"`) create U+FFFD names instead of 400.
 * - PROPFIND's `<D:displayname>` carries a carriage return raw: XML parsers read it as a line feed.
 * - FTP storages: a name with U+2028/U+2029 is listed cut at that character (basic-ftp's LIST
 *   patterns use `.`), so the file is uploaded and then not found.
 */
import { chmod, readdir, readFile, mkdir as mkdirLocal, mkdtemp, rm, stat, writeFile } from 'node:fs/promises';
import { existsSync } from 'node:fs';
import { connect } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import ssh2 from 'ssh2';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ADMIN_PASSWORD, startTestServer, type TestServer } from './harness.js';
import { davClient, requireTool, run, type DavClient } from './clients/webdav.js';
import { requireSftpTools, runSftp, sftpArgv } from './clients/sftp.js';
import { startVsftpd, type Vsftpd } from '../drivers/testing/vsftpd.js';

// ---------------------------------------------------------------------------------------------
// The names
// ---------------------------------------------------------------------------------------------

/** [id, name]: every one is a valid Linux file name (at most 255 UTF-8 bytes, no `/` or NUL). */
const LEGAL: Array<[string, string]> = [
  ['leading space', ' lead'], ['trailing space', 'trail '], ['double space', 'a  b'], ['only a space', ' '],
  ['trailing dot', 'dot.'], ['trailing dots', 'dots..'], ['space dot', ' .'], ['three dots', '...'],
  ['percent', '100%'], ['%20', 'a%20b'], ['%2F', 'a%2Fb'], ['%25', 'a%25b'], ['%-escaped UTF-8', '%E4%B8%AD'],
  ['hash', 'a#b'], ['question mark', 'a?b'], ['ampersand', 'a&b'], ['plus', 'a+b'], ['plus %2B', 'a+%2B'], ['semicolon', 'a;b'],
  ['equals', 'a=b'], ['apostrophe', "it's"], ['double quotes', 'say "hi"'], ['angle brackets', '<tag>'], ['pipe', 'a|b'],
  ['asterisk', 'a*b'], ['colon', 'a:b'], ['tilde', '~tilde'], ['dollar', '$HOME'], ['backtick', 'a`b'], ['square brackets', '[x]'],
  ['braces', '{y}'], ['emoji', '😀 smile'], ['astral', '𝄞 clef 𠀋'], ['CJK', '中文文件'], ['RTL Hebrew', 'שלום עולם'],
  ['RTL Arabic', 'مرحبا.txt'], ['NFC é', 'caf\u00e9'], ['NFD é', 'cafe\u0301'], ['zero-width joiner', '👨\u200d👩\u200d👧'],
  ['255 bytes ASCII', 'x'.repeat(251) + '.txt'], ['255 bytes CJK', '中'.repeat(85)], ['255 bytes emoji', '😀'.repeat(63) + 'abc'],
  ['leading dash', '-dash'], ['hidden', '.hidden'], ['a..b', 'a..b'], ['URL-like', 'http:example.com'], ['tab', 'a\tb'],
  ['newline', 'a\nb'], ['carriage return', 'a\rb'], ['DEL 0x7f', 'a\x7fb'], ['lone 0x01', '\x01'], ['upper case', 'Case.txt'],
  ['lower case', 'case.txt'], ['__proto__', '__proto__'], ['constructor', 'constructor'], ['Windows reserved CON', 'CON'],
  ['BOM', '\ufeffbom'], ['U+2028', 'a\u2028b'], ['noncharacter U+FFFE', 'a\ufffeb'],
];

const bytes = (s: string) => Buffer.byteLength(s);
for (const [id, n] of LEGAL) if (bytes(n) > 255 || /[/\0]/.test(n)) throw new Error(`not a legal name: ${id}`);

// ---------------------------------------------------------------------------------------------
// Server, clients and helpers
// ---------------------------------------------------------------------------------------------

let ts: TestServer;
let token: string;
let dav: DavClient;
let sshClient: ssh2.Client;
let sftp: ssh2.SFTPWrapper;
let work: string;

const storage = (p = '') => join(ts.dataDir, 'storage', p);
/** Each segment percent-encoded (what careful clients send; encodeURIComponent keeps only `-_.!~*'()`). */
const enc = (p: string) => p.split('/').map(encodeURIComponent).join('/');
const J = JSON.stringify;
const body = (id: string) => `body of ${id} \u00fc`;

beforeAll(async () => {
  requireSftpTools();
  ts = await startTestServer();
  token = await ts.login();
  dav = davClient(ts.url, 'admin', ADMIN_PASSWORD);
  work = await mkdtemp(join(tmpdir(), 'tg-names-'));
  sshClient = new ssh2.Client();
  await new Promise<void>((resolve, reject) => {
    sshClient.once('ready', () => resolve());
    sshClient.once('error', reject);
    sshClient.connect({ host: '127.0.0.1', port: ts.sftpPort, username: 'admin', password: ADMIN_PASSWORD, readyTimeout: 20_000 });
  });
  sftp = await new Promise((resolve, reject) => sshClient.sftp((e, s) => (e ? reject(e) : resolve(s))));
});

afterAll(async () => {
  sshClient?.end();
  await ts?.close();
  if (work) await rm(work, { recursive: true, force: true });
});

type SftpErr = (Error & { code?: number }) | null | undefined;
/** An SFTP call as a promise: resolves with the result, rejects with the status error. */
function sf<T = void>(call: (cb: (err: SftpErr, r?: T) => void) => void): Promise<T> {
  return new Promise((resolve, reject) => call((err, r) => (err ? reject(err) : resolve(r as T))));
}
const sftpWrite = (p: string, data: string) => sf((cb) => sftp.writeFile(p, data, cb));
const sftpRead = (p: string) => sf<Buffer>((cb) => sftp.readFile(p, cb)).then((b) => b.toString());
const sftpList = (p: string) => sf<ssh2.FileEntry[]>((cb) => sftp.readdir(p, cb));
/** The SFTP failure of a call ('ok' when it succeeded): `code message`. */
const sftpOutcome = (call: (cb: (err: SftpErr) => void) => void) =>
  new Promise<string>((resolve) => call((err) => resolve(err ? `${err.code} ${err.message}` : 'ok')));

/** fs/put as AList's front end sends it: File-Path is encodeURIComponent of the whole path. */
async function restPut(path: string, data: string) {
  const res = await fetch(ts.url + '/api/fs/put', {
    method: 'PUT', headers: { authorization: token, 'file-path': encodeURIComponent(path), 'content-type': 'application/octet-stream' }, body: data,
  });
  return (await res.json()) as { code: number; message: string };
}

async function restForm(path: string, data: string) {
  const form = new FormData();
  form.append('file', new Blob([data]), 'upload.bin');
  const res = await fetch(ts.url + '/api/fs/form', { method: 'PUT', headers: { authorization: token, 'file-path': encodeURIComponent(path) }, body: form });
  return (await res.json()) as { code: number; message: string };
}

const api = <T = unknown>(path: string, b: unknown) => ts.api<T>(path, { token, body: b });

interface ListEntry { name: string; is_dir: boolean; size: number }
async function restNames(dir: string): Promise<ListEntry[]> {
  const r = await api<{ content: ListEntry[] }>('/api/fs/list', { path: dir, refresh: true });
  expect(r.code, r.message).toBe(200);
  return r.data!.content;
}

/** Exactly what the Local disk holds in `dir` (raw bytes, decoded only for the comparison). */
async function diskNames(dir: string): Promise<Buffer[]> {
  return readdir(storage(dir), { encoding: 'buffer' });
}
async function expectOnDiskExactly(dir: string, names: string[]): Promise<void> {
  const got = (await diskNames(dir)).map((b) => b.toString('hex')).sort();
  expect(got, `disk ${dir}: ${J((await diskNames(dir)).map((b) => b.toString()))}`).toEqual(names.map((n) => Buffer.from(n).toString('hex')).sort());
}

/** XML 1.0 character data as a parser delivers it: line ends normalised (§2.11), then references. */
function xmlText(raw: string): string {
  return raw
    .replace(/\r\n?/g, '\n')
    .replace(/&(#x[0-9a-fA-F]+|#\d+|amp|lt|gt|quot|apos);/g, (_m, e: string) =>
      e[0] === '#' ? String.fromCodePoint(e[1] === 'x' ? parseInt(e.slice(2), 16) : parseInt(e.slice(1), 10)) : ({ amp: '&', lt: '<', gt: '>', quot: '"', apos: "'" } as Record<string, string>)[e]!,
    );
}

interface DavEntry { href: string; name: string; display: string; dir: boolean }
/** A Depth-1 PROPFIND of `dir`: its members, each href decoded back into the name it encodes. */
async function propfind(dir: string): Promise<DavEntry[]> {
  const r = await dav('PROPFIND', enc(dir) + '/', { headers: { Depth: '1' } });
  expect(r.status, r.body).toBe(207);
  const out: DavEntry[] = [];
  for (const m of r.body.matchAll(/<D:response>(.*?)<\/D:response>/gs)) {
    const href = xmlText(/<D:href>(.*?)<\/D:href>/s.exec(m[1]!)![1]!);
    const base = `/dav${enc(dir)}/`;
    if (href === base) continue;
    expect(href.startsWith(base), href).toBe(true);
    const seg = href.slice(base.length).replace(/\/$/, '');
    expect(seg, 'a member href is one segment').not.toContain('/');
    out.push({ href, name: decodeURIComponent(seg), display: xmlText(/<D:displayname>(.*?)<\/D:displayname>/s.exec(m[1]!)?.[1] ?? ''), dir: m[1]!.includes('<D:collection/>') });
  }
  return out;
}

/** fs/get, then the file through its raw_url and through /d (with the sign): body and Content-Disposition. */
async function downloads(path: string): Promise<Array<{ via: string; status: number; body: string; filename?: string }>> {
  const g = await api<{ name: string; raw_url: string; sign: string }>('/api/fs/get', { path });
  expect(g.code, g.message).toBe(200);
  const out = [];
  for (const [via, url] of [['raw_url', g.data!.raw_url], ['/d', `${ts.url}/d${enc(path)}?sign=${encodeURIComponent(g.data!.sign)}`]] as const) {
    const res = await fetch(url);
    const cd = res.headers.get('content-disposition') ?? '';
    const star = /filename\*=UTF-8''([^;\s]*)/i.exec(cd)?.[1];
    out.push({ via, status: res.status, body: await res.text(), filename: star === undefined ? undefined : decodeURIComponent(star) });
  }
  return out;
}

/** A raw HTTP/1.1 request written byte for byte (header values given as Buffers go out unchanged). */
function rawHttp(method: string, path: string, headers: Record<string, string | Buffer>, data = ''): Promise<{ status: number; body: string }> {
  const u = new URL(ts.url);
  const head = Buffer.concat([
    Buffer.from(`${method} ${path} HTTP/1.1\r\nHost: ${u.host}\r\nConnection: close\r\nContent-Length: ${Buffer.byteLength(data)}\r\n`),
    ...Object.entries(headers).flatMap(([k, v]) => [Buffer.from(`${k}: `), Buffer.from(v), Buffer.from('\r\n')]),
    Buffer.from('\r\n'),
  ]);
  return new Promise((resolve, reject) => {
    const sock = connect(Number(u.port), u.hostname, () => sock.write(Buffer.concat([head, Buffer.from(data)])));
    const chunks: Buffer[] = [];
    sock.on('data', (c: Buffer) => chunks.push(c));
    sock.on('error', reject);
    sock.on('close', () => {
      const text = Buffer.concat(chunks).toString();
      const status = Number(/^HTTP\/1\.1 (\d{3})/.exec(text)?.[1] ?? 0);
      let b = text.slice(text.indexOf('\r\n\r\n') + 4);
      if (/\r\ntransfer-encoding: chunked/i.test(text.slice(0, text.indexOf('\r\n\r\n')))) b = b.replace(/^[0-9a-f]+\r\n/i, '').replace(/\r\n0\r\n\r\n$/, '');
      resolve({ status, body: b });
    });
  });
}

// ---------------------------------------------------------------------------------------------
// Legal names: made over one protocol, seen identically over every one
// ---------------------------------------------------------------------------------------------

type Maker = 'REST fs/put' | 'REST fs/form' | 'WebDAV PUT' | 'SFTP write';
const MAKERS: Record<Maker, (path: string, data: string) => Promise<void>> = {
  'REST fs/put': async (p, d) => expect(await restPut(p, d)).toMatchObject({ code: 200 }),
  'REST fs/form': async (p, d) => expect(await restForm(p, d)).toMatchObject({ code: 200 }),
  'WebDAV PUT': async (p, d) => expect((await dav('PUT', enc(p), { body: d })).status).toBe(201),
  'SFTP write': (p, d) => sftpWrite(p, d),
};

/** Every view of folder `dir`, which must hold exactly one entry: `name`, a file with `data` or a folder. */
async function expectSeenEverywhere(dir: string, name: string, data: string | null): Promise<void> {
  const isDir = data === null;
  // Local disk: that exact byte string, nothing else.
  await expectOnDiskExactly(dir, [name]);
  expect((await stat(storage(`${dir}/${name}`))).isDirectory()).toBe(isDir);
  // REST listing and fs/get.
  const listed = await restNames(dir);
  expect(listed.map((e) => [e.name, e.is_dir])).toEqual([[name, isDir]]);
  // WebDAV: the href decodes back to the name; displayname as an XML parser reads it (XML 1.0 cannot
  // carry C0 controls other than tab/LF/CR, nor U+FFFE/U+FFFF: those are U+FFFD; the href carries the name).
  const members = await propfind(dir);
  expect(members.map((m) => [m.name, m.dir])).toEqual([[name, isDir]]);
  if (!/[\r]/.test(name)) expect(members[0]!.display).toBe(name.replace(/[\x00-\x08\x0b\x0c\x0e-\x1f\ufffe\uffff]/g, '\ufffd'));
  // SFTP: READDIR's filename and the longname (`ls -l` line ending in the name).
  const entries = (await sftpList(dir)).filter((e) => e.filename !== '.' && e.filename !== '..');
  expect(entries.map((e) => e.filename)).toEqual([name]);
  expect(entries[0]!.longname.endsWith(' ' + name), entries[0]!.longname).toBe(true);
  expect(entries[0]!.longname[0]).toBe(isDir ? 'd' : '-');
  const path = `${dir}/${name}`;
  const g = await api<{ name: string; is_dir: boolean }>('/api/fs/get', { path });
  expect([g.code, g.data?.name, g.data?.is_dir]).toEqual([200, name, isDir]);
  if (isDir) return;
  // Contents over each protocol, and the download's RFC 5987 filename.
  expect((await dav('GET', enc(path))).body).toBe(data);
  expect(await sftpRead(path)).toBe(data);
  for (const d of await downloads(path)) expect([d.via, d.status, d.body, d.filename]).toEqual([d.via, 200, data, name]);
}

let seq = 0;
/** A fresh folder holding nothing yet (made on disk: the probe is about what goes into it). */
async function freshDir(): Promise<string> {
  const dir = `/probe-${++seq}`;
  await mkdirLocal(storage(dir));
  return dir;
}

describe.each(Object.keys(MAKERS) as Maker[])('a file made over %s', (maker) => {
  it.each(LEGAL)('%s: same name and bytes on disk, in REST, WebDAV and SFTP listings and reads', async (id, name) => {
    const dir = await freshDir();
    await MAKERS[maker](`${dir}/${name}`, body(id));
    await expectSeenEverywhere(dir, name, body(id));
  });
});

type DirMaker = 'REST fs/mkdir' | 'WebDAV MKCOL' | 'SFTP mkdir';
const DIR_MAKERS: Record<DirMaker, (path: string) => Promise<void>> = {
  'REST fs/mkdir': async (p) => expect(await api('/api/fs/mkdir', { path: p })).toMatchObject({ code: 200 }),
  'WebDAV MKCOL': async (p) => expect((await dav('MKCOL', enc(p))).status).toBe(201),
  'SFTP mkdir': (p) => sf((cb) => sftp.mkdir(p, cb)),
};

describe.each(Object.keys(DIR_MAKERS) as DirMaker[])('a folder made over %s', (maker) => {
  it.each(LEGAL)('%s: listed as that folder everywhere, and usable as a path segment', async (_id, name) => {
    const dir = await freshDir();
    await DIR_MAKERS[maker](`${dir}/${name}`);
    await expectSeenEverywhere(dir, name, null);
    // The odd name in the middle of a path: one file put over each protocol, listed by the others.
    const inner = `${dir}/${name}`;
    expect(await restPut(`${inner}/r.txt`, 'r')).toMatchObject({ code: 200 });
    expect((await dav('PUT', enc(`${inner}/w.txt`), { body: 'w' })).status).toBe(201);
    await sftpWrite(`${inner}/s.txt`, 's');
    await expectOnDiskExactly(inner, ['r.txt', 's.txt', 'w.txt']);
    expect((await restNames(inner)).map((e) => e.name).sort()).toEqual(['r.txt', 's.txt', 'w.txt']);
    expect((await propfind(inner)).map((e) => e.name).sort()).toEqual(['r.txt', 's.txt', 'w.txt']);
    expect((await sftpList(inner)).map((e) => e.filename).sort()).toEqual(['r.txt', 's.txt', 'w.txt']);
    expect([await sftpRead(`${inner}/w.txt`), (await dav('GET', enc(`${inner}/s.txt`))).body]).toEqual(['w', 's']);
  });
});

describe('rename, move, copy and delete by every protocol', () => {
  it.each(LEGAL)('%s: the name survives each step exactly', async (id, name) => {
    const [a, b, c] = [await freshDir(), await freshDir(), await freshDir()];
    const data = body(id);
    // REST rename of a plain name to the odd one.
    expect(await restPut(`${a}/plain`, data)).toMatchObject({ code: 200 });
    expect(await api('/api/fs/rename', { path: `${a}/plain`, name })).toMatchObject({ code: 200 });
    await expectOnDiskExactly(a, [name]);
    // WebDAV MOVE to another folder (Destination percent-encoded exactly).
    const mv = await dav('MOVE', enc(`${a}/${name}`), { headers: { Destination: `${ts.url}/dav${enc(`${b}/${name}`)}`, Overwrite: 'F' } });
    expect(mv.status, mv.body).toBe(201);
    await expectOnDiskExactly(a, []);
    await expectOnDiskExactly(b, [name]);
    // SFTP rename back.
    await sf((cb) => sftp.rename(`${b}/${name}`, `${a}/${name}`, cb));
    await expectOnDiskExactly(b, []);
    await expectOnDiskExactly(a, [name]);
    // REST move (names[] holds the odd name), REST copy, WebDAV COPY.
    expect(await api('/api/fs/move', { src_dir: a, dst_dir: b, names: [name] })).toMatchObject({ code: 200 });
    expect(await api('/api/fs/copy', { src_dir: b, dst_dir: c, names: [name] })).toMatchObject({ code: 200 });
    const cp = await dav('COPY', enc(`${b}/${name}`), { headers: { Destination: `${ts.url}/dav${enc(`${a}/${name}`)}` } });
    expect(cp.status, cp.body).toBe(201);
    for (const d of [a, b, c]) {
      await expectOnDiskExactly(d, [name]);
      expect(await readFile(storage(`${d}/${name}`), 'utf8')).toBe(data);
    }
    // Rename away from the odd name over each protocol, and back (the target is another odd name).
    const other = bytes(name) > 250 ? 'R' + name.slice(name.codePointAt(0)! > 0xffff ? 2 : 1) : `R ${name}`;
    expect(await api('/api/fs/rename', { path: `${a}/${name}`, name: other })).toMatchObject({ code: 200 });
    await expectOnDiskExactly(a, [other]);
    expect((await dav('MOVE', enc(`${a}/${other}`), { headers: { Destination: `${ts.url}/dav${enc(`${a}/${name}`)}` } })).status).toBe(201);
    await sf((cb) => sftp.ext_openssh_rename(`${a}/${name}`, `${a}/${other}`, cb));
    await sf((cb) => sftp.rename(`${a}/${other}`, `${a}/${name}`, cb));
    await expectOnDiskExactly(a, [name]);
    // Delete: REST remove, WebDAV DELETE, SFTP remove; each leaves its folder empty.
    expect(await api('/api/fs/remove', { dir: c, names: [name] })).toMatchObject({ code: 200 });
    expect((await dav('DELETE', enc(`${b}/${name}`))).status).toBe(204);
    await sf((cb) => sftp.unlink(`${a}/${name}`, cb));
    for (const d of [a, b, c]) await expectOnDiskExactly(d, []);
  });

  it('names that differ only by case are two files; a case-only rename works over each protocol', async () => {
    const dir = await freshDir();
    await sftpWrite(`${dir}/Case.txt`, 'upper');
    expect(await restPut(`${dir}/case.txt`, 'lower')).toMatchObject({ code: 200 });
    await expectOnDiskExactly(dir, ['Case.txt', 'case.txt']);
    expect([(await dav('GET', enc(`${dir}/Case.txt`))).body, (await dav('GET', enc(`${dir}/case.txt`))).body]).toEqual(['upper', 'lower']);
    // Onto the other case without overwrite: refused everywhere, both kept.
    expect((await dav('MOVE', enc(`${dir}/Case.txt`), { headers: { Destination: `${ts.url}/dav${enc(`${dir}/case.txt`)}`, Overwrite: 'F' } })).status).toBe(412);
    expect(await api('/api/fs/rename', { path: `${dir}/Case.txt`, name: 'case.txt' })).toMatchObject({ code: 403, message: 'file [case.txt] exists' });
    expect(await sftpOutcome((cb) => sftp.rename(`${dir}/Case.txt`, `${dir}/case.txt`, cb))).not.toBe('ok');
    await expectOnDiskExactly(dir, ['Case.txt', 'case.txt']);
    // Case-only renames of a lone file.
    expect(await api('/api/fs/remove', { dir, names: ['case.txt'] })).toMatchObject({ code: 200 });
    expect(await api('/api/fs/rename', { path: `${dir}/Case.txt`, name: 'CASE.txt' })).toMatchObject({ code: 200 });
    await expectOnDiskExactly(dir, ['CASE.txt']);
    expect((await dav('MOVE', enc(`${dir}/CASE.txt`), { headers: { Destination: `${ts.url}/dav${enc(`${dir}/case.TXT`)}` } })).status).toBe(201);
    await expectOnDiskExactly(dir, ['case.TXT']);
    await sf((cb) => sftp.rename(`${dir}/case.TXT`, `${dir}/Case.txt`, cb));
    await expectOnDiskExactly(dir, ['Case.txt']);
    expect(await sftpRead(`${dir}/Case.txt`)).toBe('upper');
  });

  it('NFC and NFD spellings of one name are two files, each reached by its own exact form', async () => {
    // unicode-names.ts: an exact name always wins; only a name missing as sent is looked up in the other form.
    const dir = await freshDir();
    const [nfc, nfd] = ['caf\u00e9', 'cafe\u0301'];
    expect(await restPut(`${dir}/${nfc}`, 'nfc')).toMatchObject({ code: 200 });
    await sftpWrite(`${dir}/${nfd}`, 'nfd');
    await expectOnDiskExactly(dir, [nfc, nfd]);
    expect((await propfind(dir)).map((e) => e.name).sort()).toEqual([nfc, nfd].sort());
    expect([(await dav('GET', enc(`${dir}/${nfc}`))).body, (await dav('GET', enc(`${dir}/${nfd}`))).body]).toEqual(['nfc', 'nfd']);
    expect((await dav('PUT', enc(`${dir}/${nfd}`), { body: 'nfd2' })).status).toBe(204);
    expect([await readFile(storage(`${dir}/${nfc}`), 'utf8'), await readFile(storage(`${dir}/${nfd}`), 'utf8')]).toEqual(['nfc', 'nfd2']);
  });
});

// ---------------------------------------------------------------------------------------------
// Long paths
// ---------------------------------------------------------------------------------------------

describe('long paths', () => {
  const seg = (c: string) => c.repeat(200);

  it('a 3,000-byte path of 255-byte-or-less names is made, listed and read over every protocol', async () => {
    const dir = await freshDir();
    const deep = `${dir}/${Array.from({ length: 14 }, (_, i) => seg(String.fromCharCode(97 + i))).join('/')}`;
    expect(bytes(deep)).toBeGreaterThan(2800);
    expect(await api('/api/fs/mkdir', { path: deep })).toMatchObject({ code: 200 });
    const file = `${deep}/${'中'.repeat(85)}`;
    expect((await dav('PUT', enc(file), { body: 'deep' })).status).toBe(201);
    expect(await sftpRead(file)).toBe('deep');
    expect((await restNames(deep)).map((e) => e.name)).toEqual(['中'.repeat(85)]);
    expect((await sftpList(deep)).map((e) => e.filename)).toEqual(['中'.repeat(85)]);
    expect((await downloads(file)).map((d) => [d.status, d.body])).toEqual([[200, 'deep'], [200, 'deep']]);
  });

  it('a path past 4,096 bytes is refused with "file name too long" and makes no folder', async () => {
    const dir = await freshDir();
    const long = `${dir}/${Array.from({ length: 20 }, () => seg('d')).join('/')}/${'z'.repeat(100)}`;
    expect(bytes(long)).toBeGreaterThan(4096);
    expect(await api('/api/fs/mkdir', { path: long })).toMatchObject({ code: 400, message: 'file name too long' });
    expect(await restPut(long, 'x')).toMatchObject({ code: 400, message: 'file name too long' });
    expect((await dav('MKCOL', enc(long))).status).toBe(400);
    expect(await sftpOutcome((cb) => sftp.mkdir(long, cb))).toMatch(/^4 file name too long|^2 /);
    await expectOnDiskExactly(dir, []);
  });
});

// ---------------------------------------------------------------------------------------------
// Names no storage here can hold: a clear error, nothing made
// ---------------------------------------------------------------------------------------------

/** [id, name, the error the name gets]. `.`/`..` are path syntax: refused where a name is meant. */
const ILLEGAL: Array<[string, string, RegExp]> = [
  ['256 bytes ASCII', 'y'.repeat(256), /file name too long/],
  ['256 bytes CJK', '中'.repeat(85) + 'y', /file name too long/],
  ['backslash (AList reads it as a separator)', 'a\\b', /access using relative path is not allowed/],
  ['NUL', 'a\0b', /access using relative path is not allowed/],
  ['dot-dot', '..', /access using relative path is not allowed|not a file|exists/],
];

describe('illegal names', () => {
  it.each(ILLEGAL)('%s: refused by REST, WebDAV and SFTP alike, and nothing is created', async (_id, name, message) => {
    const dir = await freshDir();
    await writeFile(storage(`${dir}/keep`), 'keep');
    const p = `${dir}/${name}`;
    const rest = [await restPut(p, 'x'), await restForm(p, 'x'), await api('/api/fs/mkdir', { path: p }), await api('/api/fs/rename', { path: `${dir}/keep`, name })];
    for (const r of rest) {
      expect(r.code, J(r)).not.toBe(200);
      expect(r.message).toMatch(message);
    }
    if (!name.includes('\0')) {
      // WebDAV: a percent-encoded NUL never reaches a handler either, but Node refuses to send one.
      const davAnswers = [
        await dav('PUT', enc(p), { body: 'x' }),
        await dav('MKCOL', enc(p)),
        await dav('MOVE', enc(`${dir}/keep`), { headers: { Destination: `${ts.url}/dav${enc(p)}` } }),
      ].map((r) => r.status);
      for (const s of davAnswers) expect([400, 403, 405, 409]).toContain(s);
    }
    for (const o of [
      await sftpOutcome((cb) => sftp.writeFile(p, 'x', cb)),
      await sftpOutcome((cb) => sftp.mkdir(p, cb)),
      await sftpOutcome((cb) => sftp.rename(`${dir}/keep`, p, cb)),
    ]) {
      expect(o).not.toBe('ok');
      if (!/^2 /.test(o)) expect(o).toMatch(message);
    }
    await expectOnDiskExactly(dir, ['keep']);
    expect(await readFile(storage(`${dir}/keep`), 'utf8')).toBe('keep');
  });

  it('a name of exactly "." is path syntax: no protocol creates an entry from it', async () => {
    const dir = await freshDir();
    expect((await restPut(`${dir}/.`, 'x')).code).not.toBe(200);
    expect((await api('/api/fs/rename', { path: `${dir}/x`, name: '.' })).code).not.toBe(200);
    expect((await dav('PUT', enc(`${dir}/.`), { body: 'x' })).status).not.toBe(201);
    expect(await sftpOutcome((cb) => sftp.writeFile(`${dir}/.`, 'x', cb))).not.toBe('ok');
    await expectOnDiskExactly(dir, []);
  });

  it('a JSON name with a lone UTF-16 surrogate is refused (400), not stored as U+FFFD', async () => {
    const dir = await freshDir();
    await writeFile(storage(`${dir}/f`), 'f');
    const raw = (o: string) => ts.api('/api/fs/' + o.split(' ')[0], { token, body: o.slice(o.indexOf(' ') + 1), headers: { 'content-type': 'application/json' } });
    const answers = [
      await raw(`mkdir {"path":"${dir}/lone\\ud800x"}`),
      await raw(`rename {"path":"${dir}/f","name":"r\\udc00y"}`),
      await raw(`batch_rename {"src_dir":"${dir}","rename_objects":[{"src_name":"f","new_name":"b\\ud83dz"}]}`),
    ];
    expect(answers.map((a) => a.code)).toEqual([400, 400, 400]);
    await expectOnDiskExactly(dir, ['f']);
  });
});

// ---------------------------------------------------------------------------------------------
// Bytes that are not UTF-8 (legacy Latin-1 clients)
// ---------------------------------------------------------------------------------------------

describe('names that are not UTF-8', () => {
  it('percent-encoded Latin-1 in File-Path, /dav URLs and Destination: 400, nothing created', async () => {
    const dir = await freshDir();
    await writeFile(storage(`${dir}/f`), 'f');
    expect(await rawHttp('PUT', '/api/fs/put', { authorization: token, 'file-path': `${dir}/caf%E9` }, 'x').then((r) => JSON.parse(r.body))).toMatchObject({ code: 400, message: 'invalid URL escape: not UTF-8' });
    expect((await dav('PUT', `${dir}/caf%E9`, { body: 'x' })).status).toBe(400);
    expect((await dav('MOVE', `${dir}/f`, { headers: { Destination: `${ts.url}/dav${dir}/caf%E9` } })).status).toBe(400);
    await expectOnDiskExactly(dir, ['f']);
  });

  it('raw Latin-1 bytes in File-Path or Destination are refused (400), not stored as U+FFFD', async () => {
    const dir = await freshDir();
    await writeFile(storage(`${dir}/f`), 'f');
    // The single bytes 0xE9 and 0xE8 (Latin-1 é and è) are no UTF-8.
    const latin1 = (s: string) => Buffer.from(s, 'latin1');
    const put = JSON.parse((await rawHttp('PUT', '/api/fs/put', { authorization: token, 'file-path': latin1(`${dir}/caf\u00e9`) }, 'x')).body) as { code: number };
    const auth = 'Basic ' + Buffer.from(`admin:${ADMIN_PASSWORD}`).toString('base64');
    const move = await rawHttp('MOVE', `/dav${dir}/f`, { authorization: auth, destination: latin1(`${ts.url}/dav${dir}/caf\u00e8`) });
    expect([put.code, move.status]).toEqual([400, 400]);
    await expectOnDiskExactly(dir, ['f']);
  });

  it('raw UTF-8 bytes in File-Path (curl, Go clients) are read as UTF-8', async () => {
    const dir = await freshDir();
    const r = await rawHttp('PUT', '/api/fs/put', { authorization: token, 'file-path': Buffer.from(`${dir}/ü 中.txt`) }, 'x');
    expect(JSON.parse(r.body)).toMatchObject({ code: 200 });
    await expectOnDiskExactly(dir, ['ü 中.txt']);
  });

  it('OpenSSH sftp uploading Latin-1 names "caf\\xe9" and "caf\\xe8": refused, never merged into one U+FFFD file', async () => {
    const dir = await freshDir();
    await writeFile(join(work, 'e9'), 'first');
    await writeFile(join(work, 'e8'), 'second');
    const batch = join(work, 'latin1.batch');
    await writeFile(batch, Buffer.concat([
      Buffer.from(`-put ${join(work, 'e9')} "${dir}/caf`), Buffer.from([0xe9]), Buffer.from('"\n'),
      Buffer.from(`-put ${join(work, 'e8')} "${dir}/caf`), Buffer.from([0xe8]), Buffer.from('"\n'),
    ]));
    const [cmd, ...argv] = sftpArgv({ port: ts.sftpPort, user: 'admin', password: ADMIN_PASSWORD }, batch);
    const r = await run(cmd!, argv, { timeoutMs: 30_000 });
    expect(r.code, r.stderr).toBe(0);
    // Before the fix: one file "caf\ufffd" holding "second"; the first upload is gone without an error.
    expect((await diskNames(dir)).map((b) => b.toString())).toEqual([]);
    expect(r.stderr).toMatch(/UTF-8|Failure/);
  });
});

// ---------------------------------------------------------------------------------------------
// WebDAV details: displayname
// ---------------------------------------------------------------------------------------------

describe('PROPFIND displayname', () => {
  it('a carriage return in a name survives XML parsing (sent as &#13;, not raw)', async () => {
    const dir = await freshDir();
    await sftpWrite(`${dir}/a\rb`, 'x');
    const [m] = await propfind(dir);
    expect(m!.name).toBe('a\rb'); // the href is right
    expect(m!.display).toBe('a\rb'); // a raw CR reaches a parser as LF (XML 1.0 §2.11)
  });
});

// ---------------------------------------------------------------------------------------------
// Real clients
// ---------------------------------------------------------------------------------------------

/** Names real clients can carry (OpenSSH batch lines cannot hold LF/CR). */
const batchable = LEGAL.filter(([, n]) => !/[\n\r]/.test(n));

describe('real clients', () => {
  it('curl: WebDAV PUT and GET of every name with an exactly percent-encoded URL (--path-as-is)', async () => {
    requireTool('curl', 'curl');
    const dir = await freshDir();
    const src = join(work, 'curl-src');
    const down = join(work, 'curl-down');
    await mkdirLocal(src);
    await mkdirLocal(down);
    for (let i = 0; i < LEGAL.length; i++) await writeFile(join(src, `f${i}`), body(LEGAL[i]![0]));
    // A WebDAV PUT of an NFD name whose NFC twin exists saves over the twin (Finder's way, unicode-names.ts):
    // the NFD name goes to a folder of its own.
    await mkdirLocal(storage(`${dir}/nfd`));
    const at = (n: string) => (n === 'cafe\u0301' ? `nfd/${n}` : n);
    const url = (n: string) => `${ts.url}/dav${enc(`${dir}/${at(n)}`)}`;
    const common = ['-sS', '--fail', '--path-as-is', '-u', `admin:${ADMIN_PASSWORD}`];
    const up = await run('curl', [...common, ...LEGAL.flatMap(([, n], i) => ['-T', join(src, `f${i}`), url(n)])], { timeoutMs: 60_000 });
    expect(up.code, up.stderr).toBe(0);
    await expectOnDiskExactly(dir, [...LEGAL.map(([, n]) => n).filter((n) => n !== 'cafe\u0301'), 'nfd']);
    await expectOnDiskExactly(`${dir}/nfd`, ['cafe\u0301']);
    const get = await run('curl', [...common, ...LEGAL.flatMap(([, n], i) => ['-o', join(down, `f${i}`), url(n)])], { timeoutMs: 60_000 });
    expect(get.code, get.stderr).toBe(0);
    for (let i = 0; i < LEGAL.length; i++) expect(await readFile(join(down, `f${i}`), 'utf8')).toBe(body(LEGAL[i]![0]));
  });

  it('OpenSSH sftp (batch, quoted names): put, get, rename and rm of every name', async () => {
    const dir = await freshDir();
    const src = join(work, 'ossh-src');
    const down = join(work, 'ossh-down');
    await mkdirLocal(src);
    await mkdirLocal(down);
    const q = (s: string) => `"${s.replace(/[\\"]/g, (c) => '\\' + c)}"`;
    for (let i = 0; i < batchable.length; i++) await writeFile(join(src, `f${i}`), body(batchable[i]![0]));
    const login = { port: ts.sftpPort, user: 'admin', password: ADMIN_PASSWORD };
    const put = await runSftp(login, [`cd ${q(dir)}`, ...batchable.map(([, n], i) => `put -- ${q(join(src, `f${i}`))} ${q(n)}`)]);
    expect(put.code, put.stderr).toBe(0);
    await expectOnDiskExactly(dir, batchable.map(([, n]) => n));
    const get = await runSftp(login, [`cd ${q(dir)}`, ...batchable.map(([, n], i) => `get -- ${q(n)} ${q(join(down, `f${i}`))}`)]);
    expect(get.code, get.stderr).toBe(0);
    for (let i = 0; i < batchable.length; i++) expect(await readFile(join(down, `f${i}`), 'utf8')).toBe(body(batchable[i]![0]));
    const renamed = (n: string) => (bytes(n) > 250 ? 'R' + n.slice(n.codePointAt(0)! > 0xffff ? 2 : 1) : `R ${n}`);
    const ren = await runSftp(login, [`cd ${q(dir)}`, ...batchable.map(([, n]) => `rename -- ${q(n)} ${q(renamed(n))}`)]);
    expect(ren.code, ren.stderr).toBe(0);
    await expectOnDiskExactly(dir, batchable.map(([, n]) => renamed(n)));
    const del = await runSftp(login, [`cd ${q(dir)}`, ...batchable.map(([, n]) => `rm -- ${q(renamed(n))}`)]);
    expect(del.code, del.stderr).toBe(0);
    await expectOnDiskExactly(dir, []);
  });

  it('rclone webdav: copy up, lsjson, copy down and check keep every name', async () => {
    requireTool('rclone', 'rclone');
    const dir = await freshDir();
    const src = join(work, 'rclone-src');
    const down = join(work, 'rclone-down');
    await mkdirLocal(join(src, 'nfd'), { recursive: true });
    // rclone treats NFC and NFD spellings in one local folder as duplicates: the NFD one goes apart.
    const at = (n: string) => (n === 'cafe\u0301' ? join('nfd', n) : n);
    for (const [id, n] of LEGAL) await writeFile(join(src, at(n)), body(id));
    const pass = (await run('rclone', ['obscure', ADMIN_PASSWORD])).stdout.trim();
    // Encodings set to the minimum: by default rclone itself maps control characters to U+2400+c on
    // the way up (and back), which would hide what the server does with the real names.
    const remote = [
      '--webdav-url', `${ts.url}/dav`, '--webdav-vendor', 'other', '--webdav-user', 'admin', '--webdav-pass', pass, '--config', '/dev/null',
      '--webdav-encoding', 'Slash', '--local-encoding', 'Slash,Dot', '--retries', '1', '--low-level-retries', '1',
    ];
    const up = await run('rclone', ['copy', src, `:webdav:${dir}`, ...remote], { timeoutMs: 60_000 });
    expect(up.code, up.stderr).toBe(0);
    await expectOnDiskExactly(dir, [...LEGAL.map(([, n]) => n).filter((n) => n !== 'cafe\u0301'), 'nfd']);
    await expectOnDiskExactly(`${dir}/nfd`, ['cafe\u0301']);
    const ls = await run('rclone', ['lsjson', '-R', '--files-only', `:webdav:${dir}`, ...remote]);
    expect(ls.code, ls.stderr).toBe(0);
    // lsjson prints control characters as rclone's visible stand-ins (U+2400+c, DEL as U+2421).
    const shown = (n: string) => n.replace(/[\x00-\x1f]/g, (c) => String.fromCharCode(0x2400 + c.charCodeAt(0))).replace(/\x7f/g, '\u2421');
    expect((JSON.parse(ls.stdout) as Array<{ Path: string }>).map((e) => e.Path).sort()).toEqual(LEGAL.map(([, n]) => shown(at(n))).sort());
    const get = await run('rclone', ['copy', `:webdav:${dir}`, down, ...remote], { timeoutMs: 60_000 });
    expect(get.code, get.stderr).toBe(0);
    for (const [id, n] of LEGAL) expect(await readFile(join(down, at(n)), 'utf8')).toBe(body(id));
    const check = await run('rclone', ['check', src, `:webdav:${dir}`, ...remote]);
    expect(check.code, check.stderr).toBe(0);
    expect(check.stderr).toContain('0 differences found');
  });

  it('davfs2 mount: lists and reads every name made over REST, and writes them back', async () => {
    requireTool('mount.davfs', 'davfs2');
    if (process.getuid?.() !== 0 || !existsSync('/dev/fuse')) throw new Error('davfs2 needs root and /dev/fuse');
    const dir = await freshDir();
    // davfs2 keeps a cached copy of each file under a longer name: names near 255 bytes fail there (EIO).
    const fit = LEGAL.filter(([, n]) => bytes(n) <= 200);
    for (const [id, n] of fit) expect(await restPut(`${dir}/${n}`, body(id))).toMatchObject({ code: 200 });
    const mwork = await mkdtemp(join(tmpdir(), 'tg-names-davfs-'));
    await chmod(mwork, 0o711);
    const mnt = join(mwork, 'mnt');
    const cache = join(mwork, 'cache');
    await mkdirLocal(mnt);
    await mkdirLocal(cache);
    await chmod(cache, 0o777);
    await writeFile(join(mwork, 'secrets'), `${ts.url}/dav/ admin ${ADMIN_PASSWORD}\n`, { mode: 0o600 });
    await writeFile(join(mwork, 'davfs2.conf'), ['buf_size 64', `cache_dir ${cache}`, `secrets ${join(mwork, 'secrets')}`, 'delay_upload 0', 'use_locks 1', 'ask_auth 0', ''].join('\n'));
    const back = await freshDir(); // before the mount: davfs2 caches the listing of / it mounts with
    const m = await run('mount.davfs', [`${ts.url}/dav/`, mnt, '-o', `conf=${join(mwork, 'davfs2.conf')}`], { timeoutMs: 30_000 });
    expect(m.code, m.stderr).toBe(0);
    try {
      // Only asynchronous fs calls: the server answering the mount runs in this process.
      expect((await readdir(join(mnt, dir))).sort()).toEqual(fit.map(([, n]) => n).sort());
      for (const [id, n] of fit) expect(await readFile(join(mnt, dir, n), 'utf8')).toBe(body(id));
      for (const [id, n] of fit) if (n !== 'cafe\u0301') await writeFile(join(mnt, back, n), `m ${id}`);
    } finally {
      const u = await run('umount', [mnt], { timeoutMs: 60_000 });
      expect(u.code, u.stderr).toBe(0);
      await rm(mwork, { recursive: true, force: true });
    }
    // umount waits for davfs2 to upload what it holds.
    await expectOnDiskExactly(back, fit.map(([, n]) => n).filter((n) => n !== 'cafe\u0301'));
    for (const [id, n] of fit) if (n !== 'cafe\u0301') expect(await readFile(storage(`${back}/${n}`), 'utf8')).toBe(`m ${id}`);
  });
});

// ---------------------------------------------------------------------------------------------
// A remote driver: FTP (vsftpd), whose LIST lines are parsed by basic-ftp
// ---------------------------------------------------------------------------------------------

describe('FTP storage', () => {
  let ftpd: Vsftpd;
  beforeAll(async () => {
    ftpd = await startVsftpd();
    const r = await api('/api/admin/storage/create', {
      mount_path: '/ftp', driver: 'FTP', cache_expiration: 0,
      addition: JSON.stringify({ address: `127.0.0.1:${ftpd.port}`, encoding: 'UTF-8', username: ftpd.user, password: ftpd.password, root_folder_path: '/' }),
    });
    expect(r.code, r.message).toBe(200);
  });
  afterAll(async () => {
    await ftpd?.stop();
  });

  const FTP_NAMES: Array<[string, string]> = [
    ['leading space', ' lead'], ['trailing space', 'trail '], ['double space', 'a  b'], ['leading dash', '-dash'], ['CJK', '中文文件'],
    ['brackets', '[x] {y}'], ['percent', 'a%20b'], ['U+2028', 'a\u2028b'], ['U+2029', 'a\u2029b'],
  ];
  it.each(FTP_NAMES)('%s: uploaded over REST, the FTP server holds it, every protocol lists and reads it', async (id, name) => {
    const dir = `/ftp/${++seq}`;
    expect(await api('/api/fs/mkdir', { path: dir })).toMatchObject({ code: 200 });
    expect(await restPut(`${dir}/${name}`, body(id))).toMatchObject({ code: 200 });
    expect(await readdir(join(ftpd.dataDir, String(seq)))).toEqual([name]);
    expect((await restNames(dir)).map((e) => e.name)).toEqual([name]);
    expect((await propfind(dir)).map((e) => e.name)).toEqual([name]);
    expect((await sftpList(dir)).map((e) => e.filename)).toEqual([name]);
    expect((await dav('GET', enc(`${dir}/${name}`))).body).toBe(body(id));
    expect(await sftpRead(`${dir}/${name}`)).toBe(body(id));
  });
});
