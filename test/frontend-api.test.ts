/**
 * The AList web front end's API calls, replayed against a whole treegate server.
 *
 * A real alist-web / OpenList-Frontend build cannot be obtained on this machine, so this file makes
 * the calls /work/shared/docs/alist-frontend.md lists the way the front end makes them (one axios
 * instance on `{api}/api`, `Content-Type: application/json;charset=utf-8` on bodies, the raw token in
 * `Authorization`, the same method, path, query, body and headers) and checks the fields the front
 * end reads exist with the JSON types it expects. Calls for features treegate does not have must
 * answer a clean envelope error: HTTP 200, JSON, `code` ≠ 200, a string message, within a bound.
 *
 * Grouped by page, each as a table of calls with their expected shapes.
 */
import { createHash, generateKeyPairSync } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { authenticator } from 'otplib';
import { ADMIN_PASSWORD, type TestServer } from './harness.js';
import { startRestServer } from './fs-helpers.js';
import { startFileServer, type FileServer } from './offline-helpers.js';

// ---------------------------------------------------------------------------------------------
// A tiny shape checker
// ---------------------------------------------------------------------------------------------

/**
 * 'string' | 'number' | 'boolean' | 'null' | 'any', unions like 'string|null';
 * 'array' (any array, may be empty); [S] (a NON-empty array whose every element matches S);
 * {k: S} (an object that has every key k; other keys are allowed);
 * {'*': S} (an object whose every value matches S).
 */
type Shape = string | readonly [Shape] | { readonly [key: string]: Shape };

function shapeErrors(value: unknown, shape: Shape, at = 'data'): string[] {
  if (typeof shape === 'string') {
    const ok = shape.split('|').some((t) => {
      if (t === 'any') return value !== undefined;
      if (t === 'null') return value === null;
      if (t === 'array') return Array.isArray(value);
      if (t === 'number') return typeof value === 'number' && Number.isFinite(value);
      return typeof value === t;
    });
    return ok ? [] : [`${at}: expected ${shape}, got ${value === undefined ? 'undefined' : JSON.stringify(value)?.slice(0, 80)}`];
  }
  if (Array.isArray(shape)) {
    const element = (shape as readonly [Shape])[0];
    if (!Array.isArray(value)) return [`${at}: expected an array, got ${JSON.stringify(value)?.slice(0, 80)}`];
    if (value.length === 0) return [`${at}: expected a non-empty array`];
    return value.flatMap((v, i) => shapeErrors(v, element, `${at}[${i}]`));
  }
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return [`${at}: expected an object, got ${JSON.stringify(value)?.slice(0, 80)}`];
  const obj = value as Record<string, unknown>;
  const fields = shape as { readonly [key: string]: Shape };
  if ('*' in fields) return Object.entries(obj).flatMap(([k, v]) => shapeErrors(v, fields['*']!, `${at}.${k}`));
  return Object.entries(fields).flatMap(([k, s]) => shapeErrors(obj[k], s, `${at}.${k}`));
}

function expectShape(value: unknown, shape: Shape, what = ''): void {
  expect(shapeErrors(value, shape), `${what} ${JSON.stringify(value)?.slice(0, 400)}`).toEqual([]);
}

describe('the shape checker itself', () => {
  it('reports wrong types, missing keys, null lists and empty required lists', () => {
    expect(shapeErrors({ a: 1, b: 'x', c: [{ d: true }] }, { a: 'number', b: 'string', c: [{ d: 'boolean' }] })).toEqual([]);
    expect(shapeErrors({ a: '1' }, { a: 'number' })).toHaveLength(1);
    expect(shapeErrors({}, { a: 'string' })).toEqual(['data.a: expected string, got undefined']);
    expect(shapeErrors({ c: null }, { c: 'array' })).toHaveLength(1);
    expect(shapeErrors({ c: [] }, { c: [{ d: 'string' }] })).toEqual(['data.c: expected a non-empty array']);
    expect(shapeErrors({ c: [{ d: 1 }] }, { c: [{ d: 'string' }] })).toEqual(['data.c[0].d: expected string, got 1']);
    expect(shapeErrors({ x: 'a', y: 2 }, { '*': 'string' })).toHaveLength(1);
    expect(shapeErrors(null, 'string|null')).toEqual([]);
    expect(shapeErrors(Number.NaN, 'number')).toHaveLength(1);
  });
});

// Shapes the front end reads (alist-frontend.md inventory).
const OBJ = { name: 'string', size: 'number', is_dir: 'boolean', modified: 'string', sign: 'string', thumb: 'string', type: 'number' } as const;
const LIST = { content: [OBJ], total: 'number', readme: 'string', header: 'string', write: 'boolean', provider: 'string' } as const;
const GET = { ...OBJ, raw_url: 'string', readme: 'string', header: 'string', provider: 'string', related: 'array|null' } as const;
const ME = { id: 'number', username: 'string', base_path: 'string', role: 'number', permission: 'number', sso_id: 'string', disabled: 'boolean', otp: 'boolean' } as const;
const TASK = {
  id: 'string', name: 'string', state: 'number', status: 'string', progress: 'number', error: 'string',
  // OpenList-Frontend additions
  creator: 'string', creator_role: 'number', start_time: 'string|null', end_time: 'string|null', total_bytes: 'number',
} as const;
const STORAGE = { id: 'number', mount_path: 'string', driver: 'string', order: 'number', status: 'string', remark: 'string', disabled: 'boolean', addition: 'string' } as const;
const DRIVER_ITEM = { name: 'string', type: 'string', default: 'string', options: 'string', required: 'boolean', help: 'string' } as const;
const DRIVER = {
  common: [DRIVER_ITEM], additional: 'array',
  config: { name: 'string', local_sort: 'boolean', only_local: 'boolean', only_proxy: 'boolean', no_cache: 'boolean', no_upload: 'boolean', need_ms: 'boolean', default_root: 'string', alert: 'string' },
} as const;
const USER = { id: 'number', username: 'string', base_path: 'string', role: 'number', permission: 'number', disabled: 'boolean', sso_id: 'string' } as const;
const META = {
  id: 'number', path: 'string', password: 'string', p_sub: 'boolean', write: 'boolean', w_sub: 'boolean',
  hide: 'string', h_sub: 'boolean', readme: 'string', r_sub: 'boolean', header: 'string', header_sub: 'boolean',
} as const;
const SETTING = { key: 'string', value: 'string', type: 'string', help: 'string', options: 'string', group: 'number', flag: 'number' } as const;
const SSHKEY = { id: 'number', title: 'string', fingerprint: 'string', added_time: 'string', last_used_time: 'string' } as const;
const CODE_ONLY = 'any' as const; // toolbar calls: the front end reads only code/message

