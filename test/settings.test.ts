/** /api/public/* and /api/admin/setting/* against a real server (alist-compat §5, §8). */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { TestServer } from './harness.js';
import { expectLogsFree, startRest } from './auth-helpers.js';
import { VERSION } from '../src/version.js';

interface Item { key: string; value: string; help: string; type: string; options: string; group: number; flag: number; index: number }

/** The spec's 28 named keys (api-spec §2). */
const SPEC_KEYS = [
  'allow_indexed', 'allow_mounted', 'announcement', 'audio_autoplay', 'audio_cover', 'auto_update_index', 'default_page_size',
  'external_previews', 'favicon', 'filename_char_mapping', 'forward_direct_link_params', 'hide_files', 'home_container', 'home_icon',
  'iframe_previews', 'logo', 'main_color', 'ocr_api', 'package_download', 'pagination_type', 'robots_txt', 'search_index',
  'settings_layout', 'site_title', 'sso_login_enabled', 'sso_login_platform', 'version', 'video_autoplay',
];
/** AList 3.45's public keys beyond the spec's (alist-compat §5): 36 in all. */
const MORE_345 = ['preview_archives_by_default', 'readme_autorender', 'filter_readme_scripts', 'ignore_direct_link_params', 'webauthn_login_enabled', 'sso_compatibility_mode', 'ldap_login_enabled', 'ldap_login_tips'];

let s: TestServer;
let admin: string;

beforeAll(async () => {
  s = await startRest();
  admin = await s.login();
});
afterAll(async () => {
  expectLogsFree(s, [admin, s.running.core.settings.get('token')]);
  await s.close();
});

const save = (items: unknown, token = admin) => s.api('/api/admin/setting/save', { token, body: items });

describe('public', () => {
  it('serves exactly the 36 public keys of 3.45, sorted, all strings, with AList defaults', async () => {
    const r = await s.api<Record<string, string>>('/api/public/settings');
    const keys = Object.keys(r.data!);
    expect(keys.sort()).toEqual([...SPEC_KEYS, ...MORE_345].sort());
    expect(Object.keys(r.data!)).toEqual([...keys].sort());
    expect(Object.values(r.data!).every((v) => typeof v === 'string')).toBe(true);
    expect(r.data).toMatchObject({
      version: VERSION, site_title: 'AList', pagination_type: 'all', default_page_size: '30', allow_mounted: 'true', main_color: '#1890ff',
      home_icon: '🏠', hide_files: '/\\/README.md/i', filename_char_mapping: '{"/": "|"}', search_index: 'none', sso_login_platform: '',
      ldap_login_tips: 'login with ldap', robots_txt: 'User-agent: *\nAllow: /', ignore_direct_link_params: 'sign,alist_ts',
    });
    expect(JSON.parse(r.data!.iframe_previews!)).toHaveProperty('pdf');
    expect(keys).not.toContain('token');
  });

  it('lists offline download tools and archive extensions without a token, on GET and POST', async () => {
    expect(await s.api('/api/public/offline_download_tools')).toEqual({ code: 200, message: 'success', data: ['SimpleHttp'] });
    expect((await s.api('/api/public/archive_extensions', { method: 'POST' })).data).toEqual(expect.any(Array));
  });
});

describe('admin list and get', () => {
  it('lists all items with their full shape, or one group, or several', async () => {
    const all = (await s.api<Item[]>('/api/admin/setting/list', { token: admin })).data!;
    expect(Object.keys(all[0]!).sort()).toEqual(['flag', 'group', 'help', 'index', 'key', 'options', 'type', 'value']);
    expect(all.map((i) => i.index)).toEqual([...all.map((i) => i.index)].sort((a, b) => a - b));
    for (const key of ['token', 'link_expiration', 'sign_all', 'text_types', 'privacy_regs', 'aria2_uri', 'qbittorrent_url', 'offline_download_allow_private']) {
      expect(all.find((i) => i.key === key), key).toMatchObject({ flag: 1 });
    }
    expect(all.find((i) => i.key === 'offline_download_allow_private')!.value).toBe('false');
    expect(['string', 'text', 'number', 'bool', 'select']).toEqual(expect.arrayContaining([...new Set(all.map((i) => i.type))]));
    const site = (await s.api<Item[]>('/api/admin/setting/list?group=1', { token: admin })).data!;
    expect(site[0]).toMatchObject({ key: 'version', flag: 2, group: 1 });
    expect(site.every((i) => i.group === 1)).toBe(true);
    const two = (await s.api<Item[]>('/api/admin/setting/list?groups=5,0', { token: admin })).data!;
    expect(new Set(two.map((i) => i.group))).toEqual(new Set([0, 5]));
    expect(await s.api('/api/admin/setting/list?group=x', { token: admin })).toEqual({ code: 400, message: 'strconv.Atoi: parsing "x": invalid syntax', data: null });
  });

  it('gets one key or several; unknown keys are 400 record not found', async () => {
    expect((await s.api<Item>('/api/admin/setting/get?key=site_title', { token: admin })).data).toMatchObject({ key: 'site_title', value: 'AList', type: 'string', group: 1, flag: 0 });
    expect((await s.api<Item[]>('/api/admin/setting/get?keys=site_title,logo,nope', { token: admin })).data!.map((i) => i.key)).toEqual(['site_title', 'logo']);
    expect(await s.api('/api/admin/setting/get?key=nope', { token: admin })).toEqual({ code: 400, message: 'record not found', data: null });
  });
});

