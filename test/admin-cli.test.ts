/**
 * `treegate admin` against a running server, and store files the server cannot use, with the built
 * CLI as real processes (like contract.test.ts): the store keeps one writer while a server runs, and
 * a bad store.json is refused with a message naming it, never reset or overwritten.
 */
import { mkdir, readdir, readFile, rename, stat, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { cliEnv, runCli, startServerProcess, tempDataDirs, type ServerProcess } from './clients/process.js';
import { PERM } from '../src/auth/principal.js';
import { KV_FILE } from '../src/store/json-store.js';
import { KvJournal } from '../src/store/kv-journal.js';

const procs: ServerProcess[] = [];

const dataDirs = tempDataDirs('treegate-admin-cli-');
const tempData = () => dataDirs.next();

afterEach(async () => {
  for (const p of procs.splice(0)) if (p.child.exitCode === null) p.child.kill('SIGKILL');
  await dataDirs.cleanup();
});

async function login(port: number, username: string, password: string): Promise<{ code: number; data?: { token: string } }> {
  const r = await fetch(`http://127.0.0.1:${port}/api/auth/login`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ username, password }),
  });
  return (await r.json()) as { code: number; data?: { token: string } };
}

const LOCKINFO = '<?xml version="1.0"?><D:lockinfo xmlns:D="DAV:"><D:lockscope><D:exclusive/></D:lockscope><D:locktype><D:write/></D:locktype><D:owner>t</D:owner></D:lockinfo>';

describe('admin set while the server writes', () => {
  it('loses no acknowledged write, and the new password works at once', async () => {
    const data = await tempData();
    const p = await startServerProcess(['--data', data], cliEnv({ TREEGATE_ADMIN_PASSWORD: 'first-Password1' }));
    procs.push(p);
    const base = `http://127.0.0.1:${p.http}`;
    let password = 'first-Password1';
    let token = (await login(p.http, 'admin', password)).data!.token;
    const created = await fetch(`${base}/api/admin/user/create`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: token },
      body: JSON.stringify({ username: 'worker', password: 'worker-Pass1', base_path: '/', role: 0, permission: PERM.WRITE | PERM.WEBDAV_READ | PERM.WEBDAV_MANAGE }),
    });
    expect(((await created.json()) as { code: number }).code).toBe(200);

    // Writers: REST meta creates as admin (logging in again after each password change), and WebDAV
    // LOCKs as another user. What they got acknowledged must all be on disk at the end.
    const metas: string[] = [];
    const locks: string[] = [];
    const failures: string[] = [];
    let running = true;
    let n = 0;
    const restWriter = async () => {
      while (running) {
        const path = `/m-${++n}`;
        const r = await fetch(`${base}/api/admin/meta/create`, {
          method: 'POST',
          headers: { 'content-type': 'application/json', authorization: token },
          body: JSON.stringify({ path }),
        });
        const body = (await r.json()) as { code: number };
        if (body.code === 200) metas.push(path);
        else if (body.code === 401) token = (await login(p.http, 'admin', password)).data?.token ?? token;
        else failures.push(`meta create: ${JSON.stringify(body)}`);
      }
    };
    const davWriter = async () => {
      const auth = 'Basic ' + Buffer.from('worker:worker-Pass1').toString('base64');
      while (running) {
        const r = await fetch(`${base}/dav/lock-${++n}.txt`, {
          method: 'LOCK',
          headers: { authorization: auth, 'content-type': 'application/xml', timeout: 'Second-3600' },
          body: LOCKINFO,
        });
        const text = await r.text();
        if (r.status === 200 || r.status === 201) locks.push(/<([^>]+)>/.exec(r.headers.get('lock-token') ?? '')![1]!);
        else failures.push(`LOCK: ${r.status} ${text.slice(0, 200)}`);
      }
    };
    const writers = Promise.all([restWriter(), restWriter(), davWriter(), davWriter()]);
    try {
      for (let i = 0; i < 5; i++) {
        await new Promise((r) => setTimeout(r, 150));
        const next = `round-${i}-Password`;
        const r = await runCli(['admin', 'set', next, '--data', data], cliEnv());
        expect(r.code, r.stderr).toBe(0);
        password = next;
        // The change is in effect when the command returns: no waiting for a reload.
        expect((await login(p.http, 'admin', next)).code).toBe(200);
      }
    } finally {
      running = false;
      await writers;
    }
    expect(metas.length).toBeGreaterThan(20);
    expect(locks.length).toBeGreaterThan(20);
    expect((await login(p.http, 'admin', 'first-Password1')).code).toBe(400);

    p.child.kill('SIGTERM');
    expect(await p.exited).toBe(0);
    const doc = JSON.parse(await readFile(join(data, 'store.json'), 'utf8')) as { metas: Array<{ path: string }> };
    const storedMetas = new Set(doc.metas.map((m) => m.path));
    expect(metas.filter((m) => !storedMetas.has(m))).toEqual([]);
    const kv = await KvJournal.open(join(data, KV_FILE), { readOnly: true }); // locks are kept beside the store
    const storedLocks = new Set((await kv.entries('webdav.locks')).map(([token]) => token));
    expect(locks.filter((l) => !storedLocks.has(l))).toEqual([]);
    expect(failures.slice(0, 5), `${failures.length} writes failed`).toEqual([]); // e.g. 500 ENOENT rename of a temp file
    // Nothing left behind: no temp files, no requests or answers, no owner marker.
    expect((await readdir(data)).filter((f) => /\.tmp$|^control-|^server\.pid$/.test(f))).toEqual([]);
    p.output().split('\n').forEach((l) => expect(l).not.toContain('ENOENT'));
  });

  it('admin show only reads, and a missing data dir is an error that creates nothing', async () => {
    const data = await tempData();
    const r = await runCli(['admin', 'show', '--data', data], cliEnv());
    expect(r.code).toBe(1);
    expect(r.stderr).toContain(join(data, 'store.json'));
    await expect(stat(data)).rejects.toThrow();
    const s = await runCli(['admin', 'set', 'x-Password1', '--data', data], cliEnv());
    expect(s.code).toBe(1);
    await expect(stat(data)).rejects.toThrow();
  });
});

