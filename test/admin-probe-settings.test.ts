/** Adversarial probe of /api/admin/setting/* and /api/public/settings. */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { TestServer } from './harness.js';
import { expectCode, list, ok, putFile, startRestServer } from './fs-helpers.js';

let ts: TestServer;
let admin: string;
const save = (items: unknown) => ts.api('/api/admin/setting/save', { token: admin, body: items });
const value = async (key: string) => (await ts.api<{ value: string }>(`/api/admin/setting/get?key=${key}`, { token: admin })).data!.value;

beforeAll(async () => {
  ts = await startRestServer();
  admin = await ts.login();
});
afterAll(async () => ts?.close());

describe('hide_files (compiled by the web front end, which does not catch)', () => {
  it('refuses a line the front end cannot compile and keeps the old value', async () => {
    const before = await value('hide_files');
    for (const bad of ['/(/', '/a/zz', 'plain words', '/ok/i\n/[/']) {
      const r = await save([{ key: 'hide_files', value: bad }]);
      expect(r.code, bad).toBe(400);
      expect(r.message).toMatch(/^setting hide_files: the web front end cannot compile /);
    }
    expect(await value('hide_files')).toBe(before);
  });

  it('accepts /regex/flags lines, blank lines and an empty value', async () => {
    for (const good of ['/\\/README.md/i\n\n  /^\\.git$/  \n/x/gimsuy', '', 'g']) {
      ok(await save([{ key: 'hide_files', value: good }]));
      expect((await ts.api<Record<string, string>>('/api/public/settings')).data!.hide_files).toBe(good);
    }
  });
});

describe('public settings', () => {
  it('an unknown key saved with flag 0 stays private', async () => {
    ok(await save([{ key: 'probe_secret', value: 's3cr3t', flag: 0, group: 1 }]));
    const pub = (await ts.api<Record<string, string>>('/api/public/settings')).data!;
    expect(Object.values(pub)).not.toContain('s3cr3t');
    expect(pub).not.toHaveProperty('token');
  });
});

describe('reset_token', () => {
  it('signs made with the old token stop working on /d; fresh ones work', async () => {
    ok(await putFile(ts, admin, '/signed.txt', 'body'));
    const oldSign = (await list(ts, admin, '/')).data!.content.find((e) => e.name === 'signed.txt')!.sign;
    expect((await fetch(`${ts.url}/d/signed.txt?sign=${encodeURIComponent(oldSign)}`)).status).toBe(200);
    ok(await ts.api('/api/admin/setting/reset_token', { token: admin, method: 'POST' }));
    const stale = await fetch(`${ts.url}/d/signed.txt?sign=${encodeURIComponent(oldSign)}`);
    expectCode((await stale.json()) as { code: number; message: string }, 401, 'sign invalid');
    const fresh = (await list(ts, admin, '/')).data!.content.find((e) => e.name === 'signed.txt')!.sign;
    expect(fresh).not.toBe(oldSign);
    expect(await (await fetch(`${ts.url}/d/signed.txt?sign=${encodeURIComponent(fresh)}`)).text()).toBe('body');
  });
});
