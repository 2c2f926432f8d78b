/**
 * An audit of ../shared/docs/contract.md, clause by clause, for the clauses no other test checked
 * (contract.test.ts, startup.test.ts, ops-probe-*.test.ts, install.test.ts, systemd.test.ts and
 * src/config.test.ts cover the rest): the whole configuration table (defaults, env over file over
 * default for every key), TREEGATE_DATA and the default ./data, the first start's records and its
 * password printed once, the one ready line naming both listeners, webdav.enable, the token
 * lifetime default, `version` = the version setting, `admin set` on a stopped server, a signal
 * repeated during a graceful stop (Ctrl-C under `npm start` sends two), and the error envelopes
 * of a sample of API endpoints for bad input (api-spec.md, alist-compat.md §1).
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdir, mkdtemp, readFile, rm, stat, writeFile } from 'node:fs/promises';
import { request } from 'node:http';
import { connect } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { DEFAULT_CONFIG, loadConfig } from '../src/config.js';
import { VERSION } from '../src/version.js';
import { ADMIN_PASSWORD, startTestServer, type TestServer } from './harness.js';
import { CLI, cliEnv, freePort, runCli, startServerProcess, type ServerProcess } from './clients/process.js';

const dirs: string[] = [];
async function temp(): Promise<string> {
  const d = await mkdtemp(join(tmpdir(), 'treegate-audit-'));
  dirs.push(d);
  return d;
}
const procs: ChildProcess[] = [];
afterEach(() => {
  for (const c of procs.splice(0)) if (c.exitCode === null && c.signalCode === null) c.kill('SIGKILL');
});
afterAll(async () => {
  for (const d of dirs.splice(0)) await rm(d, { recursive: true, force: true });
});

/** The JWT's claims (no verification: only the lifetime is looked at). */
function claims(token: string): { iat: number; exp: number } {
  return JSON.parse(Buffer.from(token.split('.')[1]!, 'base64url').toString('utf8')) as { iat: number; exp: number };
}

