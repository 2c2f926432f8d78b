/** Code-review findings in the REST write and upload routes (fs-write.ts, fs-upload.ts), proven on a running server. */
import { existsSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { TestServer } from './harness.js';
import { request } from 'node:http';
import { expectCode, mkdir, names, ok, putFile, seed, startRestServer } from './fs-helpers.js';

let ts: TestServer;
let admin: string;
const disk = (p: string) => join(ts.dataDir, 'storage', p);

beforeAll(async () => {
  ts = await startRestServer();
  admin = await ts.login();
});
afterAll(async () => ts?.close());

/** PUT a multipart body in two writes, 400 ms apart; the reply's body. */
function staged(filePath: string, extra: Record<string, string>, first: Buffer, rest: Buffer): Promise<string> {
  const u = new URL(ts.url);
  return new Promise((resolve, reject) => {
    const req = request({
      host: u.hostname, port: u.port, method: 'PUT', path: '/api/fs/form',
      headers: {
        authorization: admin, 'file-path': filePath, 'content-type': 'multipart/form-data; boundary=B',
        'content-length': String(first.length + rest.length), ...extra,
      },
    }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => resolve(Buffer.concat(chunks).toString()));
    });
    req.on('error', reject);
    req.write(first, () => setTimeout(() => req.end(rest), 400));
  });
}

describe('PUT /api/fs/form', () => {
  it('a form cut off after its `file` part is refused and stores nothing (also As-Task)', async () => {
    // The `file` part is whole, a later part is cut: AList parses the whole form first and fails.
    const body = Buffer.from(
      '--B\r\nContent-Disposition: form-data; name="file"; filename="f.txt"\r\n\r\nwhole file part\r\n' +
        '--B\r\nContent-Disposition: form-data; name="note"; filename="n.txt"\r\n\r\ncut he',
    );
    for (const [name, extra] of [['sync.txt', {}], ['task.txt', { 'as-task': 'true' }]] as const) {
      // The form comes in two writes: the server has the whole `file` part well before the cut end.
      const split = body.indexOf('cut he');
      const res = await staged(`/formcut/${name}`, extra, body.subarray(0, split), body.subarray(split));
      const env = JSON.parse(res) as { code: number; message: string };
      expect([env.code, env.message], name).toEqual([400, 'invalid multipart body: Unexpected end of form']);
    }
    expect(await ts.running.core.vfs.settled(5000)).toBe(true);
    await new Promise((r) => setTimeout(r, 300)); // an upload task (if one was made) would run now
    expect(await ts.running.core.vfs.settled(5000)).toBe(true);
    expect(existsSync(disk('formcut')) ? readdirSync(disk('formcut')) : []).toEqual([]);
  });
});

describe('batch_rename and regex_rename', () => {
  const post = (path: string, body: unknown) => ts.api(path, { token: admin, body });

  it('batch_rename checks every pair before renaming any (a bad later pair renames nothing)', async () => {
    await seed(ts, admin, { '/brv/1.txt': '1', '/brv/2.txt': '2' });
    // gin binds the whole request first: a pair of the wrong type is a 400 before anything runs.
    const typed = await post('/api/fs/batch_rename', { src_dir: '/brv', rename_objects: [{ src_name: '1.txt', new_name: 'one.txt' }, { src_name: 2, new_name: 'two.txt' }] });
    expect(typed.code).toBe(400);
    expect(await names(ts, admin, '/brv')).toEqual(['1.txt', '2.txt']);
    expectCode(
      await post('/api/fs/batch_rename', { src_dir: '/brv', rename_objects: [{ src_name: '1.txt', new_name: 'one.txt' }, { src_name: '2.txt', new_name: '../two.txt' }] }),
      403,
      'access using relative path is not allowed',
    );
    expect(await names(ts, admin, '/brv')).toEqual(['1.txt', '2.txt']);
    ok(await post('/api/fs/batch_rename', { src_dir: '/brv', rename_objects: [{ src_name: '1.txt', new_name: 'one.txt' }, { src_name: '2.txt', new_name: 'two.txt' }] }));
    expect(await names(ts, admin, '/brv')).toEqual(['one.txt', 'two.txt']);
  });

  it('regex_rename checks every new name before renaming any', async () => {
    await seed(ts, admin, { '/rxv/a.txt': 'a', '/rxv/b.txt': 'b' });
    // a.txt → `a.`, b.txt → `.` (refused): nothing may be renamed.
    expectCode(
      await post('/api/fs/regex_rename', { src_dir: '/rxv', src_name_regex: '^(?:(a)|b)\\.txt$', new_name_regex: '$1.' }),
      403,
      'access using relative path is not allowed',
    );
    expect(await names(ts, admin, '/rxv')).toEqual(['a.txt', 'b.txt']);
  });
});

describe('PUT /api/fs/put', () => {
  it('Overwrite: false onto an existing folder is 403 file exists, as AList (and as with As-Task)', async () => {
    ok(await mkdir(ts, admin, '/owdir/sub'));
    for (const extra of [{}, { 'as-task': 'true' }] as Array<Record<string, string>>) {
      expectCode(await putFile(ts, admin, '/owdir/sub', 'x', { overwrite: 'false', ...extra }), 403, 'file exists');
    }
    const fd = new FormData();
    fd.append('file', new Blob(['x']), 'sub');
    const res = await fetch(ts.url + '/api/fs/form', { method: 'PUT', headers: { authorization: admin, 'file-path': '/owdir/sub', overwrite: 'false' }, body: fd });
    expectCode((await res.json()) as { code: number; message: string }, 403, 'file exists');
    expect(await names(ts, admin, '/owdir')).toEqual(['sub']);
  });
});