// ---------------------------------------------------------------------------------------------
// The front end's HTTP client
// ---------------------------------------------------------------------------------------------

const TIMEOUT_MS = 10_000;

let ts: TestServer;
let web: FileServer;
let admin = '';

interface Call {
  method?: 'GET' | 'POST' | 'PUT';
  /** Relative to `{api}/api`, with its query. */
  path: string;
  body?: unknown;
  headers?: Record<string, string>;
  /** Token for `Authorization`; '' sends an empty header (a guest, as the front end after logout). */
  token?: string;
}

interface Envelope<T = unknown> { code: number; message: string; data: T }

/** One axios call of the front end: HTTP 200 and a JSON envelope, or the test fails. */
async function call<T = unknown>(c: Call): Promise<Envelope<T>> {
  const method = c.method ?? (c.body === undefined ? 'GET' : 'POST');
  const headers: Record<string, string> = { authorization: c.token ?? admin, ...c.headers };
  let body: RequestInit['body'];
  if (c.body instanceof FormData || typeof c.body === 'string') body = c.body;
  else if (c.body !== undefined) {
    headers['content-type'] ??= 'application/json;charset=utf-8';
    body = JSON.stringify(c.body);
  }
  const res = await fetch(`${ts.url}/api${c.path}`, { method, headers, body, signal: AbortSignal.timeout(TIMEOUT_MS) });
  const text = await res.text();
  const where = `${method} /api${c.path}`;
  expect(res.status, `${where}: ${text.slice(0, 200)}`).toBe(200);
  expect(res.headers.get('content-type') ?? '', where).toMatch(/^application\/json/);
  const env = JSON.parse(text) as Envelope<T>;
  expectShape(env, { code: 'number', message: 'string' }, where);
  return env;
}

/** The call must succeed (code 200) and `data` must have the shape; returns data. */
async function expectOk<T = any>(c: Call, shape: Shape): Promise<T> {
  const env = await call<T>(c);
  expect({ code: env.code, message: env.message }, `${c.method ?? ''} ${c.path}`).toEqual({ code: 200, message: 'success' });
  expectShape(env.data, shape, c.path);
  return env.data;
}

/** A clean envelope error: HTTP 200, JSON, code ≠ 200, non-empty message. */
async function expectError(c: Call, code?: number): Promise<Envelope> {
  const env = await call(c);
  expect(env.code, `${c.path}: ${JSON.stringify(env)}`).not.toBe(200);
  if (code !== undefined) expect(env.code, `${c.path}: ${JSON.stringify(env)}`).toBe(code);
  expect(env.message.length).toBeGreaterThan(0);
  return env;
}

/** A /d or /p link fetched like the browser does: no Authorization header. */
async function fetchLink(url: string): Promise<Response> {
  return fetch(url.startsWith('http') ? url : ts.url + url, { signal: AbortSignal.timeout(TIMEOUT_MS), redirect: 'follow' });
}

/** The password the login page posts to /auth/login/hash. */
const hashPassword = (pw: string) => createHash('sha256').update(`${pw}-https://github.com/alist-org/alist`).digest('hex');

/** PUT /fs/put as the upload page streams a file. */
function upload(path: string, content: string, extra: Record<string, string> = {}, token?: string): Call {
  return {
    method: 'PUT', path: '/fs/put', body: content, ...(token === undefined ? {} : { token }),
    headers: {
      'File-Path': encodeURIComponent(path), 'As-Task': 'false', 'Content-Type': 'text/plain',
      'Last-Modified': String(Date.UTC(2024, 0, 2, 3, 4, 5)), Password: '', ...extra,
    },
  };
}