/** Wait (bounded) for `cond`; the bound only turns a hang into a failure with context. */
async function until(cond: () => boolean | Promise<boolean>, what: () => string, ms = 20_000): Promise<void> {
  const end = Date.now() + ms;
  while (!(await cond())) {
    if (Date.now() > end) throw new Error(`not reached in time: ${what()}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

describe('contract: configuration table', () => {
  it("the built-in defaults are the contract's, and a first start writes them to DATA/config.json", async () => {
    const data = join(await temp(), 'data');
    const cfg = await loadConfig({ data }, {});
    expect({
      address: cfg.http.address, port: cfg.http.port, sftp: cfg.sftp.enable, sftpPort: cfg.sftp.port, webdav: cfg.webdav.enable,
      hours: cfg.token_expires_in, database: cfg.database, level: cfg.log.level, configFile: cfg.configFile,
    }).toEqual({
      address: '0.0.0.0', port: 5244, sftp: true, sftpPort: 5222, webdav: true,
      hours: 48, database: '', level: 'info', configFile: join(data, 'config.json'),
    });
    // jwt_secret: random, generated on first start and saved.
    expect(cfg.jwt_secret).toMatch(/^.{16,}$/);
    const written = JSON.parse(await readFile(join(data, 'config.json'), 'utf8')) as typeof DEFAULT_CONFIG;
    expect(written).toEqual({ ...DEFAULT_CONFIG, jwt_secret: cfg.jwt_secret });
    const again = await loadConfig({ data }, {});
    expect(again.jwt_secret).toBe(cfg.jwt_secret);
    const other = await loadConfig({ data: join(await temp(), 'data') }, {});
    expect(other.jwt_secret).not.toBe(cfg.jwt_secret);
  });

  it('for every key of the table, the environment beats the config file and the config file beats the default', async () => {
    const root = await temp();
    const file = join(root, 'config.json');
    await writeFile(file, JSON.stringify({
      http: { address: '127.0.0.2', port: 7001 }, sftp: { enable: false, port: 7002 }, webdav: { enable: false },
      token_expires_in: 5, jwt_secret: 'f'.repeat(20), log: { level: 'warn' },
    }));
    const pick = (c: Awaited<ReturnType<typeof loadConfig>>) => ({
      address: c.http.address, port: c.http.port, sftp: c.sftp.enable, sftpPort: c.sftp.port, webdav: c.webdav.enable,
      hours: c.token_expires_in, secret: c.jwt_secret, level: c.log.level,
    });
    const fromFile = await loadConfig({ data: join(root, 'data'), config: file }, {});
    expect(pick(fromFile)).toEqual({ address: '127.0.0.2', port: 7001, sftp: false, sftpPort: 7002, webdav: false, hours: 5, secret: 'f'.repeat(20), level: 'warn' });
    const fromEnv = await loadConfig({ data: join(root, 'data'), config: file }, {
      TREEGATE_HTTP_ADDRESS: '127.0.0.3', TREEGATE_HTTP_PORT: '7101', TREEGATE_SFTP_ENABLE: 'true', TREEGATE_SFTP_PORT: '7102',
      TREEGATE_WEBDAV_ENABLE: 'true', TREEGATE_TOKEN_EXPIRES_IN: '7', TREEGATE_JWT_SECRET: 'e'.repeat(20), TREEGATE_LOG_LEVEL: 'error',
      TREEGATE_DATABASE: '', // empty is unset: the embedded store
    });
    expect(pick(fromEnv)).toEqual({ address: '127.0.0.3', port: 7101, sftp: true, sftpPort: 7102, webdav: true, hours: 7, secret: 'e'.repeat(20), level: 'error' });
    expect(fromEnv.database).toBe('');
  });

  it('TREEGATE_DATA alone selects the data dir, and its config.json is the one read', async () => {
    const data = join(await temp(), 'from-env');
    await mkdir(data);
    await writeFile(join(data, 'config.json'), JSON.stringify({ http: { port: 7201 }, jwt_secret: 'j'.repeat(20) }));
    const cfg = await loadConfig({}, { TREEGATE_DATA: data });
    expect(cfg.dataDir).toBe(data);
    expect(cfg.configFile).toBe(join(data, 'config.json'));
    expect(cfg.http.port).toBe(7201);
  });
});

describe('contract: the two commands and the bin', () => {
  it('`npm start` builds first and runs `treegate server`; the bin is the built CLI; Node >= 20', async () => {
    const pkg = JSON.parse(await readFile(new URL('../package.json', import.meta.url), 'utf8')) as {
      bin: Record<string, string>; engines: { node: string }; scripts: Record<string, string>;
    };
    expect(pkg.scripts.prestart).toBe('npm run build');
    expect(pkg.scripts.build).toMatch(/^tsc -p tsconfig\.json\b/);
    expect(pkg.scripts.start).toMatch(/\bnode dist\/src\/cli\.js server$/);
    expect(pkg.bin).toEqual({ treegate: 'dist/src/cli.js' });
    expect(join(import.meta.dirname, '..', pkg.bin.treegate!)).toBe(CLI);
    expect(pkg.engines.node).toBe('>=20');
    expect(pkg.scripts.test).toBe('vitest run');
  });

  it('`treegate server` with neither --data nor TREEGATE_DATA serves ./data of its working directory', async () => {
    const cwd = await temp();
    const child = spawn(process.execPath, [CLI, 'server'], { cwd, env: cliEnv({ TREEGATE_ADMIN_PASSWORD: 'audit-Password1' }), stdio: ['ignore', 'pipe', 'pipe'] });
    procs.push(child);
    let out = '';
    child.stdout!.on('data', (b: Buffer) => (out += b.toString()));
    child.stderr!.on('data', (b: Buffer) => (out += b.toString()));
    const exited = new Promise<number | null>((res) => child.once('exit', (code) => res(code)));
    await until(() => out.includes('treegate ready') || child.exitCode !== null, () => out);
    expect(out).toContain('treegate ready');
    expect((await stat(join(cwd, 'data', 'store.json'))).isFile()).toBe(true);
    expect((await stat(join(cwd, 'data', 'config.json'))).isFile()).toBe(true);
    child.kill('SIGTERM');
    expect(await exited).toBe(0);
  });
});

describe('contract: first start, ready line, CLI on the same data dir', () => {
  let ts: TestServer;
  let dataDir: string;
  let sftpPort: number;
  let password: string;

  beforeAll(async () => {
    dataDir = join(await temp(), 'data');
    sftpPort = await freePort();
    // No TREEGATE_ADMIN_PASSWORD: the random one is printed.
    ts = await startTestServer({ dataDir, env: { TREEGATE_ADMIN_PASSWORD: '', TREEGATE_SFTP_PORT: String(sftpPort) } });
    const line = ts.logs.find((l) => l.includes('initial password: '));
    expect(line, ts.logs.join('\n')).toBeDefined();
    password = /initial password: (\S+)/.exec(line!)![1]!;
  });
  afterAll(async () => {
    await ts?.close();
  });

  it('creates admin (role 2, base_path /), a disabled guest (role 1), and a Local storage at / on DATA/storage that serves files', async () => {
    const admin = await ts.login('admin', password);
    const me = await ts.api<{ username: string; role: number; base_path: string; disabled: boolean }>('/api/me', { token: admin });
    expect(me.data).toMatchObject({ username: 'admin', role: 2, base_path: '/', disabled: false });
    const users = await ts.api<{ content: Array<{ username: string; role: number; disabled: boolean }> }>('/api/admin/user/list', { token: admin });
    expect(users.data!.content.find((u) => u.username === 'guest')).toMatchObject({ role: 1, disabled: true });
    const storages = await ts.api<{ content: Array<{ mount_path: string; driver: string; addition: string; status: string }> }>('/api/admin/storage/list', { token: admin });
    expect(storages.data!.content).toHaveLength(1);
    expect(storages.data!.content[0]).toMatchObject({ mount_path: '/', driver: 'Local', status: 'work' });
    expect(JSON.parse(storages.data!.content[0]!.addition)).toMatchObject({ root_folder_path: join(dataDir, 'storage') });
    await writeFile(join(dataDir, 'storage', 'hello.txt'), 'hi');
    const list = await ts.api<{ content: Array<{ name: string }> }>('/api/fs/list', { token: admin, body: { path: '/', refresh: true } });
    expect(list.data!.content.map((e) => e.name)).toContain('hello.txt');
  });

  it('says ready in one log line naming the HTTP and SFTP addresses; SFTP listens on TREEGATE_SFTP_PORT', async () => {
    const ready = ts.logs.filter((l) => l.includes('treegate ready'));
    expect(ready).toHaveLength(1);
    expect(ts.running.sftp?.port).toBe(sftpPort);
    expect((JSON.parse(ready[0]!) as { msg: string }).msg).toBe(`treegate ready: http://127.0.0.1:${ts.running.http.port} sftp://127.0.0.1:${sftpPort}`);
    const ssh = await new Promise<string>((res, rej) => {
      const s = connect(sftpPort, '127.0.0.1');
      s.once('data', (b) => (res(b.toString()), s.destroy()));
      s.once('error', rej);
    });
    expect(ssh).toMatch(/^SSH-2\.0-/);
  });

  it('WebDAV is on by default under /dav; a token lives token_expires_in (48) hours by default', async () => {
    const basic = 'Basic ' + Buffer.from(`admin:${password}`).toString('base64');
    const r = await fetch(`${ts.url}/dav/`, { method: 'PROPFIND', headers: { authorization: basic, depth: '0' } });
    expect(r.status).toBe(207);
    const c = claims(await ts.login('admin', password));
    expect(c.exp - c.iat).toBe(48 * 3600);
  });

  it('`treegate version` prints the same string as the version setting', async () => {
    const v = await runCli(['version'], cliEnv());
    expect(v.code).toBe(0);
    const settings = await ts.api<{ version: string }>('/api/public/settings');
    expect(v.stdout.trim()).toBe(settings.data!.version);
    expect(v.stdout.trim()).toBe(VERSION);
  });

  it('the random password is printed once: a restart prints none and keeps it; `admin set` works while stopped', async () => {
    await ts.close();
    const set = await runCli(['admin', 'set', 'offline-Password2', '--data', dataDir], cliEnv());
    expect(set.code, set.stderr).toBe(0);
    expect(set.stdout).not.toContain('offline-Password2');
    ts = await startTestServer({ dataDir, env: { TREEGATE_ADMIN_PASSWORD: '' } });
    expect(ts.logs.filter((l) => /created user admin|initial password/.test(l))).toEqual([]);
    const bad = await ts.api('/api/auth/login', { body: { username: 'admin', password } });
    expect(bad).toMatchObject({ code: 400, message: 'password is incorrect' });
    await ts.login('admin', 'offline-Password2');
    const show = await runCli(['admin', 'show', '--data', dataDir], cliEnv());
    expect(show.stdout).toBe('username: admin\npassword set: yes\n');
  });
});

