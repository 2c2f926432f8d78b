/** Unit tests of the WebDAV adapter's pure parts: If header, locks, XML, ranges, Basic auth. */
import { describe, expect, it } from 'vitest';
import type { KvRepo } from '../src/store/store.js';
import { evaluateIf, parseIf, submittedTokens, type ResourceState } from '../protocols/webdav/if-header.js';
import { MAX_NAMED_PROPS, parsePropfind } from '../protocols/webdav/methods/propfind.js';
import { ancestry, LockManager, LOCKS_NS, MAX_LOCKS_PER_USER, MAX_TIMEOUT_S, parseTimeout } from '../protocols/webdav/locks.js';
import { DeadProps, MAX_RESOURCE_CHARS, MAX_TOTAL_CHARS } from '../protocols/webdav/dead-props.js';
import { esc, parseXml, serializeContent } from '../protocols/webdav/xml.js';
import { parseRange } from '../protocols/webdav/methods/get-put.js';
import { parseBasic } from '../protocols/webdav/auth.js';
import { userPathOf, hrefOf } from '../protocols/webdav/request.js';
import { STATUS_BY_CODE, statusOf } from '../protocols/webdav/errors.js';
import { VfsError } from '../src/errors.js';

function memKv(): KvRepo & { data: Map<string, unknown> } {
  const data = new Map<string, unknown>();
  return {
    data,
    get: async <T>(ns: string, k: string) => data.get(`${ns}\0${k}`) as T | undefined,
    set: async (ns, k, v) => void data.set(`${ns}\0${k}`, structuredClone(v)),
    delete: async (ns, k) => data.delete(`${ns}\0${k}`),
    entries: async <T>(ns: string) =>
      [...data].filter(([k]) => k.startsWith(ns + '\0')).map(([k, v]) => [k.slice(ns.length + 1), structuredClone(v) as T] as [string, T]),
  };
}

describe('If header', () => {
  it('parses untagged and tagged lists with Not, tokens and etags', () => {
    expect(parseIf('(<urn:a> ["e1"]) (Not <DAV:no-lock>)')).toEqual([
      { resource: undefined, conditions: [{ not: false, token: 'urn:a' }, { not: false, etag: '"e1"' }] },
      { resource: undefined, conditions: [{ not: true, token: 'DAV:no-lock' }] },
    ]);
    expect(parseIf('<http://h/dav/x> (<urn:a>) <http://h/dav/y> ([W/"e"])')).toEqual([
      { resource: 'http://h/dav/x', conditions: [{ not: false, token: 'urn:a' }] },
      { resource: 'http://h/dav/y', conditions: [{ not: false, etag: 'W/"e"' }] },
    ]);
  });

  it('rejects malformed headers', () => {
    for (const h of ['', '(', '()', '(<a>', '<x>', 'junk', '(<a>) <x> (<b>)', '(Not)']) expect(() => parseIf(h), h).toThrow();
  });

  it('evaluates: any list true, all conditions in a list true', async () => {
    const state = async (): Promise<ResourceState> => ({ tokens: new Set(['urn:t']), etag: '"e"' });
    expect(await evaluateIf(parseIf('(<urn:t> ["e"])'), state)).toBe(true);
    expect(await evaluateIf(parseIf('(<DAV:no-lock> ["e"])'), state)).toBe(false);
    expect(await evaluateIf(parseIf('(<urn:tx>) (Not <DAV:no-lock>)'), state)).toBe(true);
    expect(await evaluateIf(parseIf('(<urn:t> ["x"]) (Not <DAV:no-lock> ["x"])'), state)).toBe(false);
    expect(await evaluateIf(parseIf('([W/"e"])'), state)).toBe(true);
    expect(submittedTokens(parseIf('(<urn:t>) (Not <urn:u>)'))).toEqual(new Set(['urn:t']));
  });
});

