/** PUT /api/fs/put and PUT /api/fs/form (alist-compat §10, api-spec §4.5, §3 upload task). */
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { request } from 'node:http';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import type { TestServer } from './harness.js';
import { addMeta, expectCode, makeUser, ok, PERM, putFile, rawRequest, startRestServer } from './fs-helpers.js';

let ts: TestServer;
let admin: string;
const disk = (p: string) => join(ts.dataDir, 'storage', p);

async function form(token: string, filePath: string, parts: Array<{ name: string; filename?: string; body: string }>, headers: Record<string, string> = {}) {
  const fd = new FormData();
  for (const p of parts) {
    if (p.filename !== undefined) fd.append(p.name, new Blob([p.body]), p.filename);
    else fd.append(p.name, p.body);
  }
  const res = await fetch(ts.url + '/api/fs/form', {
    method: 'PUT', headers: { authorization: token, 'file-path': encodeURIComponent(filePath), ...headers }, body: fd,
  });
  expect(res.status).toBe(200);
  return (await res.json()) as { code: number; message: string; data: unknown };
}

beforeAll(async () => {
  ts = await startRestServer();
  admin = await ts.login();
});
afterAll(async () => ts?.close());

describe('PUT /api/fs/put', () => {
  it('stores the body under the percent-decoded File-Path and answers data null', async () => {
    const r = await putFile(ts, admin, '/up/dir with space/ünï #1.txt', 'hello');
    ok(r);
    expect(r.data).toBeNull();
    expect(readFileSync(disk('up/dir with space/ünï #1.txt'), 'utf8')).toBe('hello');
  });

  it('a File-Path of raw UTF-8 bytes (not percent-encoded) keeps its name, as in AList', async () => {
    for (const name of ['/up/café-raw.txt', '/up/日本-raw.txt']) {
      const wire = Buffer.from(name, 'utf8').toString('latin1'); // the bytes as Node would send them
      const res = await rawRequest(ts, 'PUT', '/api/fs/put', { authorization: admin, 'file-path': wire, 'content-length': '3' }, Buffer.from('raw'));
      ok(JSON.parse(res.body.toString()) as { code: number; message: string; data: unknown });
      expect(readFileSync(disk(name.slice(1)), 'utf8'), name).toBe('raw');
    }
  });

  it('an empty body makes an empty file', async () => {
    ok(await putFile(ts, admin, '/up/empty.bin', Buffer.alloc(0)));
    expect(statSync(disk('up/empty.bin')).size).toBe(0);
  });

  it('invalid percent escapes and a missing File-Path are 400', async () => {
    const bad = await rawRequest(ts, 'PUT', '/api/fs/put', { authorization: admin, 'file-path': '/up/%zz.txt', 'content-length': '1' }, Buffer.from('x'));
    const env = JSON.parse(bad.body.toString()) as { code: number; message: string };
    expectCode(env, 400, 'invalid URL escape "%zz"');
    const none = await rawRequest(ts, 'PUT', '/api/fs/put', { authorization: admin, 'content-length': '1' }, Buffer.from('x'));
    expect((JSON.parse(none.body.toString()) as { code: number }).code).toBe(400);
    expect(existsSync(disk('up/%zz.txt'))).toBe(false);
  });

  it('Overwrite: false on an existing file is 403 file exists and keeps the old content', async () => {
    ok(await putFile(ts, admin, '/up/keep.txt', 'old'));
    expectCode(await putFile(ts, admin, '/up/keep.txt', 'new', { overwrite: 'false' }), 403, 'file exists');
    expect(readFileSync(disk('up/keep.txt'), 'utf8')).toBe('old');
    ok(await putFile(ts, admin, '/up/keep.txt', 'new'));
    expect(readFileSync(disk('up/keep.txt'), 'utf8')).toBe('new');
  });

  it('Last-Modified (unix ms) becomes the mtime', async () => {
    const ms = Date.UTC(2020, 0, 2, 3, 4, 5);
    ok(await putFile(ts, admin, '/up/dated.txt', 'd', { 'last-modified': String(ms) }));
    expect(Math.floor(statSync(disk('up/dated.txt')).mtimeMs / 1000)).toBe(ms / 1000);
  });

  it('As-Task: true answers a task in its initial state', async () => {
    const r = await putFile(ts, admin, '/up/task.txt', 'tasked', { 'as-task': 'true' });
    ok(r);
    const task = (r.data as { task: Record<string, unknown> }).task;
    expect(task).toMatchObject({ state: 0, status: 'uploading', progress: 0, error: '' });
    expect(typeof task.id).toBe('string');
    expect((task.id as string).length).toBeGreaterThan(0);
    expect(task.name).toBe('upload task.txt to [/](/up)');
    // The upload task's worker writes the file after the reply.
    await vi.waitFor(() => expect(readFileSync(disk('up/task.txt'), 'utf8')).toBe('tasked'), { timeout: 10_000 });
  });

  it('needs the write bit, or a meta write rule on the folder', async () => {
    const u = await makeUser(ts, admin, 'upnowrite', 0);
    expectCode(await putFile(ts, u, '/up/denied.txt', 'x'), 403, 'permission denied');
    expect(existsSync(disk('up/denied.txt'))).toBe(false);
    await addMeta(ts, admin, { path: '/drop', write: true, w_sub: true });
    ok(await putFile(ts, u, '/drop/allowed.txt', 'y'));
    expect(readFileSync(disk('drop/allowed.txt'), 'utf8')).toBe('y');
  });

  it('the Password header unlocks a password-protected folder', async () => {
    await addMeta(ts, admin, { path: '/locked', password: 'sesame', p_sub: true, write: true, w_sub: true });
    const u = await makeUser(ts, admin, 'uplocked', PERM.WRITE);
    expectCode(await putFile(ts, u, '/locked/a.txt', 'x'), 403, 'password is incorrect or you have no permission');
    expectCode(await putFile(ts, u, '/locked/a.txt', 'x', { password: 'wrong' }), 403, 'password is incorrect or you have no permission');
    ok(await putFile(ts, u, '/locked/a.txt', 'x', { password: 'sesame' }));
  });

  it('uploading over a folder is refused', async () => {
    const r = await putFile(ts, admin, '/up', 'x');
    expect(r.code).toBe(500);
  });

  it('a client that disconnects mid-upload leaves nothing under the final name (and no temp file)', async () => {
    const u = new URL(ts.url);
    let sawTemp = false;
    await new Promise<void>((resolve) => {
      const req = request({
        host: u.hostname, port: u.port, method: 'PUT', path: '/api/fs/put',
        headers: { authorization: admin, 'file-path': '/cut/partial.bin', 'content-length': String(8 << 20) },
      });
      req.on('error', () => resolve());
      req.on('close', () => resolve());
      // Cut the connection only once the server is visibly writing (its temp file exists).
      req.write(Buffer.alloc(1 << 20, 1), async () => {
        const until = Date.now() + 5000;
        while (Date.now() < until && !(existsSync(disk('cut')) && readdirSync(disk('cut')).some((n) => n.startsWith('.treegate-upload-')))) {
          await new Promise((r) => setTimeout(r, 20));
        }
        sawTemp = existsSync(disk('cut')) && readdirSync(disk('cut')).length > 0;
        req.destroy();
      });
    });
    expect(sawTemp).toBe(true);
    const deadline = Date.now() + 5000;
    while (Date.now() < deadline && existsSync(disk('cut')) && readdirSync(disk('cut')).length > 0) await new Promise((r) => setTimeout(r, 50));
    expect(existsSync(disk('cut/partial.bin'))).toBe(false);
    if (existsSync(disk('cut'))) expect(readdirSync(disk('cut'))).toEqual([]);
  });

  it('a body shorter than Content-Length never lands (size check)', async () => {
    const u = new URL(ts.url);
    await new Promise<void>((resolve) => {
      const req = request({
        host: u.hostname, port: u.port, method: 'PUT', path: '/api/fs/put',
        headers: { authorization: admin, 'file-path': '/cut/short.bin', 'content-length': '100' },
      });
      req.on('error', () => resolve());
      req.on('close', () => resolve());
      req.write('only a few bytes', () => setTimeout(() => req.destroy(), 100));
    });
    await new Promise((r) => setTimeout(r, 200));
    expect(existsSync(disk('cut/short.bin'))).toBe(false);
  });
});