async function poll<T>(what: string, fn: () => Promise<T | undefined>, ms = 20_000): Promise<T> {
  const end = Date.now() + ms;
  for (;;) {
    const v = await fn();
    if (v !== undefined) return v;
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

/** An OpenSSH ed25519 public key line, made without ssh-keygen. */
function sshPublicKey(comment: string): string {
  const x = Buffer.from(generateKeyPairSync('ed25519').publicKey.export({ format: 'jwk' }).x!, 'base64url');
  const str = (b: Buffer) => Buffer.concat([Buffer.from([0, 0, 0, b.length]), b]);
  return `ssh-ed25519 ${Buffer.concat([str(Buffer.from('ssh-ed25519')), str(x)]).toString('base64')} ${comment}`;
}

beforeAll(async () => {
  ts = await startRestServer();
  admin = await ts.login();
  web = await startFileServer({ '/remote.txt': Buffer.from('fetched offline') });
});
afterAll(async () => {
  await web?.close();
  await ts?.close();
});

// ---------------------------------------------------------------------------------------------
// Boot, login, profile, 2FA
// ---------------------------------------------------------------------------------------------

describe('boot and login', () => {
  it('GET /public/settings: a string map with the keys the front end reads', async () => {
    const keys = [
      'version', 'site_title', 'logo', 'main_color', 'announcement', 'home_icon', 'home_container', 'settings_layout',
      'pagination_type', 'default_page_size', 'hide_files', 'search_index', 'package_download', 'external_previews',
      'iframe_previews', 'audio_autoplay', 'video_autoplay', 'audio_cover', 'ldap_login_enabled', 'sso_login_enabled',
      'webauthn_login_enabled',
    ];
    const data = await expectOk({ path: '/public/settings', token: '' }, Object.fromEntries(keys.map((k) => [k, 'string'])));
    expectShape(data, { '*': 'string' });
    // Features treegate lacks must not be offered on the login page.
    for (const k of ['ldap_login_enabled', 'sso_login_enabled', 'webauthn_login_enabled']) expect(['true', '1']).not.toContain(data[k]);
    expect(() => JSON.parse(data.iframe_previews)).not.toThrow();
    expect(() => JSON.parse(data.external_previews || '{}')).not.toThrow();
  });

  it.each<[string, Call, Shape]>([
    ['archive extensions (OpenList boot)', { path: '/public/archive_extensions', token: '' }, 'array'],
    ['offline download tools (every home mount)', { path: '/public/offline_download_tools', token: '' }, ['string']],
  ])('GET %s', async (_name, c, shape) => {
    await expectOk(c, shape);
  });

  it('POST /auth/login/hash returns a token; /me reads the profile fields', async () => {
    const { token } = await expectOk<{ token: string }>(
      { path: '/auth/login/hash', token: '', body: { username: 'admin', password: hashPassword(ADMIN_PASSWORD), otp_code: '' } },
      { token: 'string' },
    );
    const me = await expectOk({ path: '/me', token }, ME);
    expect(me).toMatchObject({ username: 'admin', role: 2 });
    // A wrong password is an error the login page shows.
    await expectError({ path: '/auth/login/hash', token: '', body: { username: 'admin', password: hashPassword('nope'), otp_code: '' } }, 400);
  });

  it('2FA page: generate, verify; login then answers 402 and succeeds with otp_code', async () => {
    await expectOk({ path: '/admin/user/create', body: { id: 0, username: 'otpuser', password: 'otp-pass-1', base_path: '/', role: 0, permission: 0, disabled: false, sso_id: '' } }, CODE_ONLY);
    const loginBody = { username: 'otpuser', password: hashPassword('otp-pass-1'), otp_code: '' };
    const { token } = await expectOk<{ token: string }>({ path: '/auth/login/hash', token: '', body: loginBody }, { token: 'string' });
    expect((await expectOk({ path: '/me', token }, ME)).otp).toBe(false);
    // The front end posts these with no body.
    const gen = await expectOk<{ qr: string; secret: string }>({ method: 'POST', path: '/auth/2fa/generate', token }, { qr: 'string', secret: 'string' });
    expect(gen.qr).toMatch(/^data:image\//);
    await expectOk({ path: '/auth/2fa/verify', token, body: { code: authenticator.generate(gen.secret), secret: gen.secret } }, CODE_ONLY);
    expect((await expectOk({ path: '/me', token }, ME)).otp).toBe(true);

    await expectError({ path: '/auth/login/hash', token: '', body: loginBody }, 402);
    await expectOk({ path: '/auth/login/hash', token: '', body: { ...loginBody, otp_code: authenticator.generate(gen.secret) } }, { token: 'string' });
    // The users page can cancel it.
    const users = await expectOk<{ content: Array<{ id: number; username: string }> }>({ path: '/admin/user/list' }, { content: [USER], total: 'number' });
    const id = users.content.find((u) => u.username === 'otpuser')!.id;
    await expectOk({ method: 'POST', path: `/admin/user/cancel_2fa?id=${id}` }, CODE_ONLY);
    await expectOk({ path: '/auth/login/hash', token: '', body: loginBody }, { token: 'string' });
  });

  it('profile: /me/update (then the page goes to /@login), /auth/logout; the old token then answers 401', async () => {
    await expectOk({ path: '/admin/user/create', body: { id: 0, username: 'prof', password: 'prof-pass-1', base_path: '/', role: 0, permission: 0, disabled: false, sso_id: '' } }, CODE_ONLY);
    const old = await ts.login('prof', 'prof-pass-1');
    await expectOk({ path: '/me/update', token: old, body: { username: 'prof2', password: '', sso_id: '' } }, CODE_ONLY);
    // The token names the old username (as AList's does): the profile page sends the user to /@login.
    await expectError({ path: '/me', token: old }, 401);
    const token = await ts.login('prof2', 'prof-pass-1');
    expect((await expectOk({ path: '/me', token }, ME)).username).toBe('prof2');
    await expectOk({ path: '/auth/logout', token }, CODE_ONLY);
    await expectError({ path: '/me', token }, 401);
  });

  it('a guest (empty token) gets 401 while the guest is disabled, which sends it to /@login', async () => {
    await expectError({ path: '/me', token: '' }, 401);
    await expectError({ path: '/fs/list', token: '', body: { path: '/', password: '', page: 1, per_page: 0, refresh: false } }, 401);
  });

  it('an enabled guest: /me answers the guest user (role 1) with code 200, and the home page lists', async () => {
    const users = await expectOk<{ content: Array<{ role: number }> }>({ path: '/admin/user/list' }, { content: [USER], total: 'number' });
    const guest = users.content.find((u) => u.role === 1)!;
    await expectOk({ path: '/admin/user/update', body: { ...guest, disabled: false } }, CODE_ONLY);
    try {
      expect(await expectOk({ path: '/me', token: '' }, ME)).toMatchObject({ role: 1, username: 'guest' });
      await expectOk({ path: '/fs/get', token: '', body: { path: '/', password: '' } }, GET);
      await expectOk({ path: '/fs/list', token: '', body: { path: '/', password: '', page: 1, per_page: 30, refresh: false } }, { ...LIST, content: 'array' });
    } finally {
      await expectOk({ path: '/admin/user/update', body: { ...guest, disabled: true } }, CODE_ONLY);
    }
  });

  it('a body-less POST still labelled application/json (some axios versions keep the header) is accepted', async () => {
    await expectOk({ method: 'POST', path: '/admin/task/upload/clear_done', headers: { 'content-type': 'application/json;charset=utf-8' } }, CODE_ONLY);
  });
});

// ---------------------------------------------------------------------------------------------
// Uploads (the home page's upload dialog, new file, text editor)
// ---------------------------------------------------------------------------------------------

describe('uploads', () => {
  it.each<[string, Call]>([
    ['stream, nested path (parents created)', upload('/home/docs/deep/a.txt', 'alpha')],
    ['stream, a readme', upload('/home/docs/README.md', '# Docs readme\n', { 'Content-Type': 'text/markdown' })],
    ['stream, a header', upload('/home/docs/header.md', '## header\n', { 'Content-Type': 'text/markdown' })],
    ['stream, a picture', upload('/home/media/pic.png', 'not really a png', { 'Content-Type': 'image/png' })],
    ['stream, a video and its subtitles', upload('/home/media/movie.mp4', 'mp4')],
    ['stream, subtitles', upload('/home/media/movie.srt', '1\n00:00:01,000 --> 00:00:02,000\nhi\n')],
    ['stream, a name that needs encoding', upload('/home/docs/ä b&c#.txt', 'odd name')],
    ['new file (empty body, File-Path + Password only)', { method: 'PUT', path: '/fs/put', headers: { 'File-Path': encodeURIComponent('/home/docs/new.txt'), Password: '' } }],
    ['text editor save (no Password header)', { method: 'PUT', path: '/fs/put', body: 'edited', headers: { 'File-Path': encodeURIComponent('/home/docs/new.txt'), 'Content-Type': 'text/plain' } }],
  ])('PUT /fs/put: %s', async (_name, c) => {
    await expectOk(c, CODE_ONLY);
  });

  it('the Last-Modified header the upload sends becomes the file\'s modified time', async () => {
    const f = await expectOk<{ modified: string }>({ path: '/fs/get', body: { path: '/home/docs/deep/a.txt', password: '' } }, GET);
    expect(Date.parse(f.modified)).toBe(Date.UTC(2024, 0, 2, 3, 4, 5));
  });

  it('PUT /fs/put with As-Task: true answers a task and shows on the upload task page', async () => {
    const { task } = await expectOk<{ task: { id: string } }>(upload('/home/docs/tasked.txt', 'as task', { 'As-Task': 'true' }), { task: TASK });
    const done = await poll('upload task', async () => {
      const list = await expectOk<Array<{ id: string }>>({ path: '/admin/task/upload/done' }, 'array');
      return list.find((t) => t.id === task.id);
    });
    expectShape(done, TASK);
  });

  it('PUT /fs/form: multipart field `file` with the same headers', async () => {
    const form = new FormData();
    form.append('file', new Blob(['form body'], { type: 'text/plain' }), 'form.txt');
    await expectOk(
      {
        method: 'PUT', path: '/fs/form', body: form,
        headers: { 'File-Path': encodeURIComponent('/home/docs/form.txt'), 'As-Task': 'false', 'Last-Modified': String(Date.now()), Password: '' },
      },
      CODE_ONLY,
    );
    const r = await call<{ size: number }>({ path: '/fs/get', body: { path: '/home/docs/form.txt', password: '' } });
    expect(r.data.size).toBe('form body'.length);
  });
});

// ---------------------------------------------------------------------------------------------
// Browsing: fs/get → fs/list, readme/header cards, previews, links without Authorization
// ---------------------------------------------------------------------------------------------

describe('browse', () => {
  const listBody = (path: string, extra: Record<string, unknown> = {}) => ({ path, password: '', page: 1, per_page: 0, refresh: false, ...extra });

  it('a folder: fs/get (is_dir) then fs/list with pagination_type all (per_page 0) and with a page size', async () => {
    const dir = await expectOk({ path: '/fs/get', body: { path: '/home/docs', password: '' } }, { ...GET, raw_url: 'string' });
    // The front end decides on is_dir here (fs/get types by name alone, as AList's does).
    expect(dir.is_dir).toBe(true);
    const all = await expectOk({ path: '/fs/list', body: listBody('/home/docs') }, LIST);
    expect(all.content.length).toBe(all.total);
    const paged = await expectOk({ path: '/fs/list', body: listBody('/home/docs', { per_page: 2, refresh: true }) }, LIST);
    expect(paged.content.length).toBe(2);
    expect(paged.total).toBe(all.total);
    expect(all.write).toBe(true);
  });

  it('the home page: fs/get of / is a folder named root, then fs/list /', async () => {
    const root = await expectOk({ path: '/fs/get', body: { path: '/', password: '' } }, GET);
    expect(root).toMatchObject({ name: 'root', is_dir: true, raw_url: '' });
    const list = await expectOk<{ content: Array<{ name: string }> }>({ path: '/fs/list', body: listBody('/') }, LIST);
    expect(list.content.map((e) => e.name)).toContain('home');
  });

  it('an empty folder lists content [] (never null)', async () => {
    await expectOk({ path: '/fs/mkdir', body: { path: '/home/empty' } }, CODE_ONLY);
    const r = await expectOk({ path: '/fs/list', body: listBody('/home/empty') }, { ...LIST, content: 'array' });
    expect(r.content).toEqual([]);
  });

  it('readme/header cards: the folder files come through /p with sign and alist_ts, without Authorization', async () => {
    const list = await expectOk<{ content: Array<{ name: string; sign: string }> }>({ path: '/fs/list', body: listBody('/home/docs') }, LIST);
    for (const want of [/^readme\.md$/i, /^header\.md$/i]) {
      const f = list.content.find((e) => want.test(e.name))!;
      expect(f, String(want)).toBeDefined();
      const res = await fetchLink(`/p/home/docs/${encodeURIComponent(f.name)}?sign=${encodeURIComponent(f.sign)}&alist_ts=${Date.now()}`);
      expect(res.status).toBe(200);
      expect(await res.text()).toMatch(/^#/);
    }
  });

  it('readme/header from a meta rule arrive as strings in fs/list and fs/get', async () => {
    await expectOk({ path: '/admin/meta/create', body: { id: 0, path: '/home/media', password: '', p_sub: false, write: false, w_sub: false, hide: '', h_sub: false, readme: '# media readme', r_sub: false, header: 'media header', header_sub: false } }, CODE_ONLY);
    const list = await expectOk({ path: '/fs/list', body: listBody('/home/media') }, LIST);
    expect([list.readme, list.header]).toEqual(['# media readme', 'media header']);
    const get = await expectOk({ path: '/fs/get', body: { path: '/home/media', password: '' } }, GET);
    expect([get.readme, get.header]).toEqual(['# media readme', 'media header']);
  });

  it('a file: fs/get gives raw_url; raw_url and the /p preview work without Authorization', async () => {
    const f = await expectOk<{ raw_url: string; sign: string; type: number }>({ path: '/fs/get', body: { path: '/home/media/pic.png', password: '' } }, GET);
    expect(f.type).toBe(5);
    expect(f.raw_url).toMatch(/^https?:\/\//);
    const raw = await fetchLink(f.raw_url);
    expect(raw.status).toBe(200);
    expect(await raw.text()).toBe('not really a png');
    // Text preview (fetchText): /p with sign and alist_ts; body plus content-type.
    const t = await expectOk<{ sign: string }>({ path: '/fs/get', body: { path: '/home/docs/deep/a.txt', password: '' } }, GET);
    const p = await fetchLink(`/p/home/docs/deep/a.txt?sign=${encodeURIComponent(t.sign)}&alist_ts=${Date.now()}`);
    expect(p.status).toBe(200);
    expect(p.headers.get('content-type')).toMatch(/^text\/plain/);
    expect(await p.text()).toBe('alpha');
    // The download link is the same with /d.
    const d = await fetchLink(`/d/home/docs/deep/a.txt?sign=${encodeURIComponent(t.sign)}`);
    expect(d.status).toBe(200);
    expect(await d.text()).toBe('alpha');
    // An odd name, encoded the way the front end builds links.
    const odd = await expectOk<{ sign: string }>({ path: '/fs/get', body: { path: '/home/docs/ä b&c#.txt', password: '' } }, GET);
    const o = await fetchLink(`/p/home/docs/${encodeURIComponent('ä b&c#.txt')}?sign=${encodeURIComponent(odd.sign)}`);
    expect(await o.text()).toBe('odd name');
  });

  it('a missing path: the message ends with "object not found"', async () => {
    const e = await expectError({ path: '/fs/get', body: { path: '/home/nothing-here', password: '' } });
    expect(e.message).toMatch(/object not found$/);
  });

  it('a password-protected folder: 403 first, then the password in the body (and the Password header for uploads)', async () => {
    await expectOk({ path: '/admin/meta/create', body: { id: 0, path: '/home/locked', password: 'sesame', p_sub: true, write: true, w_sub: true, hide: '', h_sub: false, readme: '', r_sub: false, header: '', header_sub: false } }, CODE_ONLY);
    await expectOk({ path: '/fs/mkdir', body: { path: '/home/locked' } }, CODE_ONLY);
    await expectOk({ path: '/admin/user/create', body: { id: 0, username: 'visitor', password: 'visitor-pass-1', base_path: '/', role: 0, permission: 0, disabled: false, sso_id: '' } }, CODE_ONLY);
    const user = await ts.login('visitor', 'visitor-pass-1');
    await expectError({ path: '/fs/get', token: user, body: { path: '/home/locked', password: '' } }, 403);
    await expectError({ path: '/fs/list', token: user, body: listBody('/home/locked') }, 403);
    await expectOk({ path: '/fs/get', token: user, body: { path: '/home/locked', password: 'sesame' } }, GET);
    await expectError(upload('/home/locked/up.txt', 'x', {}, user), 403);
    await expectOk(upload('/home/locked/up.txt', 'x', { Password: 'sesame' }, user), CODE_ONLY);
    const r = await expectOk({ path: '/fs/list', token: user, body: listBody('/home/locked', { password: 'sesame' }) }, LIST);
    expect(r.write).toBe(true);
  });

  it('folder tree for copy/move: POST /fs/dirs', async () => {
    const dirs = await expectOk<Array<{ name: string }>>({ path: '/fs/dirs', body: { path: '/home', password: '', force_root: false } }, [{ name: 'string' }]);
    expect(dirs.map((d) => d.name)).toContain('docs');
    await expectOk({ path: '/fs/dirs', body: { path: '/', password: '', force_root: true } }, [{ name: 'string' }]);
  });
});

// ---------------------------------------------------------------------------------------------
// Toolbar operations (code/message only; checked through fs/list afterwards)
// ---------------------------------------------------------------------------------------------

describe('toolbar', () => {
  const names = async (path: string) =>
    (await expectOk<{ content: Array<{ name: string }> }>({ path: '/fs/list', body: { path, password: '', page: 1, per_page: 0, refresh: true } }, { ...LIST, content: 'array' })).content
      .map((e) => e.name)
      .sort();

  beforeAll(async () => {
    for (const n of ['t1.txt', 't2.txt', 'img_1.jpg', 'img_2.jpg']) await expectOk(upload(`/home/ops/${n}`, n), CODE_ONLY);
  });

  it.each<[string, Call, string, string[]]>([
    ['mkdir', { path: '/fs/mkdir', body: { path: '/home/ops/dir' } }, '/home/ops', ['dir', 'img_1.jpg', 'img_2.jpg', 't1.txt', 't2.txt']],
    ['rename', { path: '/fs/rename', body: { path: '/home/ops/t1.txt', name: 'one.txt' } }, '/home/ops', ['dir', 'img_1.jpg', 'img_2.jpg', 'one.txt', 't2.txt']],
    ['batch_rename', { path: '/fs/batch_rename', body: { src_dir: '/home/ops', rename_objects: [{ src_name: 't2.txt', new_name: 'two.txt' }] } }, '/home/ops', ['dir', 'img_1.jpg', 'img_2.jpg', 'one.txt', 'two.txt']],
    ['regex_rename', { path: '/fs/regex_rename', body: { src_dir: '/home/ops', src_name_regex: '^img_(\\d)', new_name_regex: 'pic$1' } }, '/home/ops', ['dir', 'one.txt', 'pic1.jpg', 'pic2.jpg', 'two.txt']],
    ['copy', { path: '/fs/copy', body: { src_dir: '/home/ops', dst_dir: '/home/ops/dir', names: ['one.txt'] } }, '/home/ops/dir', ['one.txt']],
    ['move', { path: '/fs/move', body: { src_dir: '/home/ops', dst_dir: '/home/ops/dir', names: ['two.txt', 'pic1.jpg'] } }, '/home/ops', ['dir', 'one.txt', 'pic2.jpg']],
    ['remove', { path: '/fs/remove', body: { dir: '/home/ops', names: ['one.txt'] } }, '/home/ops', ['dir', 'pic2.jpg']],
    ['recursive_move', { path: '/fs/recursive_move', body: { src_dir: '/home/ops/dir', dst_dir: '/home/ops' } }, '/home/ops', ['dir', 'one.txt', 'pic1.jpg', 'pic2.jpg', 'two.txt']],
    ['remove_empty_directory', { path: '/fs/remove_empty_directory', body: { src_dir: '/home/ops' } }, '/home/ops', ['one.txt', 'pic1.jpg', 'pic2.jpg', 'two.txt']],
  ])('POST /fs/%s', async (_name, c, dir, after) => {
    await expectOk(c, CODE_ONLY);
    expect(await names(dir)).toEqual(after);
  });

  it('an operation the user may not do is an envelope error (403), not a crash', async () => {
    const user = await ts.login('visitor', 'visitor-pass-1');
    await expectError({ path: '/fs/remove', token: user, body: { dir: '/home/ops', names: ['one.txt'] } }, 403);
    await expectError({ path: '/fs/mkdir', token: user, body: { path: '/home/ops/nope' } }, 403);
  });
});

// ---------------------------------------------------------------------------------------------
// Search (button shown when search_index != none) and the indexes page
// ---------------------------------------------------------------------------------------------

describe('search and indexes', () => {
  it('with search_index=none the setting hides the button and index calls are envelope errors', async () => {
    expect((await expectOk<Record<string, string>>({ path: '/public/settings', token: '' }, { search_index: 'string' })).search_index).toBe('none');
    await expectError({ path: '/admin/index/progress' });
  });

  it('settings save search_index=database, build, progress, then fs/search', async () => {
    await expectOk({ path: '/admin/setting/save', body: [{ key: 'search_index', value: 'database' }] }, CODE_ONLY);
    expect((await expectOk<Record<string, string>>({ path: '/public/settings', token: '' }, { search_index: 'string' })).search_index).toBe('database');
    await expectOk({ path: '/admin/index/build', body: { paths: ['/'], max_depth: -1 } }, CODE_ONLY);
    const PROGRESS = { obj_count: 'number', is_done: 'boolean', last_done_time: 'string|null', error: 'string' } as const;
    await poll('index build', async () => ((await expectOk<{ is_done: boolean }>({ path: '/admin/index/progress' }, PROGRESS)).is_done ? true : undefined));
    expect((await expectOk({ path: '/admin/index/progress' }, PROGRESS)).obj_count).toBeGreaterThan(0);

    const search = (scope: number) => ({ path: '/fs/search', body: { parent: '/home', keywords: 'a', scope, page: 1, per_page: 100, password: '' } });
    const r = await expectOk<{ content: Array<{ name: string; is_dir: boolean }> }>(search(0), { content: [{ parent: 'string', name: 'string', is_dir: 'boolean', size: 'number', type: 'number' }], total: 'number' });
    expect(r.content.map((e) => e.name)).toContain('a.txt');
    const files = await expectOk<{ content: Array<{ is_dir: boolean }> }>(search(2), { content: 'array', total: 'number' });
    expect(files.content.every((e) => !e.is_dir)).toBe(true);
    const folders = await expectOk<{ content: Array<{ is_dir: boolean }> }>(search(1), { content: 'array', total: 'number' });
    expect(folders.content.every((e) => e.is_dir)).toBe(true);
    // Nothing matches: content [] (never null).
    const none = await expectOk<{ content: unknown[] }>({ path: '/fs/search', body: { parent: '/', keywords: 'zzz-no-match', scope: 0, page: 1, per_page: 100, password: '' } }, { content: 'array', total: 'number' });
    expect(none.content).toEqual([]);
  });

  it.each<[string, Call]>([
    ['index/update', { path: '/admin/index/update', body: { paths: ['/home'], max_depth: -1 } }],
    ['index/stop (while not running: an error the page shows, or success)', { method: 'POST', path: '/admin/index/stop' }],
    ['index/clear', { method: 'POST', path: '/admin/index/clear' }],
  ])('POST %s answers an envelope; progress keeps its shape', async (_name, c) => {
    await call(c);
    await poll('index idle', async () => {
      const p = await call<{ is_done: boolean; obj_count: number }>({ path: '/admin/index/progress' });
      expectShape(p.data, { obj_count: 'number', is_done: 'boolean', last_done_time: 'string|null', error: 'string' });
      // Done, or cleared (nothing indexed, nothing running).
      return p.data.is_done || p.data.obj_count === 0 ? true : undefined;
    });
  });
});

// ---------------------------------------------------------------------------------------------
// Offline download (toolbar) and the task pages
// ---------------------------------------------------------------------------------------------

describe('offline download and tasks', () => {
  it('POST /fs/add_offline_download with a listed tool makes tasks shown on the aria2 page', async () => {
    await expectOk({ path: '/admin/setting/save', body: [{ key: 'offline_download_allow_private', value: 'true' }] }, CODE_ONLY);
    const tools = await expectOk<string[]>({ path: '/public/offline_download_tools', token: '' }, ['string']);
    const tool = tools.includes('SimpleHttp') ? 'SimpleHttp' : tools[0]!;
    const r = await expectOk<{ tasks: Array<{ id: string }> }>(
      { path: '/fs/add_offline_download', body: { path: '/home/dl', urls: [`${web.url}/remote.txt`], tool, delete_policy: 'delete_on_upload_succeed' } },
      { tasks: [TASK] },
    );
    await poll('offline download', async () => {
      const done = await expectOk<Array<{ id: string }>>({ path: '/admin/task/offline_download/done' }, 'array');
      return done.some((t) => t.id === r.tasks[0]!.id) ? true : undefined;
    });
    await poll('transfer', async () => {
      const l = await call<{ content: Array<{ name: string }> }>({ path: '/fs/list', body: { path: '/home/dl', password: '', page: 1, per_page: 0, refresh: true } });
      return l.code === 200 && l.data.content.some((e) => e.name === 'remote.txt') ? true : undefined;
    });
  });

  it('a copy between storages is a task on the copy page', async () => {
    const root = await import('node:fs/promises').then((fs) => fs.mkdtemp(`${ts.dataDir}/second-`));
    await expectOk({ path: '/admin/storage/create', body: { mount_path: '/second', driver: 'Local', order: 1, remark: '', addition: JSON.stringify({ root_folder_path: root }) } }, { id: 'number' });
    const r = await expectOk({ path: '/fs/copy', body: { src_dir: '/home/docs/deep', dst_dir: '/second', names: ['a.txt'] } }, 'any|null');
    expect(r === null || Array.isArray((r as { tasks?: unknown }).tasks)).toBe(true);
    await poll('copy', async () => {
      const l = await call<{ content: Array<{ name: string }> }>({ path: '/fs/list', body: { path: '/second', password: '', page: 1, per_page: 0, refresh: true } });
      return l.data?.content.some((e) => e.name === 'a.txt') ? true : undefined;
    });
  });

  const KINDS = ['offline_download', 'offline_download_transfer', 'upload', 'copy'];

  it.each(KINDS)('GET /admin/task/%s/undone and /done (and OpenList /task/…): TaskInfo[] sorted by id', async (kind) => {
    for (const prefix of ['/admin/task', '/task']) {
      await expectOk({ path: `${prefix}/${kind}/undone` }, 'array');
      const done = await expectOk<Array<{ id: string }>>({ path: `${prefix}/${kind}/done` }, kind === 'copy' ? 'array' : [TASK]);
      expectShape(done, done.length ? [TASK] : 'array');
      const ids = done.map((t) => t.id);
      expect(ids).toEqual([...ids].sort());
    }
  });

  it('task buttons: delete?tid=, retry?tid=, cancel?tid= of an unknown id, clear_done, clear_succeeded, retry_failed', async () => {
    const done = await expectOk<Array<{ id: string }>>({ path: '/admin/task/upload/done' }, [TASK]);
    await expectOk({ method: 'POST', path: `/admin/task/upload/delete?tid=${encodeURIComponent(done[0]!.id)}` }, CODE_ONLY);
    await expectError({ method: 'POST', path: '/admin/task/upload/cancel?tid=nope' }, 404);
    await expectError({ method: 'POST', path: '/admin/task/upload/retry?tid=nope' }, 404);
    for (const kind of KINDS) {
      for (const action of ['retry_failed', 'clear_succeeded', 'clear_done']) await expectOk({ method: 'POST', path: `/admin/task/${kind}/${action}` }, CODE_ONLY);
      expect(await expectOk({ path: `/admin/task/${kind}/done` }, 'array')).toEqual([]);
    }
  });
});

// ---------------------------------------------------------------------------------------------
// Manage pages
// ---------------------------------------------------------------------------------------------

describe('manage: storages and drivers', () => {
  it('storages page: list (no page params), driver names, load_all', async () => {
    const list = await expectOk({ path: '/admin/storage/list' }, { content: [STORAGE], total: 'number' });
    expect(list.total).toBe(list.content.length);
    const names = await expectOk<string[]>({ path: '/admin/driver/names' }, ['string']);
    expect(names).toContain('Local');
    await expectOk({ method: 'POST', path: '/admin/storage/load_all' }, CODE_ONLY);
  });

  it('storage edit: driver list and info, create → data.id, get, update, disable, enable, delete', async () => {
    const drivers = await expectOk<Record<string, { additional: unknown[] }>>({ path: '/admin/driver/list' }, { '*': DRIVER });
    expect(Object.keys(drivers)).toContain('Local');
    for (const [name, d] of Object.entries(drivers)) expectShape(d.additional, d.additional.length ? [DRIVER_ITEM] : 'array', name);
    const info = await expectOk({ path: '/admin/driver/info?driver=Local' }, DRIVER);
    const additional = info.additional as Array<Record<string, unknown>>;
    expectShape(additional, [DRIVER_ITEM]);
    const root = await import('node:fs/promises').then((fs) => fs.mkdtemp(`${ts.dataDir}/third-`));
    // The edit page posts the whole Storage, `addition` as a JSON string.
    const storage = {
      id: 0, mount_path: '/third', order: 3, driver: 'Local', cache_expiration: 30, status: '', addition: JSON.stringify({ root_folder_path: root }),
      remark: 'made by the page', modified: new Date().toISOString(), disabled: false, enable_sign: false, order_by: 'name', order_direction: 'asc',
      extract_folder: '', web_proxy: false, webdav_policy: 'native_proxy', down_proxy_url: '',
    };
    const { id } = await expectOk<{ id: number }>({ path: '/admin/storage/create', body: storage }, { id: 'number' });
    const got = await expectOk({ path: `/admin/storage/get?id=${id}` }, STORAGE);
    expect(got).toMatchObject({ mount_path: '/third', remark: 'made by the page', status: 'work' });
    expect(JSON.parse(got.addition)).toMatchObject({ root_folder_path: root });
    await expectOk({ path: '/admin/storage/update', body: { ...got, remark: 'edited' } }, CODE_ONLY);
    expect((await expectOk({ path: `/admin/storage/get?id=${id}` }, STORAGE)).remark).toBe('edited');
    await expectOk({ method: 'POST', path: `/admin/storage/disable?id=${id}` }, CODE_ONLY);
    expect((await expectOk({ path: `/admin/storage/get?id=${id}` }, STORAGE)).disabled).toBe(true);
    await expectOk({ method: 'POST', path: `/admin/storage/enable?id=${id}` }, CODE_ONLY);
    expect((await expectOk({ path: `/admin/storage/get?id=${id}` }, STORAGE)).disabled).toBe(false);
    await expectOk({ method: 'POST', path: `/admin/storage/delete?id=${id}` }, CODE_ONLY);
    await expectError({ path: `/admin/storage/get?id=${id}` });
  });
});

describe('manage: users, metas, settings, SSH keys', () => {
  it('users page: list, create, get, update, delete', async () => {
    await expectOk({ path: '/admin/user/list' }, { content: [USER], total: 'number' });
    const user = { id: 0, username: 'managed', password: 'managed-pass-1', base_path: '/home', role: 0, permission: 8 | 16, disabled: false, sso_id: '' };
    await expectOk({ path: '/admin/user/create', body: user }, CODE_ONLY);
    const list = await expectOk<{ content: Array<{ id: number; username: string }> }>({ path: '/admin/user/list' }, { content: [USER], total: 'number' });
    const id = list.content.find((u) => u.username === 'managed')!.id;
    const got = await expectOk({ path: `/admin/user/get?id=${id}` }, USER);
    expect(got).toMatchObject({ base_path: '/home', permission: 24 });
    // The edit page posts the user back with password "" (keep).
    await expectOk({ path: '/admin/user/update', body: { ...got, password: '', permission: 8 } }, CODE_ONLY);
    expect((await expectOk({ path: `/admin/user/get?id=${id}` }, USER)).permission).toBe(8);
    expect(await ts.login('managed', 'managed-pass-1')).toBeTruthy();
    await expectOk({ method: 'POST', path: `/admin/user/delete?id=${id}` }, CODE_ONLY);
  });

  it('metas page: list, create, get, update, delete', async () => {
    const meta = { id: 0, path: '/home/ops', password: '', p_sub: false, write: false, w_sub: false, hide: '^secret', h_sub: true, readme: '', r_sub: false, header: '', header_sub: false };
    await expectOk({ path: '/admin/meta/create', body: meta }, CODE_ONLY);
    const list = await expectOk<{ content: Array<{ id: number; path: string }> }>({ path: '/admin/meta/list' }, { content: [META], total: 'number' });
    const id = list.content.find((m) => m.path === '/home/ops')!.id;
    const got = await expectOk({ path: `/admin/meta/get?id=${id}` }, META);
    await expectOk({ path: '/admin/meta/update', body: { ...got, readme: 'ops readme' } }, CODE_ONLY);
    expect((await expectOk({ path: `/admin/meta/get?id=${id}` }, META)).readme).toBe('ops readme');
    await expectOk({ method: 'POST', path: `/admin/meta/delete?id=${id}` }, CODE_ONLY);
  });

  it.each([
    ['site', '?group=1'], ['style', '?group=2'], ['preview', '?group=3'], ['global', '?group=4'], ['index', '?group=6'],
    ['other', '?groups=5,0'], ['backup (no params)', ''],
  ])('settings page %s: GET /admin/setting/list%s', async (_name, q) => {
    await expectOk({ path: `/admin/setting/list${q}` }, [SETTING]);
  });

  it.each([['sso', '?group=7'], ['ldap', '?group=8'], ['s3', '?group=9']])('settings page %s (a feature treegate lacks): a list, possibly empty', async (_n, q) => {
    await expectOk({ path: `/admin/setting/list${q}` }, 'array');
  });

  it('settings save (SettingItem[]), reset_token, delete?key=', async () => {
    const site = await expectOk<Array<{ key: string; value: string }>>({ path: '/admin/setting/list?group=1' }, [SETTING]);
    const title = site.find((s) => s.key === 'site_title')!;
    expect(title).toBeDefined();
    await expectOk({ path: '/admin/setting/save', body: site.map((s) => (s.key === 'site_title' ? { ...s, value: 'Front end test' } : s)) }, CODE_ONLY);
    expect((await expectOk<Record<string, string>>({ path: '/public/settings', token: '' }, { site_title: 'string' })).site_title).toBe('Front end test');
    const other = await expectOk<Array<{ key: string }>>({ path: '/admin/setting/list?groups=5,0' }, [SETTING]);
    for (const k of ['aria2_uri', 'aria2_secret', 'token', 'qbittorrent_url', 'qbittorrent_seedtime']) expect(other.map((s) => s.key), k).toContain(k);
    const token = await expectOk<string>({ method: 'POST', path: '/admin/setting/reset_token' }, 'string');
    expect(token.length).toBeGreaterThan(0);
    await expectOk({ path: '/admin/setting/save', body: [{ key: 'frontend_test_custom', value: 'x', type: 'string', group: 0, flag: 1 }] }, CODE_ONLY);
    await call({ method: 'POST', path: '/admin/setting/delete?key=frontend_test_custom' });
  });

  it('backup/restore page: the four lists, then restore through save / update (matched by key, mount_path, path, username)', async () => {
    const settings = await expectOk<Array<{ key: string }>>({ path: '/admin/setting/list' }, [SETTING]);
    const storages = await expectOk<{ content: Array<Record<string, unknown>> }>({ path: '/admin/storage/list' }, { content: [STORAGE], total: 'number' });
    const metas = await expectOk<{ content: Array<Record<string, unknown>> }>({ path: '/admin/meta/list' }, { content: [META], total: 'number' });
    const users = await expectOk<{ content: Array<Record<string, unknown>> }>({ path: '/admin/user/list' }, { content: [USER], total: 'number' });
    await expectOk({ path: '/admin/setting/save', body: settings.filter((x) => x.key !== 'version' && x.key !== 'index_progress') }, CODE_ONLY);
    for (const st of storages.content) await expectOk({ path: '/admin/storage/update', body: st }, CODE_ONLY);
    for (const m of metas.content) await expectOk({ path: '/admin/meta/update', body: m }, CODE_ONLY);
    // Restoring the admin itself ends its tokens (as AList does on every user update): not done here.
    for (const u of users.content.filter((x) => x.role !== 2)) await expectOk({ path: '/admin/user/update', body: u }, CODE_ONLY);
    expect((await expectOk<{ total: number }>({ path: '/admin/storage/list' }, { content: [STORAGE], total: 'number' })).total).toBe(storages.content.length);
  });

  it('settings other: set_aria2 with an unreachable aria2 is an envelope error, not a hang', async () => {
    const started = Date.now();
    await expectError({ path: '/admin/setting/set_aria2', body: { uri: 'http://127.0.0.1:1/jsonrpc', secret: '' } });
    expect(Date.now() - started).toBeLessThan(TIMEOUT_MS);
  });

  it('SSH keys (OpenList): /me/sshkey list, add, delete; the admin lists and deletes a user\'s keys', async () => {
    await expectOk({ path: '/me/sshkey/list' }, { content: 'array', total: 'number' });
    await expectOk({ path: '/me/sshkey/add', body: { title: 'laptop', key: sshPublicKey('laptop@test') } }, CODE_ONLY);
    await expectOk({ path: '/me/sshkey/add', body: { title: 'desk', key: sshPublicKey('desk@test') } }, CODE_ONLY);
    const mine = await expectOk<{ content: Array<{ id: number; title: string }> }>({ path: '/me/sshkey/list' }, { content: [SSHKEY], total: 'number' });
    expect(mine.content.map((k) => k.title).sort()).toEqual(['desk', 'laptop']);
    await expectOk({ method: 'POST', path: `/me/sshkey/delete?id=${mine.content[0]!.id}` }, CODE_ONLY);
    const me = await expectOk<{ id: number }>({ path: '/me' }, ME);
    const theirs = await expectOk<{ content: Array<{ id: number }> }>({ path: `/admin/user/sshkey/list?uid=${me.id}` }, { content: [SSHKEY], total: 'number' });
    await expectOk({ method: 'POST', path: `/admin/user/sshkey/delete?uid=${me.id}&id=${theirs.content[0]!.id}` }, CODE_ONLY);
    expect((await expectOk({ path: '/me/sshkey/list' }, { content: 'array', total: 'number' })).total).toBe(0);
  });
});

// ---------------------------------------------------------------------------------------------
// Calls for features treegate does not have: clean envelope errors
// ---------------------------------------------------------------------------------------------

describe('features treegate does not have', () => {
  const b64 = Buffer.from('http://x/y/app.ipa').toString('base64');
  const unsupported: Array<[string, Call]> = [
    ['SSO login (GET /auth/sso?method=sso_get_token)', { path: '/auth/sso?method=sso_get_token', token: '' }],
    ['SSO bind (GET /auth/sso?method=get_sso_id)', { path: '/auth/sso?method=get_sso_id' }],
    ['LDAP login', { path: '/auth/login/ldap', token: '', body: { username: 'admin', password: ADMIN_PASSWORD, otp_code: '' } }],
    ['WebAuthn begin login', { path: '/authn/webauthn_begin_login?username=admin', token: '' }],
    ['WebAuthn finish login', { path: '/authn/webauthn_finish_login?username=admin', token: '', body: { id: 'x' }, headers: { session: 'x' } }],
    ['WebAuthn begin registration', { path: '/authn/webauthn_begin_registration' }],
    ['WebAuthn finish registration', { path: '/authn/webauthn_finish_registration', body: { id: 'x' }, headers: { session: 'x' } }],
    ['WebAuthn delete credential', { path: '/authn/delete_authn', body: { id: 'x' } }],
    ['archive meta', { path: '/fs/archive/meta', body: { path: '/home/docs/a.zip', password: '', archive_pass: '', refresh: false } }],
    ['archive list', { path: '/fs/archive/list', body: { path: '/home/docs/a.zip', password: '', archive_pass: '', inner_path: '/', page: 1, per_page: 0, refresh: false } }],
    ['archive decompress', { path: '/fs/archive/decompress', body: { src_dir: '/home/docs', dst_dir: '/home', name: ['a.zip'], archive_pass: '', inner_path: '/', cache_full: false, put_into_new_dir: false } }],
    ['driver-specific fs/other (Aliyun previews)', { path: '/fs/other', body: { path: '/home/media/movie.mp4', password: '', method: 'video_preview' } }],
    ['messenger get', { path: '/admin/message/get', body: {} }],
    ['messenger send', { path: '/admin/message/send', body: { message: 'hi' } }],
    ['Transmission tool', { path: '/admin/setting/set_transmission', body: { uri: 'http://127.0.0.1:1/transmission/rpc', seedtime: '0' } }],
    ['115 tool', { path: '/admin/setting/set_115', body: {} }],
    ['PikPak tool', { path: '/admin/setting/set_pikpak', body: {} }],
    ['Thunder tool', { path: '/admin/setting/set_thunder', body: {} }],
    ['sharing', { path: '/share/list' }],
    ['an unknown route', { path: '/no/such/route', body: {} }],
  ];

  it.each(unsupported)('%s: HTTP 200, JSON envelope, code ≠ 200', async (_name, c) => {
    const env = await expectError(c);
    expect(env.data ?? null).toBeNull();
  });

  it('the profile page\'s WebAuthn credential list answers [] so the page renders', async () => {
    expect(await expectOk({ path: '/authn/getcredentials' }, 'array')).toEqual([]);
  });

  it('ipa install links (/i/…) never answer the SPA', async () => {
    const res = await fetchLink(`/i/${b64}.plist`);
    expect(res.headers.get('content-type') ?? '').not.toMatch(/html/);
    await res.arrayBuffer();
  });
});