describe('locks', () => {
  const base = { depth: 'infinity' as const, scope: 'exclusive' as const, owner: '', userId: 1, timeout: 60 };

  it('covers descendants with depth infinity, only the root with depth 0', async () => {
    const m = new LockManager(memKv());
    const a = await m.create({ ...base, root: '/a' });
    const b = await m.create({ ...base, root: '/b', depth: '0' });
    expect(m.covering('/a/x/y').map((l) => l.token)).toEqual([a.token]);
    expect(m.covering('/ab')).toEqual([]);
    expect(m.covering('/b').map((l) => l.token)).toEqual([b.token]);
    expect(m.covering('/b/x')).toEqual([]);
    expect(m.within('/').length).toBe(2);
    expect(ancestry('/a/b')).toEqual(['/', '/a', '/a/b']);
  });

  it('shared locks coexist, exclusive ones conflict (also with locks below a depth-infinity lock)', async () => {
    const m = new LockManager(memKv());
    await m.create({ ...base, root: '/s', scope: 'shared' });
    await m.create({ ...base, root: '/s', scope: 'shared' });
    await expect(m.create({ ...base, root: '/s' })).rejects.toMatchObject({ code: 'LOCKED' });
    await m.create({ ...base, root: '/p/q/r', depth: '0' });
    await expect(m.create({ ...base, root: '/p' })).rejects.toMatchObject({ code: 'LOCKED' });
    expect(m.conflicts('/p', '0', 'exclusive')).toEqual([]);
  });

  it('persists, refreshes, expires and removes', async () => {
    const kv = memKv();
    let now = 1_000_000;
    const m = new LockManager(kv, () => now);
    const l = await m.create({ ...base, root: '/f', depth: '0' });
    const again = new LockManager(kv, () => now);
    await again.ready();
    expect(again.get(l.token)?.root).toBe('/f');
    now += 59_000;
    await again.refresh(l.token, 60);
    now += 59_000;
    expect(again.covering('/f')).toHaveLength(1);
    now += 2_000;
    expect(again.covering('/f')).toHaveLength(0);
    const l2 = await again.create({ ...base, root: '/g/h' });
    await again.removeWithin('/g');
    expect(again.get(l2.token)).toBeUndefined();
    expect(again.empty).toBe(true);
  });

  it('bounds the live locks of one user (507 past MAX_LOCKS_PER_USER); expired and removed ones free their place', async () => {
    let now = 1_000_000;
    const m = new LockManager(memKv(), () => now);
    const first = await m.create({ ...base, root: '/l/0', depth: '0', timeout: 10 });
    for (let i = 1; i < MAX_LOCKS_PER_USER; i++) await m.create({ ...base, root: `/l/${i}`, depth: '0', timeout: 600 });
    await expect(m.create({ ...base, root: '/l/over', depth: '0' })).rejects.toMatchObject({ status: 507 });
    expect(m.get(first.token)).toBeDefined();
    await m.create({ ...base, root: '/l/other-user', depth: '0', userId: 2 }); // others are not held back
    now += 11_000; // the first one expired: its place is free
    const again = await m.create({ ...base, root: '/l/again', depth: '0' });
    await expect(m.create({ ...base, root: '/l/over', depth: '0' })).rejects.toMatchObject({ status: 507 });
    await m.remove(again.token);
    await m.create({ ...base, root: '/l/after-unlock', depth: '0' });
  });

  it('sweeps expired locks out of memory and the store, at most once a SWEEP_EVERY, when a write asks for any', async () => {
    const kv = memKv();
    let now = 1_000_000;
    const m = new LockManager(kv, () => now);
    await m.create({ ...base, root: '/gone' }); // 60 s
    expect(m.empty).toBe(false); // the first look sweeps (nothing expired); the next sweep is due in 60 s
    now += 61_000;
    expect(m.empty).toBe(true);
    expect(await kv.entries(LOCKS_NS)).toEqual([]);
    await m.create({ ...base, root: '/a', timeout: 30 });
    now += 31_000; // expired, but the last sweep was 31 s ago
    expect(m.empty).toBe(false);
    now += 30_000;
    expect(m.empty).toBe(true);
  });

  it('parses Timeout headers with a cap', () => {
    expect(parseTimeout('Second-120')).toBe(120);
    expect(parseTimeout('Infinite, Second-4100000000')).toBe(MAX_TIMEOUT_S);
    expect(parseTimeout('Second-9999999999')).toBe(MAX_TIMEOUT_S);
    expect(parseTimeout(undefined)).toBe(3600);
  });
});

