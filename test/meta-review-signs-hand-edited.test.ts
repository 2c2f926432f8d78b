/** Code-review findings on meta rules (hide, path passwords, readme) across REST, /d and the other surfaces. */
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestServer, type TestServer } from './harness.js';
import { addMeta, expectCode, list, makeUser, ok, seed, startRestServer } from './fs-helpers.js';

let ts: TestServer;
let admin: string;

async function get(path: string) {
  const res = await fetch(ts.url + path, { redirect: 'manual' });
  return { status: res.status, body: Buffer.from(await res.arrayBuffer()).toString() };
}
async function setSetting(key: string, value: string) {
  ok(await ts.api('/api/admin/setting/save', { token: admin, body: [{ key, value }] }));
}

beforeAll(async () => {
  ts = await startRestServer();
  admin = await ts.login();
});
afterAll(async () => ts?.close());

describe('links of a user based below a hidden folder (sign_all off)', () => {
  beforeAll(async () => setSetting('sign_all', 'false'));
  afterAll(async () => setSetting('sign_all', 'true'));

  it('the files the user lists get a sign that opens them on /d (their home is hidden from anonymous links)', async () => {
    await seed(ts, admin, { '/homes/alice/notes.txt': 'alice-notes' });
    await addMeta(ts, admin, { path: '/homes', hide: '^alice$' });
    const u = await makeUser(ts, admin, 'alice', 0, '/homes/alice');
    const l = await list(ts, u, '/');
    ok(l);
    const e = l.data!.content.find((x) => x.name === 'notes.txt')!;
    expect(e.sign).not.toBe('');
    expect(await get(`/d/homes/alice/notes.txt?sign=${encodeURIComponent(e.sign)}`)).toMatchObject({ status: 200, body: 'alice-notes' });
    // fs/get's raw_url is the link the web UI downloads with: it must work too.
    const g = await ts.api<{ sign: string; raw_url: string }>('/api/fs/get', { token: u, body: { path: '/notes.txt' } });
    ok(g);
    const raw = new URL(g.data!.raw_url);
    expect(await get(raw.pathname + raw.search)).toMatchObject({ status: 200, body: 'alice-notes' });
  });
});

describe('a path password on a single file (sign_all on, the default)', () => {
  it('a lister without the password gets no sign that opens it; with the password, or the skip bit, the sign works', async () => {
    await seed(ts, admin, { '/pfa/locked.txt': 'locked-a', '/pfa/open.txt': 'open-a' });
    await addMeta(ts, admin, { path: '/pfa/locked.txt', password: 'pw' });
    const u = await makeUser(ts, admin, 'filepwa', 0);
    expectCode(await ts.api('/api/fs/get', { token: u, body: { path: '/pfa/locked.txt' } }), 403, 'password is incorrect or you have no permission');
    const signOf = async (token: string, extra: Record<string, unknown> = {}) => {
      const l = await list(ts, token, '/pfa', extra);
      ok(l);
      const m = new Map(l.data!.content.map((e) => [e.name, e.sign]));
      expect(m.get('open.txt')).not.toBe('');
      return m.get('locked.txt')!;
    };
    const leaked = await signOf(u);
    expect(leaked).toBe('');
    expect((await get(`/d/pfa/locked.txt?sign=${encodeURIComponent(leaked)}`)).body).not.toBe('locked-a');
    for (const s of [await signOf(u, { password: 'pw' }), await signOf(admin)]) {
      expect(await get(`/d/pfa/locked.txt?sign=${encodeURIComponent(s)}`)).toMatchObject({ status: 200, body: 'locked-a' });
    }
  });
});

describe('a path password on a single file (sign_all off)', () => {
  beforeAll(async () => setSetting('sign_all', 'false'));
  afterAll(async () => setSetting('sign_all', 'true'));

  it('fs/list signs the protected file, and the listed link opens it on /d (it needs a sign there)', async () => {
    await seed(ts, admin, { '/pf/locked.txt': 'locked-body', '/pf/open.txt': 'open-body' });
    await addMeta(ts, admin, { path: '/pf/locked.txt', password: 'pw' });
    expectCode(JSON.parse((await get('/d/pf/locked.txt')).body) as { code: number; message: string }, 401, 'expire missing');
    const u = await makeUser(ts, admin, 'filepw', 0);
    // The admin skips passwords; the user gives the file's password with the listing.
    for (const [token, extra] of [[admin, {}], [u, { password: 'pw' }]] as const) {
      const l = await list(ts, token, '/pf', extra);
      ok(l);
      const byName = new Map(l.data!.content.map((e) => [e.name, e.sign]));
      expect(byName.get('open.txt')).toBe('');
      const s = byName.get('locked.txt')!;
      expect(s).not.toBe('');
      expect(await get(`/d/pf/locked.txt?sign=${encodeURIComponent(s)}`)).toMatchObject({ status: 200, body: 'locked-body' });
    }
  });
});

describe('meta rules written into the store by hand (the store accepts hand-edited files)', () => {
  it('a rule holding only a path and a password protects its folder, uncleaned path included, and fails no request', async () => {
    const dataDir = await mkdtemp(join(tmpdir(), 'treegate-meta-review-'));
    let s = await startTestServer({ dataDir, env: { TREEGATE_SFTP_ENABLE: 'false' } });
    try {
      const a = await s.login();
      await seed(s, a, { '/vault/in.txt': 'in', '/box/b.txt': 'b' });
      await makeUser(s, a, 'handreader', 0);
      await s.close();
      const file = join(dataDir, 'store.json');
      const data = JSON.parse(await readFile(file, 'utf8')) as { metas: unknown[] };
      // What a person writes: the fields that matter, a trailing slash; the rest left out.
      data.metas.push({ id: 91, path: '/vault/', password: 'pw' }, { id: 92, path: '/box', readme: 'hello' });
      await writeFile(file, JSON.stringify(data));
      s = await startTestServer({ dataDir, env: { TREEGATE_SFTP_ENABLE: 'false' } });
      const u = await s.login('handreader', 'pw-handreader-123');
      expectCode(await list(s, u, '/vault'), 403, 'password is incorrect or you have no permission');
      const l = await list(s, u, '/vault', { password: 'pw' });
      ok(l);
      expect(l.data!.content.map((e) => e.name)).toEqual(['in.txt']);
      // No hide text is no hide rule (not "hide everything"), and no password is none.
      const b = await list(s, u, '/box');
      ok(b);
      expect(b.data!.content.map((e) => e.name)).toEqual(['b.txt']);
      expect(b.data!.readme).toBe('hello');
    } finally {
      await s.close();
      await rm(dataDir, { recursive: true, force: true });
    }
  });
});
