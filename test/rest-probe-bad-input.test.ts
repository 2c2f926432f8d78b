/**
 * Bad-input probe of every REST endpoint (protocols/rest/routes/*.ts): "bad input gets a clear
 * error and loses nothing". Malformed JSON, wrong types, non-object bodies, odd encodings, oversize
 * bodies, hostile query strings and headers are sent to a real server as the admin, an ordinary user
 * and anonymously. Every answer must be AList's envelope (HTTP 200, `{code, message, data}`), never
 * an internal error or an internal message, and the admin records (users, storages, metas,
 * settings) must come through unchanged and survive a restart on the same DATA dir.
 *
 * Blocks whose comment starts "Found and fixed" showed a defect, each fixed (the comment says what
 * it was); they fail without the fix.
 */
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import fs from 'node:fs';
import { request } from 'node:http';
import { connect } from 'node:net';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { startTestServer, type TestServer } from './harness.js';
import { ALL_FS, expectCode, makeUser, ok, seed } from './fs-helpers.js';

const DATA = mkdtempSync(join(tmpdir(), 'tg-bad-input-'));
let ts: TestServer;
let admin: string;
let user: string;

interface Raw { status: number; text: string }
interface Env { code: number; message: string; data: unknown }

function send(method: string, path: string, headers: Record<string, string> = {}, body?: string | Buffer): Promise<Raw> {
  const u = new URL(ts.url);
  return new Promise((resolve, reject) => {
    const req = request({ host: u.hostname, port: u.port, method, path, headers, agent: false }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, text: Buffer.concat(chunks).toString('utf8') }));
      res.on('error', reject);
    });
    req.on('error', reject);
    req.end(body);
  });
}