describe('dead properties', () => {
  it('apply in order, follow moves and copies, vanish on delete', async () => {
    const kv = memKv();
    const p = new DeadProps(kv);
    const prop = (local: string, xml = 'v') => ({ op: 'set' as const, prop: { ns: 'urn:x', local, xml } });
    await p.apply('/a/f', [prop('x'), { op: 'remove', ns: 'urn:x', local: 'x' }, prop('y')]);
    expect(p.get('/a/f').map((d) => d.local)).toEqual(['y']);
    await p.moveTree('/a', '/b');
    expect(p.get('/a/f')).toEqual([]);
    expect(p.get('/b/f')[0]?.local).toBe('y');
    await p.copyTree('/b', '/c');
    await p.removeTree('/b');
    const reloaded = new DeadProps(kv);
    await reloaded.ready();
    expect(reloaded.get('/b/f')).toEqual([]);
    expect(reloaded.get('/c/f')[0]?.xml).toBe('v');
  });

  it('are bounded per resource and in all (NO_SPACE, which WebDAV answers 507), counted again after a restart', async () => {
    const kv = memKv();
    const p = new DeadProps(kv);
    const set = (local: string, chars: number) => ({ op: 'set' as const, prop: { ns: 'urn:x', local, xml: 'v'.repeat(chars) } });
    await p.apply('/f', [set('a', 100)]);
    await expect(p.apply('/f', [set('b', MAX_RESOURCE_CHARS)])).rejects.toMatchObject({ code: 'NO_SPACE' });
    expect(p.get('/f').map((d) => d.local)).toEqual(['a']); // all or nothing
    await p.apply('/f', [set('a', MAX_RESOURCE_CHARS - 100)]); // replacing a value counts once
    const each = MAX_RESOURCE_CHARS - 100;
    let i = 0;
    while ((i + 2) * each <= MAX_TOTAL_CHARS) await p.apply(`/g${i++}`, [set('a', each - 10)]);
    const reloaded = new DeadProps(kv);
    await reloaded.ready();
    await expect(reloaded.apply('/last', [set('a', each)])).rejects.toMatchObject({ code: 'NO_SPACE' });
    await reloaded.removeTree('/g0'); // a DELETE gives the room back
    await reloaded.apply('/last', [set('a', each)]);
    expect(STATUS_BY_CODE.NO_SPACE).toBe(507);
  });

  it('count each resource\'s path too: many long paths with one tiny property each reach the bound', async () => {
    const p = new DeadProps(memKv());
    const dir = '/' + 'd'.repeat(600);
    const tiny = [{ op: 'set' as const, prop: { ns: 'Z:', local: 'a', xml: '' } }];
    let stored = 0;
    for (;;) {
      const r = await p.apply(`${dir}/f${stored}`, tiny).then(() => true, (e: unknown) => (expect(e).toMatchObject({ code: 'NO_SPACE' }), false));
      if (!r) break;
      stored++;
    }
    expect(stored).toBeGreaterThan(1000);
    expect(stored).toBeLessThan(MAX_TOTAL_CHARS / 600); // each counted by its path: ~12,000, not 1.4 million
  });
});