describe('admin save', () => {
  it('saves values that public settings then serve', async () => {
    expect(await save([{ key: 'site_title', value: 'treegate test' }, { key: 'default_page_size', value: '50' }])).toEqual({ code: 200, message: 'success', data: null });
    expect((await s.api<Record<string, string>>('/api/public/settings')).data).toMatchObject({ site_title: 'treegate test', default_page_size: '50' });
  });

  it('validates numbers, booleans, selects, JSON and regexes, all or nothing', async () => {
    const cases: Array<[string, string, RegExp]> = [
      ['default_page_size', 'ten', /default_page_size: not a number/],
      ['allow_indexed', 'yes', /allow_indexed: must be true or false/],
      ['pagination_type', 'endless', /pagination_type: must be one of/],
      ['filename_char_mapping', '{"/": ', /filename_char_mapping: not valid JSON/],
      ['iframe_previews', '[]', /iframe_previews: must be a JSON object/],
      ['privacy_regs', 'ok\n(unclosed', /privacy_regs: invalid regular expression/],
      ['token', 'short', /token: must be at least 16 characters/],
    ];
    for (const [key, value, message] of cases) {
      const r = await save([{ key: 'site_title', value: 'must not be saved' }, { key, value }]);
      expect(r.code, key).toBe(400);
      expect(r.message, key).toMatch(message);
    }
    expect((await s.api<Record<string, string>>('/api/public/settings')).data!.site_title).toBe('treegate test');
  });

  it('refuses malformed bodies and items', async () => {
    expect(await save({ key: 'site_title', value: 'x' })).toMatchObject({ code: 400, message: 'invalid request: body must be a JSON array of setting items' });
    expect(await save([{ key: 'site_title', value: 5 }])).toMatchObject({ code: 400, message: 'invalid request: setting site_title: value must be a string' });
    expect(await save([{ value: 'x' }])).toMatchObject({ code: 400 });
    expect(await save(['x'])).toMatchObject({ code: 400 });
  });

  it('skips an unchanged read-only item (the front end sends whole groups) and refuses a changed one', async () => {
    expect(await save([{ key: 'version', value: VERSION }, { key: 'site_title', value: 'again' }])).toMatchObject({ code: 200 });
    expect(await save([{ key: 'version', value: '9.9.9' }])).toMatchObject({ code: 400, message: 'setting version is read-only' });
    expect((await s.api<Record<string, string>>('/api/public/settings')).data).toMatchObject({ version: VERSION, site_title: 'again' });
  });

  it('keeps unknown keys as deprecated items that only then can be deleted', async () => {
    expect(await save([{ key: 'legacy_thing', value: 'v' }])).toMatchObject({ code: 200 });
    expect((await s.api<Item>('/api/admin/setting/get?key=legacy_thing', { token: admin })).data).toMatchObject({ value: 'v', flag: 3 });
    expect(await s.api('/api/admin/setting/delete?key=site_title', { token: admin, method: 'POST' })).toEqual({ code: 500, message: 'setting [site_title] is not deprecated', data: null });
    expect(await s.api('/api/admin/setting/delete?key=legacy_thing', { token: admin, method: 'POST' })).toMatchObject({ code: 200 });
    expect(await s.api('/api/admin/setting/get?key=legacy_thing', { token: admin })).toMatchObject({ code: 400 });
    expect(await s.api('/api/admin/setting/delete?key=legacy_thing', { token: admin, method: 'POST' })).toMatchObject({ code: 500, message: 'record not found' });
  });

  it('turns offline_download_allow_private on (as offline download tests do)', async () => {
    expect(await save([{ key: 'offline_download_allow_private', value: 'true' }])).toMatchObject({ code: 200 });
    expect(s.running.core.settings.bool('offline_download_allow_private')).toBe(true);
  });
});

describe('reset_token', () => {
  it('returns a new alist- token; the old one stops working as the admin API token', async () => {
    const old = s.running.core.settings.get('token');
    expect((await s.api('/api/me', { token: old })).data).toMatchObject({ username: 'admin' });
    const r = await s.api<string>('/api/admin/setting/reset_token', { token: admin, method: 'POST' });
    expect(r.code).toBe(200);
    expect(r.data).toMatch(/^alist-[0-9a-f-]{36}[A-Za-z0-9_-]{64}$/);
    expect(r.data).not.toBe(old);
    expect(await s.api('/api/me', { token: old })).toMatchObject({ code: 401 });
    expect((await s.api('/api/me', { token: r.data! })).data).toMatchObject({ username: 'admin' });
  });
});