describe('contract: webdav.enable', () => {
  it('TREEGATE_WEBDAV_ENABLE=false serves no /dav, and the ready line says webdav off', async () => {
    const ts = await startTestServer({ env: { TREEGATE_WEBDAV_ENABLE: 'false', TREEGATE_SFTP_ENABLE: 'false' } });
    try {
      const basic = 'Basic ' + Buffer.from(`admin:${ADMIN_PASSWORD}`).toString('base64');
      const r = await fetch(`${ts.url}/dav/`, { method: 'PROPFIND', headers: { authorization: basic, depth: '0' } });
      expect(r.status).toBe(404);
      const ready = ts.logs.filter((l) => l.includes('treegate ready'));
      expect(ready).toHaveLength(1);
      expect(JSON.parse(ready[0]!)).toMatchObject({ webdav: 'off', sftp: 'off', msg: `treegate ready: http://127.0.0.1:${ts.running.http.port}` });
      expect(await (await fetch(`${ts.url}/ping`)).text()).toBe('pong'); // the REST side is unaffected
    } finally {
      await ts.close();
    }
  });
});

describe('contract: a signal repeated during the graceful stop', () => {
  // Ctrl-C under `npm start` reaches the server twice (the terminal signals the process group and
  // npm forwards its own): the second one used to kill it at once, with no drain and no flush.
  it.each(['SIGINT', 'SIGTERM'] as const)('a second %s does not cut the stop short: the running upload finishes, exit code 0', async (signal) => {
    const data = join(await temp(), 'data');
    const p: ServerProcess = await startServerProcess(['--data', data], cliEnv({ TREEGATE_ADMIN_PASSWORD: 'audit-Password1', TREEGATE_SFTP_ENABLE: 'false' }));
    procs.push(p.child);
    const login = await fetch(`http://127.0.0.1:${p.http}/api/auth/login`, {
      method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ username: 'admin', password: 'audit-Password1' }),
    });
    const token = ((await login.json()) as { data: { token: string } }).data.token;

    // An upload the handler is reading (100-continue goes out only then), held open by us.
    const req = request({
      host: '127.0.0.1', port: p.http, method: 'PUT', path: '/api/fs/put',
      headers: { authorization: token, 'file-path': '/held.txt', 'content-length': '10', expect: '100-continue' },
    });
    let connection: string | undefined;
    const answer = new Promise<string>((res, rej) => {
      req.on('response', (r) => {
        connection = r.headers.connection;
        let t = '';
        r.on('data', (b: Buffer) => (t += b.toString()));
        r.on('end', () => res(t));
      });
      req.on('error', rej);
    });
    await new Promise<void>((res) => req.once('continue', () => res()));
    req.write('01234');

    p.child.kill(signal);
    // The stop is under way once the listener refuses new connections (the upload keeps it going).
    const refused = () => new Promise<boolean>((res) => {
      const s = connect(p.http, '127.0.0.1');
      s.once('connect', () => (s.destroy(), res(false)));
      s.once('error', () => res(true));
    });
    await until(refused, p.output);
    p.child.kill(signal);
    await new Promise((r) => setTimeout(r, 300)); // time for a default action to take effect
    expect({ code: p.child.exitCode, signal: p.child.signalCode }).toEqual({ code: null, signal: null });

    req.end('56789');
    expect(JSON.parse(await answer)).toEqual({ code: 200, message: 'success', data: null });
    expect(connection).toBe('close'); // the last answer on its connection: a kept-alive one would hold the stop
    expect(await p.exited).toBe(0);
    expect(p.output()).toContain('treegate stopped');
    expect(await readFile(join(data, 'storage', 'held.txt'), 'utf8')).toBe('0123456789');
  });
});