/** Internals that must never reach a client: JS errors, stack frames, fastify codes, host paths. */
const LEAK = /TypeError|ReferenceError|RangeError|SyntaxError|Cannot read|is not a function|\bat \S+ \(|node:internal|FST_ERR|Maximum call stack|\[object Object\]|tg-bad-input-|\/tmp\//;

/** The answer is AList's envelope with a clear message; returns it. */
function envelope(r: Raw, label: string): Env {
  expect(r.status, `${label}: HTTP status`).toBe(200);
  let env: Env;
  try {
    env = JSON.parse(r.text) as Env;
  } catch {
    throw new Error(`${label}: not JSON: ${r.text.slice(0, 200)}`);
  }
  expect(typeof env.code, `${label}: code`).toBe('number');
  expect(typeof env.message, `${label}: message`).toBe('string');
  expect('data' in env, `${label}: data`).toBe(true);
  expect(env.message, `${label}: message leaks internals`).not.toMatch(LEAK);
  expect(`${env.code} ${env.message}`, `${label}: unhandled error`).not.toBe('500 internal error');
  return env;
}

const json = (token?: string): Record<string, string> => ({ 'content-type': 'application/json', ...(token ? { authorization: token } : {}) });
const api = async (path: string, body?: unknown, token = admin): Promise<Env> =>
  envelope(await send(body === undefined ? 'GET' : 'POST', path, json(token), body === undefined ? undefined : JSON.stringify(body)), path);
const disk = (p = '') => join(DATA, 'storage', p);
const tree = (p: string) => readdirSync(disk(p), { recursive: true }).map(String).sort();

/** Everything an admin manages, as the admin API shows it (the `token` setting aside: reset_token is probed). */
async function adminState() {
  const list = async (p: string) => (await api(p)).data as { content: Array<Record<string, unknown>> };
  const settings = ((await api('/api/admin/setting/list')).data as Array<{ key: string; value: string }>).filter((s) => s.key !== 'token');
  return {
    users: (await list('/api/admin/user/list')).content,
    storages: (await list('/api/admin/storage/list')).content.map(({ modified: _m, ...s }) => s),
    metas: (await list('/api/admin/meta/list')).content,
    settings: Object.fromEntries(settings.map((s) => [s.key, s.value])),
  };
}

async function restart(): Promise<void> {
  await ts.close(); // DATA is ours: the harness keeps it
  ts = await startTestServer({ dataDir: DATA, env: { TREEGATE_SFTP_ENABLE: 'false' } });
  admin = await ts.login();
  user = await ts.login('probe-user', 'pw-probe-user-123');
}

beforeAll(async () => {
  ts = await startTestServer({ dataDir: DATA, env: { TREEGATE_SFTP_ENABLE: 'false' } });
  admin = await ts.login();
  mkdirSync(disk('probe-u'), { recursive: true });
  user = await makeUser(ts, admin, 'probe-user', ALL_FS, '/probe-u');
  ok(await api('/api/admin/storage/create', { mount_path: '/probe-mem', driver: 'Memory' }));
  ok(await api('/api/admin/meta/create', { path: '/probe-meta', readme: 'kept' }));
});
afterAll(async () => {
  await ts?.close();
  rmSync(DATA, { recursive: true, force: true });
});

// ---------------------------------------------------------------------------------------------
// Every route, hostile bodies and queries, three callers.

interface Route { m: 'GET' | 'POST'; p: string; open?: boolean }

const TASK_ROUTES: Route[] = ['/api/task/upload', '/api/task/offline_download', '/api/admin/task/copy'].flatMap((pre) => [
  { m: 'GET' as const, p: `${pre}/undone` }, { m: 'GET' as const, p: `${pre}/done` },
  ...['info', 'cancel', 'delete', 'retry', 'cancel_some', 'delete_some', 'retry_some', 'clear_done', 'clear_succeeded', 'retry_failed'].map((a) => ({ m: 'POST' as const, p: `${pre}/${a}` })),
]);

const ROUTES: Route[] = [
  { m: 'POST', p: '/api/auth/login', open: true }, { m: 'POST', p: '/api/auth/login/hash', open: true }, { m: 'GET', p: '/api/auth/logout' },
  { m: 'POST', p: '/api/auth/2fa/generate' }, { m: 'POST', p: '/api/auth/2fa/verify' },
  { m: 'GET', p: '/api/me' }, { m: 'POST', p: '/api/me/update' }, { m: 'GET', p: '/api/me/sshkey/list' }, { m: 'POST', p: '/api/me/sshkey/add' }, { m: 'POST', p: '/api/me/sshkey/delete' },
  { m: 'POST', p: '/api/public/settings', open: true }, { m: 'POST', p: '/api/public/offline_download_tools', open: true }, { m: 'POST', p: '/api/public/archive_extensions', open: true },
  { m: 'GET', p: '/api/admin/driver/list' }, { m: 'GET', p: '/api/admin/driver/names' }, { m: 'GET', p: '/api/admin/driver/info' },
  ...['list', 'get', 'sshkey/list'].map((a) => ({ m: 'GET' as const, p: `/api/admin/user/${a}` })),
  ...['create', 'update', 'delete', 'cancel_2fa', 'del_cache', 'sshkey/delete'].map((a) => ({ m: 'POST' as const, p: `/api/admin/user/${a}` })),
  { m: 'GET', p: '/api/admin/setting/list' }, { m: 'GET', p: '/api/admin/setting/get' },
  ...['save', 'delete', 'reset_token', 'set_aria2', 'set_qbit'].map((a) => ({ m: 'POST' as const, p: `/api/admin/setting/${a}` })),
  { m: 'GET', p: '/api/admin/storage/list' }, { m: 'GET', p: '/api/admin/storage/get' },
  ...['create', 'update', 'delete', 'enable', 'disable', 'load_all'].map((a) => ({ m: 'POST' as const, p: `/api/admin/storage/${a}` })),
  { m: 'GET', p: '/api/admin/meta/list' }, { m: 'GET', p: '/api/admin/meta/get' },
  ...['create', 'update', 'delete'].map((a) => ({ m: 'POST' as const, p: `/api/admin/meta/${a}` })),
  ...['build', 'update', 'stop', 'clear', 'progress'].map((a) => ({ m: 'POST' as const, p: `/api/admin/index/${a}` })),
  ...['list', 'get', 'dirs', 'link', 'search', 'mkdir', 'rename', 'batch_rename', 'regex_rename', 'move', 'copy', 'recursive_move', 'remove',
    'remove_empty_directory', 'add_offline_download'].map((a) => ({ m: 'POST' as const, p: `/api/fs/${a}` })),
  ...TASK_ROUTES,
];

/** What the auth hook answers before any input is read, or undefined when the route reads it. */
function gate(r: Route, who: string): [number, string] | undefined {
  if (r.open) return undefined;
  if (who === 'anon') return [401, 'Guest user is disabled, login please'];
  if (who === 'user' && r.p.startsWith('/api/admin/')) return [403, 'You are not an admin'];
  return undefined;
}

const MALFORMED = ['{"path":', '{"a":NaN}', '{"a":1}garbage', 'not json at all', "{'single':'quotes'}"];
// Bodies that parse: each route decides; any clear envelope will do.
const ODD_BODIES: Array<[string, string | Buffer, string | undefined]> = [
  ['string', '"text"', 'application/json'],
  ['number', '1e999', 'application/json'],
  ['array', '[1,{"a":[null]},"__proto__"]', 'application/json'],
  ['nested', '['.repeat(5000) + ']'.repeat(5000), 'application/json'],
  // (no `path`/`username` here: those would be valid creates and renames; see 'odd encodings' below)
  ['lone surrogates', '{"dir":"\\udfff","src_dir":"\\ud800","names":["\\ud800"],"id":"\\ud800","key":"\\ud800","title":"\\ud800"}', 'application/json'],
  ['invalid UTF-8', Buffer.concat([Buffer.from('{"dir":"/probe-u/'), Buffer.from([0xff, 0xfe, 0xc3]), Buffer.from('","names":["x"]}')]), 'application/json'],
  ['proto keys', '{"__proto__":{"path":"/","role":2},"constructor":{"prototype":{"x":1}}}', 'application/json'],
  ['wrong types', '{"path":["/"],"names":"a","dir":{},"id":"1.5","page":"x","username":7,"driver":null,"tid":[]}', 'application/json'],
  ['form with traversal', 'path=%2F..%2Fx&names=a&names=..&dir=%00&id=-1&username=', 'application/x-www-form-urlencoded'],
  ['text/plain', '{"src_dir":"/probe-u/x"}', 'text/plain'],
  ['xml', '<a><b/></a>', 'application/xml'],
  ['no content type', '{"src_dir":"/probe-u/x"}', undefined],
];
const QUERIES = ['?id=%00&uid=-1&page=-1&per_page=1e9&tid=%ff&key=..%2F..&driver=%5C&group=1e999&groups=,,&keys=__proto__',
  '?id=999991&id=1&tid=a&tid=b', '?id[]=1&page[a]=2', '?id=99999999999999999999&page=9999999999&per_page=-9999999999', `?key=${'k'.repeat(3000)}`];

const CALLERS = (): Array<[string, string | undefined]> => [['admin', admin], ['user', user], ['anon', undefined]];

describe('every route answers hostile input with a clear envelope', () => {
  let before: Awaited<ReturnType<typeof adminState>>;
  beforeAll(async () => {
    before = await adminState();
  });

  it('malformed JSON: 400 `invalid request: malformed JSON body` (or the auth answer), for every POST route and caller', async () => {
    for (const r of ROUTES.filter((x) => x.m === 'POST')) {
      for (const [who, token] of CALLERS()) {
        for (const body of MALFORMED) {
          const env = envelope(await send('POST', r.p, json(token), body), `${who} ${r.p} ${body}`);
          expect([env.code, env.message], `${who} ${r.p} ${body}`).toEqual(gate(r, who) ?? [400, 'invalid request: malformed JSON body']);
        }
      }
    }
  });

  it('a body over max_json_body: 400 `request body too large`', async () => {
    const big = JSON.stringify({ path: 'x'.repeat(1_100_000) });
    for (const r of ROUTES.filter((x) => x.m === 'POST')) {
      // (callers the auth hook refuses are answered before the body is read: covered above)
      for (const [who, token] of CALLERS().filter(([w]) => !gate(r, w))) {
        const env = envelope(await send('POST', r.p, json(token), big), `${who} ${r.p}`);
        expect([env.code, env.message], `${who} ${r.p}`).toEqual([400, 'request body too large']);
      }
    }
  });

  it('bodies of the wrong shape, type or encoding: an envelope, never an internal error', async () => {
    for (const r of ROUTES.filter((x) => x.m === 'POST')) {
      for (const [who, token] of CALLERS()) {
        for (const [name, body, ct] of ODD_BODIES) {
          const headers: Record<string, string> = { ...(ct ? { 'content-type': ct } : {}), ...(token ? { authorization: token } : {}) };
          const env = envelope(await send('POST', r.p, headers, body), `${who} ${r.p} ${name}`);
          const g = gate(r, who);
          if (g) expect([env.code, env.message], `${who} ${r.p} ${name}`).toEqual(g);
        }
      }
    }
  });

  it('hostile query strings: an envelope (or the auth answer)', async () => {
    for (const r of ROUTES) {
      for (const [who, token] of CALLERS()) {
        for (const q of QUERIES) {
          // logout ends the token it is called with: give it one of its own
          const t = r.p === '/api/auth/logout' && token ? await ts.login(...(who === 'user' ? ['probe-user', 'pw-probe-user-123'] : [])) : token;
          const env = envelope(await send(r.m, r.p + q, t ? { authorization: t } : {}), `${who} ${r.m} ${r.p}${q.slice(0, 40)}`);
          const g = gate(r, who);
          if (g) expect([env.code, env.message]).toEqual(g);
        }
      }
    }
  });

  // Found and fixed (minor): protocols/rest/frontend/unsupported.ts still lists fs/add_offline_download,
  // admin/setting/set_aria2|set_qbit and admin/index/* as features treegate lacks; the routes exist
  // now, so a wrong method on them answers 500 `Offline download is not supported by treegate`
  // (or `The search index ...`) instead of 404 `route not found`. (Task undone/done polls answer
  // `[]` for any method on purpose and are left out.)
  it('a wrong method answers 404 `route not found` (after the admin/task identity check), never "not supported"', async () => {
    for (const r of ROUTES.filter((x) => !/\/(undone|done)$/.test(x.p))) {
      for (const [who, token] of CALLERS()) {
        const wrong = envelope(await send('DELETE', r.p, token ? { authorization: token } : {}), `${who} DELETE ${r.p}`);
        const guarded = r.p.startsWith('/api/admin/') || r.p.startsWith('/api/task/');
        const g = guarded ? gate(r, who) : undefined;
        expect([wrong.code, wrong.message], `${who} DELETE ${r.p}`).toEqual(g ?? [404, `route not found: DELETE ${r.p}`]);
      }
    }
  });

  it('odd Authorization headers: 401, never an internal error', async () => {
    for (const auth of ['Bearer x', 'null', 'x'.repeat(8000), 'eyJhbGciOiJub25lIn0.eyJ1c2VybmFtZSI6ImFkbWluIn0.', '\u00ff\u00fe', `${admin}x`, ` ${admin.slice(1)}`]) {
      for (const r of [ROUTES[5]!, ROUTES.find((x) => x.p === '/api/admin/user/list')!, ROUTES.find((x) => x.p === '/api/fs/remove')!]) {
        const env = envelope(await send(r.m, r.p, { authorization: auth, 'content-type': 'application/json' }, r.m === 'POST' ? '{}' : undefined), `${r.p} auth=${auth.slice(0, 20)}`);
        expect(env.code, `${r.p} auth=${auth.slice(0, 20)}`).toBe(401);
      }
    }
  });

  it('the admin records are unchanged by all of it', async () => {
    // set_aria2 / set_qbit save whatever a body holds: see the case below for those four settings.
    const offline = ['aria2_uri', 'aria2_secret', 'qbittorrent_url', 'qbittorrent_seedtime'];
    const strip = (st: Awaited<ReturnType<typeof adminState>>) => ({ ...st, settings: Object.fromEntries(Object.entries(st.settings).filter(([k]) => !offline.includes(k))) });
    expect(strip(await adminState())).toEqual(strip(before));
  });
});

// ---------------------------------------------------------------------------------------------
// Field by field: numeric, boolean and string fields of the admin records, and what they answer.

describe('admin records: wrongly typed or out-of-range fields are refused with 400 and change nothing', () => {
  const NOT_INT_TYPE = [1.5, '1.5', true, [], {}, '1e3', 'abc'];
  const NOT_INT = [...NOT_INT_TYPE, 1e308, -1e308, 2 ** 53];
  const NOT_BOOL = ['yes', 2, {}, [], 'TRUE '];

  it('storage create/update: order, cache_expiration, id, booleans, addition, mount_path', async () => {
    const before = await adminState();
    const cases: Array<[Record<string, unknown>, string]> = [
      ...NOT_INT.flatMap((v) => (['order', 'cache_expiration', 'id'] as const).map((f): [Record<string, unknown>, string] => [{ [f]: v }, `invalid request: ${f} must be an integer`])),
      ...NOT_BOOL.map((v): [Record<string, unknown>, string] => [{ disabled: v }, 'invalid request: disabled must be a boolean']),
      [{ remark: 5 }, 'invalid request: remark must be a string'],
      [{ driver: ['Memory'] }, 'invalid request: driver must be a string'],
      [{ mount_path: '' }, "Key: 'Storage.MountPath' Error:Field validation for 'MountPath' failed on the 'required' tag"],
      [{ mount_path: { a: 1 } }, 'invalid request: mount_path must be a string'],
    ];
    for (const [patch, message] of cases) {
      const label = JSON.stringify(patch);
      expectCode(await api('/api/admin/storage/create', { mount_path: '/probe-typed', driver: 'Memory', ...patch }), 400, message);
      const s = (await api('/api/admin/storage/list')).data as { content: Array<Record<string, unknown>> };
      const mem = s.content.find((x) => x.mount_path === '/probe-mem')!;
      const env = await api('/api/admin/storage/update', { ...mem, ...patch });
      expect([env.code, env.message], label).toEqual([400, message]);
    }
    // addition (a JSON string inside JSON), per driver: refused with a message naming the option
    const additions: Array<[string, unknown, RegExp]> = [
      ['Memory', '[1]', /^addition must be a JSON object$/], ['Memory', 'null', /^addition must be a JSON object$/],
      ['Memory', '{"a":', /^addition is not valid JSON/], ['Local', '{"root_folder_path":["/"]}', /^option root_folder_path must be a string$/],
      ['Local', '{"root_folder_path":"/x","show_hidden":"yes"}', /^option show_hidden must be true or false/],
      ['S3', '{"bucket":"b","endpoint":"http://127.0.0.1:9","access_key_id":"a","secret_access_key":"s","sign_url_expire":"soon"}', /^option sign_url_expire must be a number/],
      ['S3', '{"bucket":"b","endpoint":"e","access_key_id":"a","secret_access_key":"s","list_object_version":"v9"}', /^option list_object_version must be one of v1,v2/],
      ['WebDav', '{"address":"http://127.0.0.1:9","username":"u","password":"p","vendor":"x"}', /^option vendor must be one of sharepoint,other/],
      ['FTP', '{"address":"127.0.0.1:9"}', /^option encoding is required$/], ['SFTP', '{"username":"u"}', /^option address is required$/],
      ['Alias', '{"paths":""}', /^option paths is required$/], ['Alias', '{"paths":"/x","download_concurrency":"many"}', /^option download_concurrency must be a number/],
      ['NoSuchDriver', '{}', /^failed get driver new: no driver named: NoSuchDriver$/],
    ];
    for (const [driver, addition, message] of additions) {
      const env = await api('/api/admin/storage/create', { mount_path: '/probe-add', driver, addition });
      expect(env.code, `${driver} ${addition}`).toBe(500); // AList answers every storage error with 500
      expect(env.message, `${driver} ${addition}`).toMatch(message);
    }
    expect(await adminState()).toEqual(before);
  });

  it('user create/update: permission, role, id, disabled, username, base_path', async () => {
    const before = await adminState();
    const victim = ((await api('/api/admin/user/list')).data as { content: Array<{ id: number; username: string }> }).content.find((u) => u.username === 'probe-user')!;
    const cases: Array<[Record<string, unknown>, number, string]> = [
      ...NOT_INT_TYPE.map((v): [Record<string, unknown>, number, string] => [{ permission: v }, 400, 'invalid request: permission must be an integer']),
      ...[-1, 2 ** 31, 2 ** 53, 1e308, -1e308].map((v): [Record<string, unknown>, number, string] => [{ permission: v }, 400, 'invalid request: permission must be between 0 and 2147483647']),
      ...NOT_BOOL.map((v): [Record<string, unknown>, number, string] => [{ disabled: v }, 400, 'invalid request: disabled must be true or false']),
      [{ username: ['x'] }, 400, 'invalid request: username must be a string'],
      [{ username: '' }, 400, 'invalid request: username is required'],
      [{ base_path: '/a/../..' }, 400, 'invalid request: base_path must not contain .. or backslashes'],
      [{ base_path: 'a\\b' }, 400, 'invalid request: base_path must not contain .. or backslashes'],
      [{ password: 12345678 }, 400, 'invalid request: password must be a string'],
    ];
    for (const [patch, code, message] of cases) {
      const label = JSON.stringify(patch);
      const c = await api('/api/admin/user/create', { username: 'probe-new', password: 'pw', ...patch });
      expect([c.code, c.message], `create ${label}`).toEqual([code, message]);
      const u = await api('/api/admin/user/update', { id: victim.id, username: 'probe-user', ...patch });
      expect([u.code, u.message], `update ${label}`).toEqual([code, message]);
    }
    expectCode(await api('/api/admin/user/create', { username: 'probe-new', role: 2 }), 400, 'admin or guest user can not be created');
    expectCode(await api('/api/admin/user/create', { username: 'probe-new', role: '0' }), 400, 'invalid request: role must be an integer');
    for (const id of [0, -1, 1.5, '3', 2 ** 53, null]) {
      const u = await api('/api/admin/user/update', { id, username: 'probe-user' });
      expect(u.code, `update id ${String(id)}`).toBe(400);
    }
    expectCode(await api('/api/admin/user/update', { id: 999999, username: 'x' }), 500, 'failed get old user: record not found');
    for (const q of ['', 'x', '-1', '1.5', '%00', '99999999999999999999']) {
      expectCode(await api(`/api/admin/user/delete?id=${q}`, {}), 400, 'invalid request: id must be an integer');
    }
    // the user's token survived every refused update (a refused update must not bump pwd_ts)
    expectCode(await api('/api/me', undefined, user), 200, 'success');
    expect(await adminState()).toEqual(before);
  });

  it('meta create/update: path, flags, hide, id', async () => {
    const before = await adminState();
    const meta = ((await api('/api/admin/meta/list')).data as { content: Array<Record<string, unknown>> }).content.find((m) => m.path === '/probe-meta')!;
    const cases: Array<[Record<string, unknown>, number, string | RegExp]> = [
      [{ path: '' }, 400, "Key: 'Meta.Path' Error:Field validation for 'Path' failed on the 'required' tag"],
      [{ path: 5 }, 400, 'invalid request: path must be a string'],
      [{ path: '/a/../b' }, 403, 'access using relative path is not allowed'],
      [{ path: '/a\u0000b' }, 403, 'access using relative path is not allowed'],
      ...NOT_BOOL.map((v): [Record<string, unknown>, number, string] => [{ p_sub: v }, 400, 'invalid request: p_sub must be a boolean']),
      [{ hide: '(unclosed' }, 400, /^\(unclosed is illegal: /],
      [{ hide: ['x'] }, 400, 'invalid request: hide must be a string'],
      [{ id: 1.5 }, 400, 'invalid request: id must be an integer'],
      [{ readme: {} }, 400, 'invalid request: readme must be a string'],
    ];
    for (const [patch, code, message] of cases) {
      const label = JSON.stringify(patch);
      for (const [route, body] of [['create', { path: '/probe-meta-new', ...patch }], ['update', { ...meta, ...patch }]] as const) {
        const env = await api(`/api/admin/meta/${route}`, body);
        expect(env.code, `${route} ${label}`).toBe(code);
        if (typeof message === 'string') expect(env.message, `${route} ${label}`).toBe(message);
        else expect(env.message, `${route} ${label}`).toMatch(message);
      }
    }
    expectCode(await api('/api/admin/meta/update', { ...meta, id: 999999 }), 500, 'failed get old meta: record not found');
    expectCode(await api('/api/admin/meta/get?id=x'), 400, 'strconv.Atoi: parsing "x": invalid syntax');
    expect(await adminState()).toEqual(before);
  });

  it('setting save by type: every refused item leaves every setting as it was (all or nothing)', async () => {
    const before = await adminState();
    const cases: Array<[unknown, string]> = [
      [{}, 'invalid request: body must be a JSON array of setting items'],
      [[null], 'invalid request: item 0 must be an object'],
      [[{ key: '', value: 'x' }], 'invalid request: item 0: key must be a non-empty string'],
      [[{ key: 5, value: 'x' }], 'invalid request: item 0: key must be a non-empty string'],
      [[{ key: 'site_title', value: 5 }], 'invalid request: setting site_title: value must be a string'],
      [[{ key: 'site_title', value: null }], 'invalid request: setting site_title: value must be a string'],
      [[{ key: 'site_title', value: 'renamed' }, { key: 'default_page_size', value: 'abc' }], 'setting default_page_size: not a number'],
      [[{ key: 'default_page_size', value: '0' }], 'setting default_page_size: must be a whole number from 1 to 10000'],
      [[{ key: 'default_page_size', value: '1e3' }], 'setting default_page_size: not a number'],
      [[{ key: 'link_expiration', value: '-1' }], 'setting link_expiration: must be a whole number from 0 to 876000'],
      [[{ key: 'sign_all', value: 'yes' }], 'setting sign_all: must be true or false'],
      [[{ key: 'search_index', value: 'grep' }], 'setting search_index: must be one of database,database_non_full_text,bleve,meilisearch,none'],
      [[{ key: 'filename_char_mapping', value: '{"a":' }], 'setting filename_char_mapping: not valid JSON'],
      [[{ key: 'iframe_previews', value: '[]' }], 'setting iframe_previews: must be a JSON object'],
      [[{ key: 'privacy_regs', value: '(' }], 'setting privacy_regs: invalid regular expression: ('],
      [[{ key: 'token', value: 'short' }], 'setting token: must be at least 16 characters'],
      [[{ key: 'version', value: 'v9' }], 'setting version is read-only'],
    ];
    for (const [body, message] of cases) expectCode(await api('/api/admin/setting/save', body), 400, message);
    expectCode(await api('/api/admin/setting/get?key=no_such_key'), 400, 'record not found');
    expectCode(await api('/api/admin/setting/delete?key=site_title', {}), 500, 'setting [site_title] is not deprecated');
    expectCode(await api('/api/admin/setting/list?group=x'), 400, 'strconv.Atoi: parsing "x": invalid syntax');
    expect(await adminState()).toEqual(before);
  });

  // Found and fixed (minor): a number setting of 400 digits passes the pattern check and is Infinity;
  // settings.number() reads it back as 0 (src/settings/settings.ts validateSetting, the number case).
  it('a number setting too large to be a number (400 digits) is refused', async () => {
    const before = await adminState();
    const env = await api('/api/admin/setting/save', [{ key: 'qbittorrent_seedtime', value: '9'.repeat(400) }]);
    expect(env.code).toBe(400);
    expect(await adminState()).toEqual(before);
  });
});

// ---------------------------------------------------------------------------------------------
// ids near 2^53.

// Found and fixed: storage/meta create take any safe-integer `id` as given; the ids after it count up past
// 2^53 where they are no longer exact, so two records share an id (one storage vanishes from the
// tree) and `get?id=`/`delete?id=` cannot address them. protocols/rest/routes/admin-storage.ts
// (create: `given > 0`), admin-meta.ts (create: `id > 0`), src/store/json-store.ts insert.
describe('a create with a huge id never leaves records that collide or cannot be addressed', () => {
  for (const kind of ['storage', 'meta'] as const) {
    it(`${kind}`, async () => {
      const body = (n: number, id?: number) =>
        kind === 'storage' ? { mount_path: `/probe-id-${n}`, driver: 'Memory', ...(id ? { id } : {}) } : { path: `/probe-id-${n}`, ...(id ? { id } : {}) };
      const first = await api(`/api/admin/${kind}/create`, body(0, 2 ** 53 - 1));
      expect([200, 400]).toContain(first.code);
      await api(`/api/admin/${kind}/create`, body(1));
      await api(`/api/admin/${kind}/create`, body(2));
      const rows = ((await api(`/api/admin/${kind}/list`)).data as { content: Array<{ id: number; mount_path?: string; path?: string }> }).content
        .filter((r) => (r.mount_path ?? r.path ?? '').startsWith('/probe-id-'));
      expect(new Set(rows.map((r) => r.id)).size).toBe(rows.length);
      for (const r of rows) {
        const got = await api(`/api/admin/${kind}/get?id=${r.id}`);
        expect(got.code, `get ${r.id}`).toBe(200);
        expectCode(await api(`/api/admin/${kind}/delete?id=${r.id}`, {}), 200, 'success');
      }
    });
  }
});

// ---------------------------------------------------------------------------------------------
// File system: destructive endpoints never read a missing directory as the root.

// Found and fixed: protocols/rest/routes/fs-write.ts reads src_dir/dst_dir/dir with `normalize(str(f, ...))`:
// missing, null or '' become `/`. `{"dst_dir":"/x"}` on recursive_move flattens every file of every
// storage into /x; `{}` on remove_empty_directory prunes every empty folder of the tree; move, copy,
// remove, batch_rename and regex_rename act on the root's entries. An empty src_name_regex matches
// every name. The spec marks all of these fields required: expected 400 and nothing touched.
describe('a missing, null or empty folder field of a destructive call is a 400, never the root', () => {
  const CASES: Array<[string, Record<string, unknown>, string]> = [
    ['/api/fs/recursive_move', { dst_dir: '/bi/dst' }, 'src_dir'],
    ['/api/fs/recursive_move', { src_dir: null, dst_dir: '/bi/dst' }, 'src_dir'],
    ['/api/fs/recursive_move', { src_dir: '', dst_dir: '/bi/dst' }, 'src_dir'],
    ['/api/fs/recursive_move', { src_dir: '/bi/src' }, 'dst_dir'],
    ['/api/fs/remove_empty_directory', {}, 'src_dir'],
    ['/api/fs/remove_empty_directory', { src_dir: '' }, 'src_dir'],
    ['/api/fs/remove', { names: ['canary'] }, 'dir'],
    ['/api/fs/remove', { dir: null, names: ['canary'] }, 'dir'],
    ['/api/fs/move', { dst_dir: '/bi/dst', names: ['canary'] }, 'src_dir'],
    ['/api/fs/move', { src_dir: '/bi/src', names: ['x'] }, 'dst_dir'],
    ['/api/fs/copy', { src_dir: '', dst_dir: '/bi/dst', names: ['canary'] }, 'src_dir'],
    ['/api/fs/batch_rename', { rename_objects: [{ src_name: 'canary', new_name: 'renamed' }] }, 'src_dir'],
    ['/api/fs/regex_rename', { src_name_regex: '^canary$', new_name_regex: 'renamed' }, 'src_dir'],
    ['/api/fs/regex_rename', { src_dir: '/bi/src', new_name_regex: 'renamed' }, 'src_name_regex'],
  ];
  it.each(CASES)('%s %j', async (route, body, field) => {
    await seed(ts, admin, { '/canary/keep.txt': 'k', '/canary/d/e.txt': 'e', '/bi/src/x': 'x', '/bi/dst/.keep': '' });
    mkdirSync(disk('canary/empty'), { recursive: true });
    const before = tree('');
    expectCode(await api(route, body), 400, `invalid request: ${field} is required`);
    expect(tree('')).toEqual(before);
  });
});

describe('file system: hostile names, lists and regexes', () => {
  it('names not an array, empty, or escaping: refused, nothing removed or moved', async () => {
    await seed(ts, admin, { '/nm/a': 'a', '/nm/sub/b': 'b' });
    const before = tree('nm');
    const cases: Array<[string, Record<string, unknown>, number, string]> = [
      ['/api/fs/remove', { dir: '/nm', names: 'a' }, 400, 'invalid request: names must be an array of strings'],
      ['/api/fs/remove', { dir: '/nm', names: { 0: 'a' } }, 400, 'invalid request: names must be an array of strings'],
      ['/api/fs/remove', { dir: '/nm', names: ['a', 1] }, 400, 'invalid request: names must be an array of strings'],
      ['/api/fs/remove', { dir: '/nm', names: [] }, 400, 'Empty file names'],
      ['/api/fs/remove', { dir: '/nm', names: null }, 400, 'Empty file names'],
      ['/api/fs/remove', { dir: '/nm/sub', names: ['..'] }, 403, 'access using relative path is not allowed'],
      ['/api/fs/remove', { dir: '/nm', names: ['sub/b'] }, 403, 'access using relative path is not allowed'],
      ['/api/fs/remove', { dir: '/nm', names: ['a\\..'] }, 403, 'access using relative path is not allowed'],
      ['/api/fs/remove', { dir: '/nm/../nm', names: ['a'] }, 403, 'access using relative path is not allowed'],
      ['/api/fs/move', { src_dir: '/nm', dst_dir: '/nm/sub', names: ['a\u0000'] }, 403, 'access using relative path is not allowed'],
      ['/api/fs/copy', { src_dir: '/nm', dst_dir: '/nm/sub', names: [''] }, 403, 'access using relative path is not allowed'],
      ['/api/fs/rename', { path: '/nm/a', name: '../a' }, 403, 'access using relative path is not allowed'],
      ['/api/fs/rename', { path: '/nm/a', name: ['b'] }, 400, 'invalid request: name must be a string'],
      ['/api/fs/batch_rename', { src_dir: '/nm', rename_objects: { src_name: 'a', new_name: 'b' } }, 400, 'invalid request: rename_objects must be an array of objects'],
      ['/api/fs/batch_rename', { src_dir: '/nm', rename_objects: [{ src_name: 'a', new_name: '.' }] }, 403, 'access using relative path is not allowed'],
      ['/api/fs/regex_rename', { src_dir: '/nm', src_name_regex: '(?=a)', new_name_regex: 'x' }, 500, 'error parsing regexp: invalid or unsupported Perl syntax: `(?=`'],
      ['/api/fs/regex_rename', { src_dir: '/nm', src_name_regex: ['a'], new_name_regex: 'x' }, 400, 'invalid request: src_name_regex must be a string'],
      ['/api/fs/regex_rename', { src_dir: '/nm', src_name_regex: '^a$', new_name_regex: '..' }, 403, 'access using relative path is not allowed'],
      ['/api/fs/mkdir', { path: '/nm/x/../../..' }, 403, 'access using relative path is not allowed'],
      ['/api/fs/list', { path: '/nm', page: '1.5' }, 400, 'invalid request: page must be an integer'],
      ['/api/fs/list', { path: '/nm', per_page: 1e308 }, 400, 'invalid request: per_page must be an integer'],
    ];
    for (const [route, body, code, message] of cases) {
      const env = await api(route, body);
      expect([env.code, env.message], `${route} ${JSON.stringify(body)}`).toEqual([code, message]);
    }
    expect(tree('nm')).toEqual(before);
  });

  it('a catastrophic regex in regex_rename runs on RE2 (linear): it answers and renames nothing it should not', async () => {
    await seed(ts, admin, { [`/rx/${'a'.repeat(64)}!`]: 'x', '/rx/keep': 'k' });
    ok(await api('/api/fs/regex_rename', { src_dir: '/rx', src_name_regex: '^(a+)+$', new_name_regex: 'z' }));
    expect(tree('rx')).toEqual([`${'a'.repeat(64)}!`, 'keep']);
  });

  it('paging: page=-1, per_page=1e9, per_page=-1 are AList paging, not errors', async () => {
    for (const [page, per_page] of [[-1, 1e9], [1e9, 1], [0, -1]]) {
      const env = await api('/api/fs/list', { path: '/', page, per_page });
      expectCode(env, 200, 'success');
    }
  });
});

// Found and fixed: meta hide lines compile as backtracking JavaScript RegExps (src/vfs/meta.ts hideRegex):
// `^(a+)+$` is accepted, and listing a folder holding a 32-character `aaa…a!` name froze the whole
// server (event loop) for 144 s as a user without see-hidden (measured; 40 characters would take
// hours). That cannot be asserted without timing, so this checks the cause on a harmless name:
// a hide line RE2 can run must not be matched on the backtracking engine (refusing it at save is
// fine too).
describe('a hide line with nested quantifiers cannot freeze listings', () => {
  it('is refused at save, or matched without the backtracking RegExp engine', async () => {
    await seed(ts, admin, { '/rd/aaaa!': 'x', '/rd/plain': 'p' });
    const created = await api('/api/admin/meta/create', { path: '/rd', hide: '^(a+)+$' });
    if (created.code === 400) return;
    ok(created);
    const spy = vi.spyOn(RegExp.prototype, 'test');
    try {
      const env = await api('/api/fs/list', { path: '/rd' }, await makeUser(ts, admin, 'rd-user', 0));
      ok(env);
      const ran = spy.mock.contexts.filter((re) => (re as RegExp).source === '^(a+)+$').length;
      expect(ran, 'hide line ran on the backtracking engine').toBe(0);
    } finally {
      spy.mockRestore();
    }
  });
});

// Found and fixed: creating a chain of N missing folders (an upload's File-Path, fs/mkdir) made ~N²/2
// synchronous realpath calls on Local (drivers/local/host-path.ts walk probes every missing level,
// and src/vfs/tree.ts ensureDir looks every level up): a 2,000-level File-Path (4 KB) kept the
// server busy for minutes with the event loop blocked for seconds at a time; on Memory, a 16,000-
// level mkdir body blocked it for 17 s. Counted, not timed, like test/scale-probe-meta-depth.
describe('a very deep path costs work linear in its depth', () => {
  it('an upload 200 folders deep makes fewer than 20 realpath calls per level', async () => {
    const depth = 200;
    const native = fs.realpathSync.native;
    let calls = 0;
    const counting = ((p: fs.PathLike, o?: fs.EncodingOption) => {
      calls++;
      return native(p, o);
    }) as typeof fs.realpathSync.native;
    const realpath = fs.realpathSync as unknown as { native: typeof native };
    realpath.native = counting;
    try {
      const res = await fetch(`${ts.url}/api/fs/put`, {
        method: 'PUT', body: 'x', headers: { authorization: admin, 'file-path': encodeURIComponent(`/deep/${'d/'.repeat(depth)}f`) },
      });
      envelope({ status: res.status, text: await res.text() }, 'deep put');
    } finally {
      realpath.native = native;
    }
    expect(calls).toBeLessThan(20 * depth);
  });
});

// Found and fixed: protocols/rest/routes/fs-upload.ts header() reads req.headers, where Node joins a
// repeated header into `a, b`: two `Overwrite: false` read as "overwrite" (the file is replaced),
// two File-Path headers make one path through a folder named `a.txt, `. Go (AList) reads the first.
describe('repeated upload headers count with their first value, as AList reads them', () => {
  const rawPut = (headers: string[], body: string) =>
    new Promise<string>((resolve, reject) => {
      // Written by hand: fetch and node:http join or refuse repeated headers. No half-close (Node's
      // server drops a request whose client sent FIN before the answer); `Connection: close` ends it.
      const s = connect(Number(new URL(ts.url).port), '127.0.0.1', () => {
        s.write(`PUT /api/fs/put HTTP/1.1\r\nHost: x\r\nAuthorization: ${admin}\r\n${headers.join('\r\n')}\r\nContent-Length: ${body.length}\r\nConnection: close\r\n\r\n${body}`);
      });
      let out = '';
      s.on('data', (d: Buffer) => (out += d.toString()));
      s.on('close', () => resolve(out.slice(out.indexOf('\r\n\r\n') + 4)));
      s.on('error', reject);
    });

  it('Overwrite: false twice keeps the existing file', async () => {
    await seed(ts, admin, { '/dup/keep.txt': 'original' });
    const env = JSON.parse(await rawPut(['File-Path: /dup/keep.txt', 'Overwrite: false', 'Overwrite: false'], 'REPLACED')) as Env;
    expectCode(env, 403, 'file exists');
    expect(readFileSync(disk('dup/keep.txt'), 'utf8')).toBe('original');
  });

  it('two File-Path headers never create a file under a folder named after both', async () => {
    JSON.parse(await rawPut(['File-Path: /dup/a.txt', 'File-Path: /dup/b.txt'], 'x'));
    expect(tree('dup').filter((n) => n.includes(','))).toEqual([]);
  });
});

describe('uploads and downloads: hostile paths and headers', () => {
  it('File-Path traversal, bad escapes and odd headers: refused with AList codes, nothing written outside', async () => {
    const escaped = () => [DATA, dirname(DATA), disk()].flatMap((d) => readdirSync(d).filter((n) => n.includes('escape')));
    const cases: Array<[string, Record<string, string>, number, string]> = [
      ['', {}, 400, 'File-Path header is required'],
      ['..', {}, 403, 'access using relative path is not allowed'],
      ['/probe-u/%2e%2e/%2e%2e/escape', {}, 403, 'access using relative path is not allowed'],
      ['%2F..%2F..%2Fescape', {}, 403, 'access using relative path is not allowed'],
      ['/up/a%00b', {}, 403, 'access using relative path is not allowed'],
      ['/up/a%5C..%5Cb', {}, 403, 'access using relative path is not allowed'],
      ['/up/%zz', {}, 400, 'invalid URL escape "%zz"'],
      ['/up/%', {}, 400, 'invalid URL escape "%"'],
      ['/up/%c0%ae%c0%ae', {}, 400, 'invalid URL escape: not UTF-8'],
      ['/up/%ed%a0%80', {}, 400, 'invalid URL escape: not UTF-8'],
      [`/up/${'n'.repeat(300)}`, {}, 400, 'file name too long'],
    ];
    for (const [path, extra, code, message] of cases) {
      const res = await fetch(`${ts.url}/api/fs/put`, { method: 'PUT', body: 'data', headers: { authorization: admin, ...(path ? { 'file-path': path } : {}), ...extra } });
      const env = envelope({ status: res.status, text: await res.text() }, `put ${path}`);
      expect([env.code, env.message], `put ${path}`).toEqual([code, message]);
    }
    for (const [name, ct, body, message] of [
      ['no file part', 'multipart/form-data; boundary=BB', '--BB\r\nContent-Disposition: form-data; name="other"\r\n\r\nv\r\n--BB--\r\n', 'http: no such file'],
      ['no boundary', 'multipart/form-data', '--BB--', 'invalid multipart body: Multipart: Boundary not found'],
      ['not multipart', 'application/json', '{}', 'invalid multipart body: Unsupported content type: application/json'],
      ['truncated', 'multipart/form-data; boundary=BB', '--BB\r\nContent-Disposition: form-data; name="file"; filename="f"\r\n\r\ndata', 'invalid multipart body: Unexpected end of form'],
    ]) {
      const res = await fetch(`${ts.url}/api/fs/form`, { method: 'PUT', body, headers: { authorization: admin, 'file-path': '/up/form.txt', 'content-type': ct! } });
      const env = envelope({ status: res.status, text: await res.text() }, `form ${name}`);
      expectCode(env, 400, message);
    }
    for (const token of [user, undefined]) {
      const res = await fetch(`${ts.url}/api/fs/put`, { method: 'PUT', body: 'x', headers: { ...(token ? { authorization: token } : {}), 'file-path': '/../../escape.txt' } });
      expect((envelope({ status: res.status, text: await res.text() }, 'put escape')).code).toBe(token ? 403 : 401);
    }
    expect(escaped()).toEqual([]);
  });

  it('/d and /p: traversal, bad escapes and bad signs answer an envelope', async () => {
    await seed(ts, admin, { '/dl/a.txt': 'hello' });
    const cases: Array<[string, number, string]> = [
      ['/d/dl/%00', 403, 'access using relative path is not allowed'],
      ['/d/dl/..%2F..%2Fstore.json', 403, 'access using relative path is not allowed'],
      ['/p/dl/%2e%2e/%2e%2e/store.json', 403, 'access using relative path is not allowed'],
      ['/d/%5C', 403, 'access using relative path is not allowed'],
      ['/d/dl/a.txt?sign=', 401, 'expire missing'],
      ['/d/dl/a.txt?sign=x:1e999', 401, 'expire invalid'],
      ['/d/dl/a.txt?sign=x:99999999999999999999', 401, 'expire invalid'],
      ['/d/dl/a.txt?sign=x:-1', 401, 'sign expired'],
      ['/d/dl/a.txt?sign=x:0', 401, 'sign invalid'],
      ['/p/dl/a.txt?sign=x:0&sign=y', 401, 'sign invalid'],
      ['/d/no/such/file', 401, 'expire missing'],
    ];
    for (const [path, code, message] of cases) {
      const env = envelope(await send('GET', path), path);
      expect([env.code, env.message], path).toEqual([code, message]);
    }
    for (const path of ['/d/dl/%', '/d/dl/%c0%ae', '/p/dl/%ed%a0%80']) {
      expect(envelope(await send('GET', path), path).code, path).toBe(400);
    }
  });
});

// Found and fixed (minor): filename_char_mapping pairs are applied one after another (protocols/rest/entry.ts
// nameMapper), each re-expanding what the previous wrote: the save is accepted and every listing
// of a folder with an `a` in a name then answers 500 `internal error` (RangeError: Invalid string
// length). Either refuse it at save or keep listings working.
describe('a filename_char_mapping value can never break listings', () => {
  it('refused at save, or listings still answer', async () => {
    await seed(ts, admin, { '/cm/aaaa.txt': 'x' });
    const mapping = JSON.stringify({ a: 'a'.repeat(1000), aa: 'a'.repeat(1000), aaa: 'a'.repeat(1000), aaaa: 'a'.repeat(1000) });
    const saved = await api('/api/admin/setting/save', [{ key: 'filename_char_mapping', value: mapping }]);
    try {
      if (saved.code !== 400) expectCode(await api('/api/fs/list', { path: '/cm' }), 200, 'success');
    } finally {
      ok(await api('/api/admin/setting/save', [{ key: 'filename_char_mapping', value: '{"/": "|"}' }]));
    }
  });
});

// Found and fixed (minor): set_aria2 / set_qbit save the body's fields before anything is checked
// (src/tasks/offline/offline.ts setAria2/setQbit, called from protocols/rest/routes/offline.ts):
// a body without `uri` / `url` erases the configured address (and aria2's secret).
describe('set_aria2 / set_qbit without the address are refused and save nothing', () => {
  it.each([['/api/admin/setting/set_aria2', {}], ['/api/admin/setting/set_aria2', { secret: 's' }], ['/api/admin/setting/set_qbit', {}], ['/api/admin/setting/set_qbit', { seedtime: '5' }]])(
    '%s %j', async (route, body) => {
      ok(await api('/api/admin/setting/save', [{ key: 'aria2_uri', value: 'http://127.0.0.1:9/jsonrpc' }, { key: 'aria2_secret', value: 'kept-secret' }, { key: 'qbittorrent_url', value: 'http://127.0.0.1:9/' }]));
      const before = await adminState();
      const env = await api(route, body);
      expect(env.code).toBe(400);
      expect(await adminState()).toEqual(before);
    },
  );
});

describe('odd encodings in names: lone surrogates, invalid UTF-8, control characters', () => {
  it('each answers an envelope; nothing lands outside the folder asked for', async () => {
    ok(await api('/api/fs/mkdir', { path: '/enc' }));
    const rootBefore = readdirSync(disk()).sort();
    const bodies: Array<[string, string | Buffer, number, string]> = [
      ['mkdir lone surrogate', '{"path":"/enc/a\\ud800b"}', 400, 'file name is not valid Unicode'],
      ['mkdir control chars', '{"path":"/enc/tab\\there\\nnl\\u0001"}', 200, 'success'],
      // invalid UTF-8 is read as U+FFFD, so `\xc0\xae` (an overlong `.`) is never a dot
      ['mkdir invalid UTF-8', Buffer.concat([Buffer.from('{"path":"/enc/'), Buffer.from([0xc3, 0x28, 0xff]), Buffer.from('"}')]), 200, 'success'],
      ['mkdir overlong dot', Buffer.concat([Buffer.from('{"path":"/enc/'), Buffer.from([0xc0, 0xae, 0xc0, 0xae]), Buffer.from('/x"}')]), 200, 'success'],
    ];
    for (const [name, body, code, message] of bodies) {
      const env = envelope(await send('POST', '/api/fs/mkdir', json(admin), body), name);
      expect([env.code, env.message], name).toEqual([code, message]);
    }
    expect(readdirSync(disk()).sort()).toEqual(rootBefore);
    expect(tree('enc').every((n) => !n.startsWith('..'))).toBe(true);
    const u = await api('/api/admin/user/create', { username: 'odd\ud800name', password: 'pw' });
    expect([200, 400]).toContain(u.code);
  });
});

// ---------------------------------------------------------------------------------------------
// Tasks with missing or odd ids.

describe('task endpoints: missing or odd tid, bodies that are not id lists', () => {
  it('answers 404 `task not found` / 400 `invalid request format`, for every kind and both trees', async () => {
    for (const pre of ['/api/task/upload', '/api/task/copy', '/api/task/offline_download', '/api/admin/task/offline_download_transfer', '/api/admin/task/decompress']) {
      for (const q of ['', '?tid=', '?tid=%00', '?tid=__proto__', '?tid=constructor', `?tid=${'x'.repeat(3000)}`, '?tid[]=a', '?tid=a&tid=b']) {
        for (const a of ['info', 'cancel', 'delete', 'retry']) expectCode(await api(`${pre}/${a}${q}`, {}), 404, 'task not found');
      }
      for (const body of [{}, 'x', [1], [null], [['a']], null]) {
        for (const a of ['cancel_some', 'delete_some', 'retry_some']) expectCode(await api(`${pre}/${a}`, body), 400, 'invalid request format');
      }
      const some = await api(`${pre}/delete_some`, ['__proto__', 'constructor', 'nope']);
      expectCode(some, 200, 'success');
      expect(Object.entries(some.data as object).sort()).toEqual([['__proto__', 'task not found'], ['constructor', 'task not found'], ['nope', 'task not found']]);
      expectCode(await api(`${pre}/undone?tid=%00`), 200, 'success');
    }
  });
});

// ---------------------------------------------------------------------------------------------
// After everything: the server starts again on the same DATA and its records are the same.

describe('state survives: restart on the same DATA dir', () => {
  it('starts, logs in, and lists users, storages, metas, settings and the tree as before', async () => {
    const before = await adminState();
    await restart();
    const after = await adminState();
    // Memory storages start empty but are still there; the records are what matter.
    expect(after).toEqual(before);
    expectCode(await api('/api/fs/list', { path: '/' }), 200, 'success');
    expectCode(await api('/api/public/settings'), 200, 'success');
    expectCode(await api('/api/me', undefined, user), 200, 'success');
    const index = await fetch(`${ts.url}/`);
    expect(index.status).toBe(200);
  });
});