describe('XML', () => {
  it('resolves namespaces and refuses bad ones, DTDs and junk', () => {
    const e = parseXml('<D:propfind xmlns:D="DAV:"><D:prop><x:a xmlns:x="urn:x"/><b xmlns=""/></D:prop></D:propfind>');
    expect([e.ns, e.local]).toEqual(['DAV:', 'propfind']);
    for (const bad of ['<foo>', '<a:b/>', '<D:a xmlns:D="DAV:"><x:b xmlns:x=""/></D:a>', '<!DOCTYPE a [<!ENTITY e "x">]><a>&e;</a>', '<a/><b/>']) {
      expect(() => parseXml(bad), bad).toThrow();
    }
  });

  it('keeps property values self-contained and decodes character references', () => {
    const e = parseXml(`<p xmlns="urn:p"><v><t:x xmlns:t="urn:t" t:at="1">&#65536;&amp;</t:x>text</v></p>`);
    const v = e.children[0] as Parameters<typeof serializeContent>[0];
    expect(serializeContent(v)).toBe('<x xmlns="urn:t" xmlns:a0="urn:t" a0:at="1">\u{10000}&amp;</x>text');
    expect(esc('a<b&"\u0001')).toBe('a&lt;b&amp;&quot;\ufffd');
  });
});

describe('paths, ranges, auth, statuses', () => {
  it('maps URLs to user paths and back', () => {
    expect(userPathOf('/dav/a%20b/c?x=1')).toBe('/a b/c');
    expect(userPathOf('http://h:1/dav/')).toBe('/');
    expect(userPathOf('/other')).toBeUndefined();
    expect(() => userPathOf('/dav/%2e%2e/x')).toThrow();
    expect(() => userPathOf('/dav/%zz')).toThrow();
    expect(hrefOf('/a b/ü', true)).toBe('/dav/a%20b/%C3%BC/');
    // Behind a proxy at a sub-path (site_url https://nas/tg): hrefs carry it, Destinations may too.
    expect(hrefOf('/x', false, '/tg')).toBe('/tg/dav/x');
    expect(userPathOf('https://nas/tg/dav/x%20y', '/tg')).toBe('/x y');
    expect(userPathOf('/dav/x', '/tg')).toBe('/x');
  });

  it('PROPFIND answers each named property once, and refuses more than MAX_NAMED_PROPS distinct names', () => {
    const body = (props: string) => `<?xml version="1.0"?><D:propfind xmlns:D="DAV:" xmlns:Z="urn:z"><D:prop>${props}</D:prop></D:propfind>`;
    expect(parsePropfind(body('<D:getetag/><Z:x/><D:getetag/><Z:x/>'.repeat(1000)))).toEqual({
      kind: 'prop', names: [{ ns: 'DAV:', local: 'getetag' }, { ns: 'urn:z', local: 'x' }],
    });
    const many = (n: number) => body(Array.from({ length: n }, (_, i) => `<Z:p${i}/>`).join(''));
    expect(parsePropfind(many(MAX_NAMED_PROPS))).toMatchObject({ kind: 'prop' });
    expect(() => parsePropfind(many(MAX_NAMED_PROPS + 1))).toThrow(expect.objectContaining({ status: 400 }));
  });

  it('parses single byte ranges', () => {
    expect(parseRange('bytes=0-9', 100)).toEqual({ start: 0, end: 9 });
    expect(parseRange('bytes=90-', 100)).toEqual({ start: 90, end: 99 });
    expect(parseRange('bytes=-10', 100)).toEqual({ start: 90, end: 99 });
    expect(parseRange('bytes=95-200', 100)).toEqual({ start: 95, end: 99 });
    expect(parseRange('bytes=100-', 100)).toBe('bad');
    expect(parseRange('bytes=0-1,5-6', 100)).toBeUndefined();
    expect(parseRange('bytes=0-1', 0)).toBeUndefined();
  });

  it('parses Basic credentials (passwords may hold colons)', () => {
    const h = 'Basic ' + Buffer.from('u:p:w').toString('base64');
    expect(parseBasic(h)).toEqual({ username: 'u', password: 'p:w' });
    expect(parseBasic('Bearer x')).toBeUndefined();
  });

  it('maps every VFS code, with 412 for EXISTS on COPY/MOVE', () => {
    expect(STATUS_BY_CODE.PASSWORD_REQUIRED).toBe(403);
    expect(statusOf(new VfsError('EXISTS'), 'MKCOL')).toBe(405);
    expect(statusOf(new VfsError('EXISTS'), 'MOVE')).toBe(412);
    expect(statusOf(new Error('x'))).toBe(500);
  });
});