describe('PUT /api/fs/form', () => {
  it('stores the `file` part and ignores other parts', async () => {
    const r = await form(admin, '/form/a.txt', [{ name: 'note', body: 'ignored' }, { name: 'file', filename: 'x.txt', body: 'form body' }]);
    ok(r);
    expect(r.data).toBeNull();
    expect(readFileSync(disk('form/a.txt'), 'utf8')).toBe('form body');
  });

  it('a client that disconnects mid-form leaves nothing under the final name', async () => {
    const u = new URL(ts.url);
    const boundary = 'tgboundary';
    const head = `--${boundary}\r\nContent-Disposition: form-data; name="file"; filename="big.bin"\r\nContent-Type: application/octet-stream\r\n\r\n`;
    let sawTemp = false;
    await new Promise<void>((resolve) => {
      const req = request({
        host: u.hostname, port: u.port, method: 'PUT', path: '/api/fs/form',
        headers: { authorization: admin, 'file-path': '/cutform/big.bin', 'content-type': `multipart/form-data; boundary=${boundary}`, 'content-length': String(8 << 20) },
      });
      req.on('error', () => resolve());
      req.on('close', () => resolve());
      req.write(Buffer.concat([Buffer.from(head), Buffer.alloc(1 << 20, 7)]), async () => {
        const until = Date.now() + 5000;
        while (Date.now() < until && !(existsSync(disk('cutform')) && readdirSync(disk('cutform')).length > 0)) await new Promise((r) => setTimeout(r, 20));
        sawTemp = existsSync(disk('cutform')) && readdirSync(disk('cutform')).length > 0;
        req.destroy();
      });
    });
    expect(sawTemp).toBe(true);
    const deadline = Date.now() + 5000;
    while (Date.now() < deadline && readdirSync(disk('cutform')).length > 0) await new Promise((r) => setTimeout(r, 50));
    expect(readdirSync(disk('cutform'))).toEqual([]);
  });

  it('a form cut off before the storage got any bytes still ends its write (nothing left under way)', async () => {
    const u = new URL(ts.url);
    const boundary = 'tgboundary';
    const head = `--${boundary}\r\nContent-Disposition: form-data; name="file"; filename="small.bin"\r\nContent-Type: application/octet-stream\r\n\r\n`;
    for (let i = 0; i < 3; i++) {
      await new Promise<void>((resolve) => {
        const req = request({
          host: u.hostname, port: u.port, method: 'PUT', path: '/api/fs/form',
          headers: { authorization: admin, 'file-path': `/cutsmall/s${i}.bin`, 'content-type': `multipart/form-data; boundary=${boundary}`, 'content-length': String(1 << 20) },
        });
        req.on('error', () => resolve());
        req.on('close', () => resolve());
        // Less than the Local driver's first look at a body of unknown size (64 KiB).
        req.write(Buffer.concat([Buffer.from(head), Buffer.alloc(1000, 7)]), () => setTimeout(() => req.destroy(), 200));
      });
    }
    expect(await ts.running.core.vfs.settled(5000)).toBe(true);
    expect(existsSync(disk('cutsmall')) ? readdirSync(disk('cutsmall')) : []).toEqual([]);
  });

  it('client hang-ups mid-upload are not logged as storage errors', async () => {
    const u = new URL(ts.url);
    const errorsBefore = ts.logs.filter((l) => l.includes('"level":50')).length;
    for (const path of ['/api/fs/put', '/api/fs/form']) {
      await new Promise<void>((resolve) => {
        const req = request({
          host: u.hostname, port: u.port, method: 'PUT', path,
          headers: { authorization: admin, 'file-path': `/hangup${path.replace(/\//g, '-')}.bin`, 'content-length': String(1 << 20), 'content-type': path.endsWith('form') ? 'multipart/form-data; boundary=b' : 'application/octet-stream' },
        });
        req.on('error', () => resolve());
        req.on('close', () => resolve());
        const body = path.endsWith('form') ? Buffer.concat([Buffer.from('--b\r\nContent-Disposition: form-data; name="file"; filename="h.bin"\r\n\r\n'), Buffer.alloc(200_000, 1)]) : Buffer.alloc(200_000, 1);
        req.write(body, () => setTimeout(() => req.destroy(), 200));
      });
    }
    expect(await ts.running.core.vfs.settled(5000)).toBe(true);
    await new Promise((r) => setTimeout(r, 300)); // log lines are written in batches
    expect(ts.logs.filter((l) => l.includes('"level":50')).slice(errorsBefore)).toEqual([]);
  });

  it('As-Task answers the task object', async () => {
    const r = await form(admin, '/form/t.txt', [{ name: 'file', filename: 't.txt', body: 't' }], { 'as-task': 'true' });
    ok(r);
    expect((r.data as { task: unknown }).task).toMatchObject({ state: 0, status: 'uploading', progress: 0, error: '', name: 'upload t.txt to [/](/form)' });
  });

  it('a body without a `file` part is 400', async () => {
    const r = await form(admin, '/form/none.txt', [{ name: 'other', filename: 'o.txt', body: 'o' }]);
    expect(r.code).toBe(400);
    expect(existsSync(disk('form/none.txt'))).toBe(false);
  });

  it('a non-multipart body is 400', async () => {
    const res = await rawRequest(ts, 'PUT', '/api/fs/form', { authorization: admin, 'file-path': '/form/raw.txt', 'content-type': 'text/plain', 'content-length': '3' }, Buffer.from('abc'));
    expect((JSON.parse(res.body.toString()) as { code: number }).code).toBe(400);
    expect(existsSync(disk('form/raw.txt'))).toBe(false);
  });

  it('a multipart body cut short is 400 and the server keeps serving (any part, refused or not)', async () => {
    // busboy errors the part's stream ("Unexpected end of form"); unheard, that error ended the process.
    const u = await makeUser(ts, admin, 'formcut', 0);
    const cut = (name: string) => Buffer.from(`--B\r\nContent-Disposition: form-data; name="${name}"; filename="x"\r\n\r\nabc`);
    const cases: Array<[string, string, Record<string, string>]> = [
      [admin, 'file', {}],
      [admin, 'other', {}],
      [admin, 'file', { overwrite: 'false' }], // refused before the body is read: form/a.txt exists
      [u, 'file', {}], // refused: no write permission
    ];
    for (const [token, name, extra] of cases) {
      const body = cut(name);
      const target = extra.overwrite ? '/form/a.txt' : '/form/cut.txt';
      const res = await rawRequest(ts, 'PUT', '/api/fs/form', { authorization: token, 'file-path': target, 'content-type': 'multipart/form-data; boundary=B', 'content-length': String(body.length), ...extra }, body);
      const env = JSON.parse(res.body.toString()) as { code: number; message: string };
      expect(env.code, `${name} ${JSON.stringify(extra)}`).toBeGreaterThanOrEqual(400);
      expect(env.code).toBeLessThan(500);
    }
    expect(existsSync(disk('form/cut.txt'))).toBe(false);
    expect(readFileSync(disk('form/a.txt'), 'utf8')).toBe('form body');
    expect(await (await fetch(ts.url + '/ping')).text()).toBe('pong');
  });

  it('permission and Overwrite apply as for put', async () => {
    const u = await makeUser(ts, admin, 'formnowrite', 0);
    expectCode(await form(u, '/form/denied.txt', [{ name: 'file', filename: 'd', body: 'd' }]), 403, 'permission denied');
    expectCode(await form(admin, '/form/a.txt', [{ name: 'file', filename: 'a', body: 'zzz' }], { overwrite: 'false' }), 403, 'file exists');
    expect(readFileSync(disk('form/a.txt'), 'utf8')).toBe('form body');
  });
});
