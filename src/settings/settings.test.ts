import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { JsonStore } from '../store/json-store.js';
import { CATALOG, FLAG } from './catalog.js';
import { Settings, validateSetting } from './settings.js';

let dir: string;
let store: JsonStore;
beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), 'treegate-settings-'));
  store = await JsonStore.open(join(dir, 'store.json'));
});
afterEach(async () => {
  await store.close();
  await rm(dir, { recursive: true, force: true });
});

describe('catalog', () => {
  it('has unique keys, AList types only, options on every select', () => {
    expect(new Set(CATALOG.map((d) => d.key)).size).toBe(CATALOG.length);
    for (const d of CATALOG) {
      expect(['string', 'text', 'number', 'bool', 'select'], d.key).toContain(d.type);
      if (d.type === 'select') expect(d.options, d.key).toBeTruthy();
      // Every default passes its own validation (read-only ones are never saved).
      if (d.flag !== FLAG.READONLY && d.key !== 'token') expect(() => validateSetting(d.key, d.default, d), d.key).not.toThrow();
    }
  });
  it('keeps bounded numbers in range: a link_expiration past 2^53 seconds would break every sign', () => {
    const def = (k: string) => CATALOG.find((d) => d.key === k)!;
    expect(() => validateSetting('link_expiration', '9999999999999', def('link_expiration'))).toThrow(/from 0 to 876000/);
    expect(() => validateSetting('link_expiration', '1.5', def('link_expiration'))).toThrow(/whole number/);
    expect(() => validateSetting('link_expiration', '48', def('link_expiration'))).not.toThrow();
    expect(() => validateSetting('default_page_size', '-5', def('default_page_size'))).toThrow(/from 1/);
    expect(() => validateSetting('copy_task_threads_num', '0', def('copy_task_threads_num'))).toThrow(/from 1 to 64/);
  });
});

describe('Settings', () => {
  it('generates an alist- token once, keeps it across loads, and reports the given version', async () => {
    const a = await Settings.load(store, '1.2.3');
    const token = a.get('token');
    expect(token).toMatch(/^alist-/);
    const b = await Settings.load(store, '1.2.4');
    expect(b.get('token')).toBe(token);
    expect(b.publicValues().version).toBe('1.2.4');
  });

  it('orders public keys by bytes, as Go does', async () => {
    const keys = Object.keys((await Settings.load(store, 'v')).publicValues());
    expect(keys).toEqual([...keys].sort((x, y) => (x < y ? -1 : x > y ? 1 : 0)));
    expect(keys).toHaveLength(36);
  });

  it('saves all or nothing', async () => {
    const s = await Settings.load(store, 'v');
    await expect(s.save({ site_title: 'x', default_page_size: 'many' })).rejects.toThrow(/default_page_size/);
    expect(s.get('site_title')).toBe('AList');
    expect((await store.settings.all()).site_title).toBeUndefined();
  });

  it('keeps unknown stored keys as deprecated items after a reload', async () => {
    await store.settings.setMany({ old_key: 'v' });
    const s = await Settings.load(store, 'v');
    expect(s.item('old_key')).toMatchObject({ value: 'v', flag: FLAG.DEPRECATED });
    expect(s.items().at(-1)!.key).toBe('old_key');
    expect(await s.deleteDeprecated('site_title')).toBe(false);
    expect(await s.deleteDeprecated('old_key')).toBe(true);
    expect(s.item('old_key')).toBeUndefined();
    expect((await store.settings.all()).old_key).toBeUndefined();
  });
});
