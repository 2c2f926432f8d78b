import { describe, expect, it } from 'vitest';
import { DriverRegistry, parseOptions } from './registry.js';
import { isVfsError } from '../src/errors.js';
import type { DriverDefinition } from './types.js';
import { localDefinition } from './local/index.js';

const local = localDefinition as unknown as DriverDefinition;

describe('DriverRegistry', () => {
  const reg = new DriverRegistry();

  it('knows the built-in drivers and nothing else', () => {
    expect(reg.names()).toEqual(['Local', 'S3', 'SFTP', 'WebDav', 'FTP', 'Alias', 'Memory']);
    expect(reg.get('Nope')).toBeUndefined();
    expect(reg.template('Nope')).toBeUndefined();
    expect(Object.keys(reg.templates())).toEqual(['Local', 'S3', 'SFTP', 'WebDav', 'FTP', 'Alias', 'Memory']);
  });

  it("builds Local's template exactly as AList 3.45 shows it", () => {
    const t = reg.template('Local')!;
    expect(t.config).toEqual({
      name: 'Local', local_sort: true, only_local: true, only_proxy: false, no_cache: true, no_upload: false, need_ms: false, default_root: '/', alert: '',
    });
    expect(t.common.map((i) => i.name)).toEqual([
      'mount_path', 'order', 'remark', 'webdav_policy', 'down_proxy_url', 'order_by', 'order_direction', 'extract_folder', 'disable_index', 'enable_sign',
    ]);
    expect(t.common[0]).toEqual({
      name: 'mount_path', type: 'string', default: '', options: '', required: true, help: 'The path you want to mount to, it is unique and cannot be repeated',
    });
    expect(t.common[3]).toEqual({ name: 'webdav_policy', type: 'select', default: 'native_proxy', options: 'use_proxy_url,native_proxy', required: true, help: '' });
    expect(t.common[9]).toEqual({ name: 'enable_sign', type: 'bool', default: 'false', options: '', required: true, help: '' });
    expect(t.additional.map((i) => [i.name, i.type, i.default, i.required])).toEqual([
      ['root_folder_path', 'string', '/', true],
      ['thumbnail', 'bool', '', true],
      ['thumb_cache_folder', 'string', '', false],
      ['thumb_concurrency', 'string', '16', false],
      ['video_thumb_pos', 'string', '20%', false],
      ['show_hidden', 'bool', 'true', false],
      ['mkdir_perm', 'string', '777', false],
      ['recycle_bin_path', 'string', 'delete permanently', false],
    ]);
    expect(t.additional[7]!.help).toBe("path to recycle bin, delete permanently if empty or keep 'delete permanently'");
  });

  it("builds Alias's common items with proxy_range at AList's position (proxyRangeOption)", () => {
    const t = reg.template('Alias')!;
    expect(t.common.map((i) => i.name)).toEqual([
      'mount_path', 'order', 'remark', 'web_proxy', 'webdav_policy', 'proxy_range', 'down_proxy_url', 'order_by', 'order_direction', 'extract_folder',
      'disable_index', 'enable_sign',
    ]);
    expect(t.common[5]).toEqual({ name: 'proxy_range', type: 'bool', default: '', options: '', required: false, help: 'Need to enable proxy' });
    // AList's flag is json:"-": driver/info's config never shows it.
    expect(t.config).not.toHaveProperty('proxy_range_option');
    expect(Object.keys(t.config)).toEqual(Object.keys(reg.template('Local')!.config));
    // Only drivers that declare it get the item, and never a proxy-only one.
    for (const name of ['Local', 'S3', 'SFTP', 'WebDav', 'FTP']) expect(reg.template(name)!.common.map((i) => i.name)).not.toContain('proxy_range');
    const proxyOnly = { ...local, proxyRangeOption: true, config: { ...local.config, name: 'P' } };
    expect(new DriverRegistry([proxyOnly]).template('P')!.common.map((i) => i.name)).not.toContain('proxy_range');
  });

  it('gives a cached, non-proxy driver cache_expiration, web_proxy and the 302 policy', () => {
    const def = { ...local, config: { ...local.config, name: 'X', only_local: false, no_cache: false, local_sort: false } };
    const t = new DriverRegistry([def]).template('X')!;
    expect(t.common.map((i) => i.name)).toEqual([
      'mount_path', 'order', 'remark', 'cache_expiration', 'web_proxy', 'webdav_policy', 'down_proxy_url', 'extract_folder', 'disable_index', 'enable_sign',
    ]);
    expect(t.common[5]!.options).toBe('302_redirect,use_proxy_url,native_proxy');
    expect(t.common[3]!.default).toBe('30');
  });
});

describe('parseOptions', () => {
  it('applies defaults and coerces types', () => {
    expect(parseOptions(local, '{"root_folder_path":"/srv","show_hidden":"false","extra":1}')).toEqual({
      root_folder_path: '/srv', thumbnail: false, thumb_cache_folder: '', thumb_concurrency: '16', video_thumb_pos: '20%',
      show_hidden: false, mkdir_perm: '777', recycle_bin_path: 'delete permanently',
    });
    // Local's `/` is only the form's suggestion (formDefaultOnly): missing or empty fails the driver's init.
    expect(parseOptions(local, undefined).root_folder_path).toBe('');
    expect(parseOptions(local, '{"root_folder_path":""}').root_folder_path).toBe('');
    const remote = { ...local, options: [{ name: 'root_folder_path', type: 'string' }] } as unknown as DriverDefinition;
    expect(parseOptions(remote, undefined).root_folder_path).toBe('/');
    expect(() => parseOptions(remote, '{"root_folder_path":""}')).toThrow('option root_folder_path is required');
  });

  it.each([
    ['not json', 'addition is not valid JSON'],
    ['[1]', 'addition must be a JSON object'],
    ['{"show_hidden":"maybe"}', 'option show_hidden must be true or false'],
    // A refused value is shown short; one too deep to write out is not a failure of its own.
    [`{"show_hidden":"${'x'.repeat(10_000)}"}`, `got "${'x'.repeat(76)}...`],
    [`{"show_hidden":${'['.repeat(5000)}${']'.repeat(5000)}}`, 'option show_hidden must be true or false, got'],
  ])('refuses %s', (input, message) => {
    try {
      parseOptions(local, input);
      expect.unreachable();
    } catch (e) {
      expect(isVfsError(e, 'INVALID')).toBe(true);
      expect((e as Error).message).toContain(message);
    }
  });

  it('checks numbers and select values', () => {
    const def = {
      ...local,
      options: [{ name: 'n', type: 'number', default: '3' }, { name: 's', type: 'select', options: 'a,b', default: 'a' }],
    } as unknown as DriverDefinition;
    expect(parseOptions(def, { n: '5' })).toEqual({ n: 5, s: 'a' });
    expect(() => parseOptions(def, { n: 'five' })).toThrow('option n must be a number');
    expect(() => parseOptions(def, { s: 'c' })).toThrow('option s must be one of a,b');
  });
});
