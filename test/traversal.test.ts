/**
 * Path traversal through every path-taking REST field (decision 3). Each hostile input must be
 * refused with 403 `access using relative path is not allowed` (or never reach outside the storage
 * root), and at the end the disk outside DATA/storage must be exactly as before: no new file, the
 * canaries intact and never served.
 */
import { mkdirSync, readdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { signWith } from '../src/sign.js';
import type { TestServer } from './harness.js';
import { expectCode, ok, rawRequest, seed, startRestServer } from './fs-helpers.js';

const REL = 'access using relative path is not allowed';
const CANARY = 'CANARY-OUTSIDE-STORAGE';
let ts: TestServer;
let admin: string;
let before: string[];
const bodies: string[] = [];

/** Every file and folder under DATA except DATA/storage (and the store's own files, which change). */
function outside(): string[] {
  const out: string[] = [];
  const walk = (dir: string) => {
    for (const n of readdirSync(dir)) {
      const p = join(dir, n);
      const rel = relative(ts.dataDir, p);
      if (rel === 'storage') continue;
      out.push(rel);
      if (statSync(p).isDirectory()) walk(p);
    }
  };
  walk(ts.dataDir);
  return out.filter((p) => !/^store\.json/.test(p)).sort();
}

async function call(path: string, body: unknown) {
  const r = await ts.api(path, { token: admin, body });
  bodies.push(JSON.stringify(r));
  return r;
}

/** Path-like values: every one contains `..`, a backslash or NUL. */
const HOSTILE_PATHS = [
  '..', '/..', '../', '../x', '/../x', '/a/../../x', '/a/b/../../../x', '/./../x', '..\\x', '\\..\\x', 'a\\..\\..\\x',
  '/a\\b', 'C:\\Windows\\x', '/x\0y', '\0', '/../storage2/evil.txt', '/../outside.txt', '../../../../../../etc/passwd',
];
/** Single names: the above plus anything with `/`, `.` or empty. */
const HOSTILE_NAMES = ['..', '.', '', '../x', 'a/b', '/etc/passwd', 'x/../../y', '..\\x', 'a\\b', 'n\0ul', '/'];

beforeAll(async () => {
  ts = await startRestServer();
  admin = await ts.login();
  writeFileSync(join(ts.dataDir, 'outside.txt'), CANARY);
  mkdirSync(join(ts.dataDir, 'storage2'));
  writeFileSync(join(ts.dataDir, 'storage2', 'evil.txt'), CANARY);
  await seed(ts, admin, { '/a/b/f.txt': 'inside', '/a/g.txt': 'g' });
  before = outside();
  expect(HOSTILE_PATHS.length + HOSTILE_NAMES.length).toBeGreaterThanOrEqual(29);
});
afterAll(async () => ts?.close());

describe('path fields in JSON bodies', () => {
  it('fs/list, fs/get, fs/dirs, mkdir, remove_empty_directory: path / src_dir', async () => {
    for (const p of HOSTILE_PATHS) {
      expectCode(await call('/api/fs/list', { path: p }), 403, REL);
      expectCode(await call('/api/fs/get', { path: p }), 403, REL);
      expectCode(await call('/api/fs/dirs', { path: p }), 403, REL);
      expectCode(await call('/api/fs/dirs', { path: p, force_root: true }), 403, REL);
      expectCode(await call('/api/fs/mkdir', { path: p + '/tgmk' }), 403, REL);
      expectCode(await call('/api/fs/remove_empty_directory', { src_dir: p }), 403, REL);
    }
  });

  it('rename: path and name', async () => {
    for (const p of HOSTILE_PATHS) expectCode(await call('/api/fs/rename', { path: p, name: 'tg-renamed' }), 403, REL);
    for (const n of HOSTILE_NAMES) expectCode(await call('/api/fs/rename', { path: '/a/g.txt', name: n }), 403, REL);
  });

  it('move, copy, remove: src_dir, dst_dir, dir and names[]', async () => {
    for (const ep of ['/api/fs/move', '/api/fs/copy']) {
      for (const p of HOSTILE_PATHS) {
        expectCode(await call(ep, { src_dir: p, dst_dir: '/a', names: ['g.txt'] }), 403, REL);
        expectCode(await call(ep, { src_dir: '/a', dst_dir: p, names: ['g.txt'] }), 403, REL);
      }
      for (const n of HOSTILE_NAMES) expectCode(await call(ep, { src_dir: '/a', dst_dir: '/a/b', names: [n] }), 403, REL);
    }
    for (const p of HOSTILE_PATHS) expectCode(await call('/api/fs/remove', { dir: p, names: ['g.txt'] }), 403, REL);
    for (const n of HOSTILE_NAMES) expectCode(await call('/api/fs/remove', { dir: '/a', names: [n] }), 403, REL);
  });

  it('recursive_move, batch_rename, regex_rename', async () => {
    for (const p of HOSTILE_PATHS) {
      expectCode(await call('/api/fs/recursive_move', { src_dir: p, dst_dir: '/a' }), 403, REL);
      expectCode(await call('/api/fs/recursive_move', { src_dir: '/a/b', dst_dir: p }), 403, REL);
      expectCode(await call('/api/fs/batch_rename', { src_dir: p, rename_objects: [{ src_name: 'g.txt', new_name: 'h.txt' }] }), 403, REL);
      expectCode(await call('/api/fs/regex_rename', { src_dir: p, src_name_regex: 'g', new_name_regex: 'h' }), 403, REL);
    }
    for (const n of HOSTILE_NAMES.filter((x) => x !== '')) {
      expectCode(await call('/api/fs/batch_rename', { src_dir: '/a', rename_objects: [{ src_name: 'g.txt', new_name: n }] }), 403, REL);
      expectCode(await call('/api/fs/batch_rename', { src_dir: '/a', rename_objects: [{ src_name: n, new_name: 'h.txt' }] }), 403, REL);
    }
    for (const t of ['../tg-rx', '..\\tg-rx', 'x/../../tg-rx', '..', '.']) {
      expectCode(await call('/api/fs/regex_rename', { src_dir: '/a', src_name_regex: '^g\\.txt$', new_name_regex: t }), 403, REL);
    }
  });
});

describe('File-Path of uploads', () => {
  const ENCODED = [
    '%2e%2e%2ftg-up', '/%2e%2e/tg-up', '/a/%2e%2e/%2e%2e/tg-up', '..%5ctg-up', '%5c..%5ctg-up', '/a/tg%00up', '%00',
    '..%2f..%2f..%2ftmp%2ftg-up', '/..%2Fstorage2%2Fevil.txt', '..\\tg-up', '/a\\..\\..\\tg-up', '%2E%2E/tg-up',
  ];

  it('PUT /api/fs/put refuses every encoded traversal', async () => {
    for (const fp of ENCODED) {
      const r = await rawRequest(ts, 'PUT', '/api/fs/put', { authorization: admin, 'file-path': fp, 'content-length': '9' }, Buffer.from('tg-upload'));
      bodies.push(r.body.toString());
      expectCode(JSON.parse(r.body.toString()) as { code: number; message: string }, 403, REL);
    }
  });

  it('PUT /api/fs/form refuses them too', async () => {
    for (const fp of ENCODED.slice(0, 6)) {
      const fd = new FormData();
      fd.append('file', new Blob(['tg-upload']), 'x');
      const res = await fetch(ts.url + '/api/fs/form', { method: 'PUT', headers: { authorization: admin, 'file-path': fp }, body: fd });
      expectCode((await res.json()) as { code: number; message: string }, 403, REL);
    }
  });

  it('an absolute host path stays inside the tree', async () => {
    const fp = encodeURIComponent(join(ts.dataDir, 'tg-abs.txt'));
    const r = await rawRequest(ts, 'PUT', '/api/fs/put', { authorization: admin, 'file-path': fp, 'content-length': '3' }, Buffer.from('abs'));
    ok(JSON.parse(r.body.toString()) as { code: number; message: string });
    expect(readFileSync(join(ts.dataDir, 'storage', ts.dataDir, 'tg-abs.txt'), 'utf8')).toBe('abs');
  });
});

describe('/d and /p URLs', () => {
  const URLS = [
    '%2e%2e/outside.txt', '%2e%2e%2foutside.txt', 'a/%2e%2e/%2e%2e/outside.txt', '..%5coutside.txt', '%5c..%5coutside.txt', '..%2f..%2fetc%2fpasswd',
    '%2E%2E/storage2/evil.txt', 'a/b/..%2F..%2F..%2Foutside.txt', 'a%00b', '../outside.txt', 'a/../../outside.txt',
  ];

  it('refuses encoded dots, backslashes and NUL, signed or not', async () => {
    for (const kind of ['d', 'p']) {
      for (const u of URLS) {
        const sign = signWith(ts.running.core.settings.get('token'), '/' + decodeURIComponent(u), 0);
        const r = await rawRequest(ts, 'GET', `/${kind}/${u}?sign=${encodeURIComponent(sign)}`);
        bodies.push(r.body.toString());
        expect(r.body.toString()).not.toContain(CANARY);
        if (r.status === 200) expectCode(JSON.parse(r.body.toString()) as { code: number; message: string }, 403, REL);
        else expect(r.status).toBe(404); // a raw `..` may already be resolved away by the router
      }
    }
  });

  it('a host path in the URL is a tree path (not found), never the host file', async () => {
    const p = `/d/${ts.dataDir}/outside.txt`.replace(/\/+/g, '/');
    const sign = signWith(ts.running.core.settings.get('token'), p.slice(2), 0);
    const r = await rawRequest(ts, 'GET', `${p}?sign=${encodeURIComponent(sign)}`);
    expect(r.body.toString()).not.toContain(CANARY);
    expect((JSON.parse(r.body.toString()) as { code: number }).code).toBe(500);
  });
});

describe('afterwards', () => {
  it('nothing outside DATA/storage changed and no canary was ever served', () => {
    expect(outside()).toEqual(before);
    expect(readFileSync(join(ts.dataDir, 'outside.txt'), 'utf8')).toBe(CANARY);
    expect(readFileSync(join(ts.dataDir, 'storage2', 'evil.txt'), 'utf8')).toBe(CANARY);
    for (const b of bodies) expect(b).not.toContain(CANARY);
    expect(bodies.length).toBeGreaterThan(300);
  });
});
