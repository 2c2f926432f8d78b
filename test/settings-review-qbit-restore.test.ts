/**
 * Code review of the settings and their admin API (src/settings, admin-setting.ts, public.ts, the
 * set_* tool endpoints), each defect shown against a real server on loopback.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { TestServer } from './harness.js';
import { ok, startRestServer } from './fs-helpers.js';
import { startQbittorrent, type Qbittorrent } from './offline-helpers.js';

let ts: TestServer;
let admin: string;
let qbit: Qbittorrent | undefined;

beforeAll(async () => {
  qbit = await startQbittorrent();
  ts = await startRestServer();
  admin = await ts.login();
}, 60_000);

afterAll(async () => {
  await qbit?.stop();
  await ts?.close();
});

/** AList's own default privacy_regs (internal/bootstrap/data/setting.go): Go syntax. */
const ALIST_PRIVACY_REGS = [
  String.raw`(?:(?:\d|[1-9]\d|1\d\d|2[0-4]\d|25[0-5])\.){3}(?:\d|[1-9]\d|1\d\d|2[0-4]\d|25[0-5])`,
  String.raw`([[:xdigit:]]{1,4}(?::[[:xdigit:]]{1,4}){7}|::|:(?::[[:xdigit:]]{1,4}){1,6}|[[:xdigit:]]{1,4}:(?::[[:xdigit:]]{1,4}){1,5}|(?:[[:xdigit:]]{1,4}:){2}(?::[[:xdigit:]]{1,4}){1,4}|(?:[[:xdigit:]]{1,4}:){3}(?::[[:xdigit:]]{1,4}){1,3}|(?:[[:xdigit:]]{1,4}:){4}(?::[[:xdigit:]]{1,4}){1,2}|(?:[[:xdigit:]]{1,4}:){5}:[[:xdigit:]]{1,4}|(?:[[:xdigit:]]{1,4}:){1,6}:)`,
  '(?U)access_token=(.*)&',
].join('\n');

const tools = async () => (await ts.api<string[]>('/api/public/offline_download_tools')).data;
const value = async (key: string) => (await ts.api<{ value: string }>(`/api/admin/setting/get?key=${key}`, { token: admin })).data!.value;

describe('set_qbit', () => {
  // AList's SetQbittorrent saves, then answers Init's error with code 500; treegate answered "ok"
  // whatever the login did, so the settings page said "ok" to a wrong password or address and the
  // admin learnt of it only when users' offline downloads failed.
  it('answers the failed login as an error (saved all the same, as AList does), and ok once it works', async () => {
    const url = `http://admin:adminadmin@127.0.0.1:${qbit!.port}/`;
    const wrong = `http://admin:not-the-password@127.0.0.1:${qbit!.port}/`;
    ok(await ts.api('/api/admin/setting/set_qbit', { token: admin, body: { url, seedtime: '0' } }));
    expect(await tools()).toContain('qBittorrent');

    const r = await ts.api('/api/admin/setting/set_qbit', { token: admin, body: { url: wrong, seedtime: '0' } });
    expect(r).toMatchObject({ code: 500, message: expect.stringMatching(/qBittorrent login failed/), data: null });
    expect(await value('qbittorrent_url')).toBe(wrong);
    expect(await tools()).not.toContain('qBittorrent');

    ok(await ts.api('/api/admin/setting/set_qbit', { token: admin, body: { url, seedtime: '0' } }));
    expect(await tools()).toContain('qBittorrent');
  });
});

describe('restoring an AList backup (the web front end saves every setting in one call)', () => {
  // The restore page posts the backup's whole setting list to setting/save, all or nothing here.
  // AList's default privacy_regs is Go syntax that JavaScript refuses (`(?U)`), so a backup of any
  // AList install was refused whole: not one of its settings was restored.
  it('accepts AList\'s own privacy_regs, so the other settings of the backup are restored', async () => {
    const backup = [
      { key: 'site_title', value: 'From AList', type: 'string', group: 1, flag: 0 },
      { key: 'privacy_regs', value: ALIST_PRIVACY_REGS, type: 'text', group: 4, flag: 1 },
      { key: 'link_expiration', value: '2', type: 'number', group: 4, flag: 1 },
    ];
    ok(await ts.api('/api/admin/setting/save', { token: admin, body: backup }));
    expect(await value('site_title')).toBe('From AList');
    expect(await value('privacy_regs')).toBe(ALIST_PRIVACY_REGS);
    expect(await value('link_expiration')).toBe('2');
    // still checked: a line neither JavaScript nor Go can compile is refused
    const bad = await ts.api('/api/admin/setting/save', { token: admin, body: [{ key: 'privacy_regs', value: '(?U)(unclosed' }] });
    expect(bad).toMatchObject({ code: 400, message: 'setting privacy_regs: invalid regular expression: (?U)(unclosed' });
  });
});