describe('a store.json the server cannot use', () => {
  it('a newer schema put in place while the server runs is reported, and the server keeps running', async () => {
    const data = await tempData();
    const p = await startServerProcess(['--data', data], cliEnv({ TREEGATE_ADMIN_PASSWORD: 'first-Password1' }));
    procs.push(p);
    const file = join(data, 'store.json');
    const doc = JSON.parse(await readFile(file, 'utf8')) as Record<string, unknown>;
    await writeFile(file + '.next', JSON.stringify({ ...doc, schema_version: 99, writer: 'someone-else' }));
    await rename(file + '.next', file);
    const until = Date.now() + 10_000;
    while (!p.output().includes('schema version 99') && Date.now() < until) await new Promise((r) => setTimeout(r, 50));
    expect(p.output()).toMatch(/store\.json: store schema version 99 is newer .*not loaded/);
    expect(p.child.exitCode).toBeNull();
    expect((await login(p.http, 'admin', 'first-Password1')).code).toBe(200);
    expect(p.output()).not.toMatch(/at .*\.js:\d+/); // no stack trace
    p.child.kill('SIGTERM');
    expect(await p.exited).toBe(0);
  });

  const bad: Array<[string, string, RegExp]> = [
    ['invalid JSON', '{"schema_version": 1, users: []}', /is not valid JSON/],
    ['null', 'null', /must be a JSON object, found null/],
    ['an array', '[]', /must be a JSON object, found an array/],
    ['users of the wrong type', '{"schema_version": 1, "users": "oops"}', /"users" must be an array/],
  ];
  for (const [what, text, message] of bad) {
    it(`${what}: server and admin show refuse it naming the file, exit non-zero, leave it untouched`, async () => {
      const data = await tempData();
      await mkdir(data, { recursive: true });
      const file = join(data, 'store.json');
      await writeFile(file, text);
      for (const args of [['server'], ['admin', 'show'], ['admin', 'set', 'x-Password1']]) {
        const r = await runCli([...args, '--data', data], cliEnv());
        expect(r.code, args.join(' ')).toBe(1);
        expect(r.stderr).toContain(file);
        expect(r.stderr).toMatch(message);
        expect(r.stderr).not.toMatch(/at .*\.js:\d+/);
        expect(await readFile(file, 'utf8')).toBe(text);
      }
    });
  }
});