describe('API: bad input gets a clear envelope (HTTP 200, a 4xx code and message), never a 500 "internal"', () => {
  let ts: TestServer;
  let admin: string;
  beforeAll(async () => {
    ts = await startTestServer({ env: { TREEGATE_SFTP_ENABLE: 'false' } });
    admin = await ts.login();
  });
  afterAll(async () => {
    await ts?.close();
  });

  async function call(method: string, path: string, body: string | undefined, contentType = 'application/json') {
    const r = await fetch(ts.url + path, { method, headers: { authorization: admin, ...(body === undefined ? {} : { 'content-type': contentType }) }, body });
    const text = await r.text();
    expect(r.status, `${method} ${path}: ${text}`).toBe(200);
    expect(text).not.toMatch(/\bat .*\.[jt]s:\d+|TypeError|ReferenceError|Cannot read prop/);
    const env = JSON.parse(text) as { code: number; message: string; data: unknown };
    expect(Object.keys(env).sort()).toEqual(['code', 'data', 'message']);
    expect(env.message, `${method} ${path}`).not.toMatch(/^internal/);
    return env;
  }

  const objectEndpoints = [
    '/api/auth/login', '/api/auth/2fa/verify', '/api/me/update', '/api/me/sshkey/add',
    '/api/fs/list', '/api/fs/get', '/api/fs/mkdir', '/api/fs/rename', '/api/fs/remove', '/api/fs/copy', '/api/fs/move', '/api/fs/batch_rename',
    '/api/admin/user/create', '/api/admin/meta/create', '/api/admin/storage/create',
  ];

  it('malformed JSON: 400 "invalid request: malformed JSON body" everywhere', async () => {
    for (const ep of [...objectEndpoints, '/api/admin/setting/save', '/api/task/copy/delete_some']) {
      expect(await call('POST', ep, '{"path": "/', 'application/json'), ep).toEqual({ code: 400, message: 'invalid request: malformed JSON body', data: null });
    }
  });

  it('a body labelled JSON but empty: AList\'s 400 "EOF" where a body is read; routes reading the query accept it', async () => {
    for (const ep of [...objectEndpoints, '/api/admin/setting/save']) {
      expect(await call('POST', ep, ''), ep).toEqual({ code: 400, message: 'EOF', data: null });
    }
    // The task batch routes answer any bind failure with their own text (alist-compat §11).
    expect(await call('POST', '/api/task/copy/delete_some', '')).toEqual({ code: 400, message: 'invalid request format', data: null });
    expect((await call('POST', '/api/task/copy/info?tid=none', '')).message).toBe('task not found');
    // Unlabelled, an empty body is no body: the query is read (AList's form binding).
    const r = await fetch(ts.url + '/api/fs/list?path=/', { method: 'POST', headers: { authorization: admin } });
    expect(((await r.json()) as { code: number }).code).toBe(200);
  });

  it('a JSON array or scalar where an object is expected: 400', async () => {
    for (const ep of objectEndpoints) {
      for (const body of ['[1,2]', '"text"', '42']) {
        const env = await call('POST', ep, body);
        expect({ ep, body, code: env.code }).toEqual({ ep, body, code: 400 });
        expect(env.message).toMatch(/^invalid request: (body must be a JSON object|a JSON object body is required)$/);
      }
    }
  });

  it('wrong field types: 400 naming the field', async () => {
    const cases: Array<[string, unknown, string]> = [
      ['/api/auth/login', { username: 1, password: 'x' }, 'invalid request: username must be a string'],
      ['/api/auth/2fa/verify', { code: 123456, secret: 'x' }, 'invalid request: code must be a string'],
      ['/api/me/update', { username: ['admin'] }, 'invalid request: username must be a string'],
      ['/api/me/sshkey/add', { title: 1, key: 'k' }, 'invalid request: title must be a string'],
      ['/api/fs/list', { path: '/', page: 'one' }, 'invalid request: page must be an integer'],
      ['/api/fs/mkdir', { path: 5 }, 'invalid request: path must be a string'],
      ['/api/fs/rename', { path: '/a', name: {} }, 'invalid request: name must be a string'],
      ['/api/fs/copy', { src_dir: '/', dst_dir: '/x', names: 'a' }, 'invalid request: names must be an array of strings'],
      ['/api/fs/batch_rename', { src_dir: '/', rename_objects: [null] }, 'invalid request: rename_objects must be an array of objects'],
      ['/api/admin/user/create', { username: 'u', password: 'p', permission: 'all' }, 'invalid request: permission must be an integer'],
      ['/api/admin/meta/create', { path: 7 }, 'invalid request: path must be a string'],
      ['/api/admin/storage/create', { mount_path: 1, driver: 'Local' }, 'invalid request: mount_path must be a string'],
    ];
    for (const [ep, body, message] of cases) expect(await call('POST', ep, JSON.stringify(body)), ep).toEqual({ code: 400, message, data: null });
  });

  it("missing fields: 400, with AList's messages where it has one", async () => {
    const cases: Array<[string, string]> = [
      ['/api/auth/login', 'invalid request: username is required'],
      ['/api/me/sshkey/add', 'request invalid'], // alist-compat §6
      ['/api/fs/copy', 'Empty file names'],
      ['/api/admin/user/create', 'invalid request: username is required'],
      ['/api/admin/meta/create', "Key: 'Meta.Path' Error:Field validation for 'Path' failed on the 'required' tag"],
      ['/api/admin/storage/create', "Key: 'Storage.MountPath' Error:Field validation for 'MountPath' failed on the 'required' tag"],
    ];
    for (const [ep, message] of cases) expect(await call('POST', ep, '{}'), ep).toEqual({ code: 400, message, data: null });
  });

  it('tasks, settings and ids in the query: the documented 400s and 404s', async () => {
    for (const body of ['{}', '[1]', '"x"']) {
      expect(await call('POST', '/api/task/copy/delete_some', body)).toEqual({ code: 400, message: 'invalid request format', data: null });
    }
    expect(await call('POST', '/api/task/copy/info', undefined)).toEqual({ code: 404, message: 'task not found', data: null });
    expect(await call('POST', '/api/admin/setting/save', '{}')).toEqual({ code: 400, message: 'invalid request: body must be a JSON array of setting items', data: null });
    expect(await call('GET', '/api/admin/storage/get?id=x', undefined)).toEqual({ code: 400, message: 'strconv.Atoi: parsing "x": invalid syntax', data: null });
    expect(await call('GET', '/api/admin/meta/get?id=1.5', undefined)).toEqual({ code: 400, message: 'strconv.Atoi: parsing "1.5": invalid syntax', data: null });
    expect(await call('POST', '/api/me/sshkey/delete?id=abc', undefined)).toEqual({ code: 400, message: 'id format invalid', data: null });
    expect(await call('GET', '/api/admin/user/sshkey/list?uid=z', undefined)).toEqual({ code: 400, message: 'user id format invalid', data: null });
    expect((await call('GET', '/api/admin/user/get?id=abc', undefined)).code).toBe(400);
  });

  it('uploads: a missing or badly escaped File-Path and a broken multipart body are 400s', async () => {
    expect(await call('PUT', '/api/fs/put', '')).toEqual({ code: 400, message: 'File-Path header is required', data: null });
    const badEscape = await fetch(ts.url + '/api/fs/put', { method: 'PUT', headers: { authorization: admin, 'file-path': '%E0%A4%A' }, body: 'x' });
    expect(await badEscape.json()).toMatchObject({ code: 400 });
    const form = await fetch(ts.url + '/api/fs/form', { method: 'PUT', headers: { authorization: admin, 'file-path': '/f', 'content-type': 'multipart/form-data; boundary=zz' }, body: '--zz\r\nbroken' });
    expect(form.status).toBe(200);
    expect(await form.json()).toMatchObject({ code: 400, message: expect.stringMatching(/^invalid multipart body: /) });
  });

  it('a body over max_json_body: 400, not a dropped connection', async () => {
    expect(await call('POST', '/api/fs/list', JSON.stringify({ path: '/', pad: 'x'.repeat(1_100_000) }))).toEqual({ code: 400, message: 'request body too large', data: null });
  });
});
