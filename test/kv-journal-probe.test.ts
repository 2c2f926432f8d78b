/**
 * WebDAV locks and dead properties on top of their journal (DATA/kv.jsonl), through real servers:
 * - a Windows-Explorer-like session (2,000 files PUT then PROPPATCHed with the Win32 times, some
 *   locked and unlocked, a folder of 1,000 moved, one copied, one deleted) reads back exactly at the
 *   new places after a graceful restart and after kill -9 right after the last acknowledged request,
 *   nothing deleted comes back, no temp file is left and the file stays bounded by its compaction;
 * - the bounds (1,000 live locks per user, 64K characters of dead properties per resource and 8M in
 *   all: 507 past them) hold after a restart too, and a COPY cannot carry the properties past 8M;
 * - a store.json of an older version holding locks and properties in its `kv` moves them over;
 * - a delete and a set of the same key written together leave the set visible.
 */
import type { ChildProcess } from 'node:child_process';
import { mkdtemp, readdir, readFile, rm, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, expect, it } from 'vitest';
import { ADMIN_PASSWORD, startTestServer, type TestServer } from './harness.js';
import { davClient, type DavClient } from './clients/webdav.js';
import { startChildServer } from './tasks-helpers.js';
import { KV_FILE } from '../src/store/json-store.js';
import { KvJournal } from '../src/store/kv-journal.js';
import { LOCKS_NS, MAX_LOCKS_PER_USER, type LockInfo } from '../protocols/webdav/locks.js';
import { MAX_RESOURCE_CHARS, MAX_TOTAL_CHARS, PROPS_NS, type DeadProp } from '../protocols/webdav/dead-props.js';

const children = new Set<ChildProcess>();
const servers = new Set<TestServer>();
const dirs: string[] = [];

afterAll(async () => {
  for (const c of children) if (c.exitCode === null && c.signalCode === null) c.kill('SIGKILL');
  for (const s of servers) await s.running.close().catch(() => undefined);
  for (const d of dirs) await rm(d, { recursive: true, force: true });
});

const tempDir = async (p: string) => {
  const d = await mkdtemp(join(tmpdir(), p));
  dirs.push(d);
  return d;
};
const NO_SFTP = { TREEGATE_SFTP_ENABLE: 'false', TREEGATE_LOG_LEVEL: 'warn' };
async function start(dataDir: string): Promise<{ ts: TestServer; dav: DavClient }> {
  const ts = await startTestServer({ dataDir, env: NO_SFTP });
  servers.add(ts);
  return { ts, dav: davClient(ts.url, 'admin', ADMIN_PASSWORD) };
}
async function stop(ts: TestServer): Promise<void> {
  await ts.running.close();
  servers.delete(ts);
}

/** test/tasks-child-server.ts on `data` in its own process (for kill -9). */
async function startChild(data: string): Promise<{ dav: DavClient; kill9(): Promise<void> }> {
  const run = await startChildServer(data);
  children.add(run.proc);
  return { dav: davClient(`http://127.0.0.1:${run.port}`, 'admin', ADMIN_PASSWORD), kill9: run.kill9 };
}

async function pool<T>(items: readonly T[], n: number, fn: (item: T) => Promise<void>): Promise<void> {
  let i = 0;
  await Promise.all(Array.from({ length: n }, async () => {
    while (i < items.length) await fn(items[i++]!);
  }));
}
const tally = (xs: number[]) => xs.reduce<Record<number, number>>((m, x) => ((m[x] = (m[x] ?? 0) + 1), m), {});

const OLD = 'Tue, 01 Jan 2019 10:00:00 GMT';
/** Explorer's PROPPATCH after a copy; Win32LastAccessTime carries `tag` (Win32LastModifiedTime is answered from the mtime). */
const win32 = (tag: string) =>
  '<?xml version="1.0" encoding="utf-8" ?><D:propertyupdate xmlns:D="DAV:" xmlns:Z="urn:schemas-microsoft-com:"><D:set><D:prop>' +
  `<Z:Win32CreationTime>${OLD}</Z:Win32CreationTime><Z:Win32LastAccessTime>${tag}</Z:Win32LastAccessTime>` +
  `<Z:Win32LastModifiedTime>${OLD}</Z:Win32LastModifiedTime><Z:Win32FileAttributes>00000020</Z:Win32FileAttributes>` +
  '</D:prop></D:set></D:propertyupdate>';
const LOCKINFO =
  '<?xml version="1.0" encoding="utf-8" ?><D:lockinfo xmlns:D="DAV:"><D:lockscope><D:exclusive/></D:lockscope>' +
  '<D:locktype><D:write/></D:locktype><D:owner><D:href>WIN-PC\\bob</D:href></D:owner></D:lockinfo>';
const bigProp = (chars: number, tag = 'v') =>
  `<?xml version="1.0"?><D:propertyupdate xmlns:D="DAV:"><D:set><D:prop><x:big xmlns:x="urn:x">${tag.padEnd(chars, 'a')}</x:big></D:prop></D:set></D:propertyupdate>`;
const tokenOf = (h: unknown) => String(h).replace(/[<>]/g, '');

/** What a compacted kv.jsonl would hold (journal.ts: one put line per live record), and the records. */
async function journalOf(data: string) {
  const kv = await KvJournal.open(join(data, KV_FILE), { readOnly: true });
  const locks = await kv.entries<LockInfo>(LOCKS_NS);
  const props = await kv.entries<DeadProp[]>(PROPS_NS);
  const live = [...kv.journal.values()].reduce((n, e) => n + Buffer.byteLength(JSON.stringify({ put: e }) + '\n'), 0);
  await kv.close();
  return { locks, props, live };
}
const kvSize = async (data: string) => (await stat(join(data, KV_FILE))).size;
const tempFiles = async (data: string) => (await readdir(data)).filter((n) => n.endsWith('.tmp'));

it('a Windows Explorer session of 2,000 files keeps its properties and locks through MOVE, COPY, DELETE, a restart and kill -9', async () => {
  const data = await tempDir('tg-kvprobe-');
  let { ts, dav } = await start(data);
  const layout: Record<string, number> = { A: 10, B: 4, C: 4, D: 2 }; // folders of 100 files
  const files: string[] = [];
  expect((await dav('MKCOL', '/w')).status).toBe(201);
  for (const [top, n] of Object.entries(layout)) {
    expect((await dav('MKCOL', `/w/${top}`)).status).toBe(201);
    for (let i = 0; i < n; i++) {
      expect((await dav('MKCOL', `/w/${top}/s${i}`)).status).toBe(201);
      for (let f = 0; f < 100; f++) files.push(`/w/${top}/s${i}/f${f}.txt`);
    }
  }
  expect(files.length).toBe(2000);
  /** The model: dead property tag by path, live locks token -> path. */
  const props = new Map<string, string>();
  const locks = new Map<string, string>();
  const statuses: number[] = [];
  await pool(files, 8, async (p) => {
    statuses.push((await dav('PUT', p, { body: 'x', headers: { Translate: 'f' } })).status);
    const pp = await dav('PROPPATCH', p, { body: win32(`t0${p}`) });
    statuses.push(pp.status + (/HTTP\/1.1 [45]/.test(pp.body) ? 1000 : 0));
    props.set(p, `t0${p}`);
  });
  expect(tally(statuses)).toEqual({ 201: 2000, 207: 2000 });

  const lockStatuses: number[] = [];
  await pool(files.filter((_, i) => i % 10 === 3), 8, async (p) => {
    const r = await dav('LOCK', p, { headers: { Timeout: 'Second-3600' }, body: LOCKINFO });
    lockStatuses.push(r.status);
    locks.set(tokenOf(r.headers['lock-token']), p);
  });
  let k = 0;
  for (const [t, p] of [...locks]) {
    if (k++ % 2) continue;
    lockStatuses.push((await dav('UNLOCK', p, { headers: { 'Lock-Token': `<${t}>` } })).status);
    locks.delete(t);
  }
  expect(tally(lockStatuses)).toEqual({ 200: 200, 204: 100 });
  const tokenOn = (p: string) => [...locks].find(([, q]) => q === p)?.[0];
  const under = (pre: string) => [...locks].filter(([, p]) => p.startsWith(pre));
  const ifFor = (pre: string) => under(pre).map(([t, p]) => `</dav${p}> (<${t}>)`).join(' ');

  // MOVE the folder of 1,000 (its locks go), COPY another (locks stay behind), DELETE a third.
  expect((await dav('MOVE', '/w/A', { headers: { Destination: '/dav/w/A2', Overwrite: 'F', If: ifFor('/w/A/') } })).status).toBe(201);
  for (const [p, t] of [...props]) if (p.startsWith('/w/A/')) props.delete(p), props.set(p.replace('/w/A/', '/w/A2/'), t);
  for (const [t] of under('/w/A/')) locks.delete(t);
  expect((await dav('COPY', '/w/B', { headers: { Destination: '/dav/w/B2', Overwrite: 'F' } })).status).toBe(201);
  for (const [p, t] of [...props]) if (p.startsWith('/w/B/')) props.set(p.replace('/w/B/', '/w/B2/'), t);
  expect((await dav('DELETE', '/w/C', { headers: { If: ifFor('/w/C/') } })).status).toBe(204);
  for (const p of [...props.keys()]) if (p.startsWith('/w/C/')) props.delete(p);
  for (const [t] of under('/w/C/')) locks.delete(t);
  expect([props.size, locks.size]).toEqual([2000, 30]);

  const folders = () => ['A2', 'B', 'B2', 'D'].flatMap((top) => Array.from({ length: layout[top] ?? layout[top[0]!]! }, (_, i) => `/w/${top}/s${i}/`));
  /** Every dead-property tag and lock the server lists, against the model; the old places are gone. */
  const verify = async (d: DavClient) => {
    const seenProps = new Map<string, string>();
    const seenLocks = new Map<string, string>();
    for (const f of folders()) {
      const r = await d('PROPFIND', f, { headers: { Depth: '1' } });
      expect(r.status).toBe(207);
      for (const resp of r.body.split('<D:response>').slice(1)) {
        const href = decodeURIComponent(/<D:href>([^<]*)</.exec(resp)![1]!).replace(/^\/dav/, '');
        const tag = /<Win32LastAccessTime xmlns="urn:schemas-microsoft-com:">([^<]*)</.exec(resp)?.[1];
        if (tag) seenProps.set(href, tag);
        for (const m of resp.matchAll(/<D:locktoken><D:href>([^<]*)</g)) seenLocks.set(m[1]!, href);
      }
    }
    expect([...seenProps].sort()).toEqual([...props].sort());
    expect([...seenLocks].sort()).toEqual([...locks].sort());
    for (const gone of ['/w/A/', '/w/C/']) expect((await d('PROPFIND', gone, { headers: { Depth: '0' } })).status).toBe(404);
    const [, locked] = [...locks][0]!;
    expect((await d('PUT', locked, { body: 'no token' })).status).toBe(423);
  };
  await verify(dav);

  // A new file where a moved or deleted one was has no properties.
  for (const p of ['/w/A/s0/f0.txt', '/w/C/s1/f5.txt']) {
    const dir = p.slice(0, p.lastIndexOf('/'));
    await dav('MKCOL', dir.slice(0, dir.lastIndexOf('/')));
    expect((await dav('MKCOL', dir)).status).toBe(201);
    expect((await dav('PUT', p, { body: 'new' })).status).toBe(201);
    expect((await dav('PROPFIND', p, { headers: { Depth: '0' } })).body).not.toContain('Win32LastAccessTime xmlns');
    expect((await dav('DELETE', p.split('/').slice(0, 3).join('/'))).status).toBe(204);
  }

  // Another round of PROPPATCHes: the journal grows by about its live size and gets compacted.
  const sizes = [await kvSize(data)];
  const again: number[] = [];
  await pool([...props.keys()], 8, async (p) => {
    const t = tokenOn(p);
    again.push((await dav('PROPPATCH', p, { body: win32(`t1${p}`), headers: t ? { If: `(<${t}>)` } : {} })).status);
    props.set(p, `t1${p}`);
    sizes.push(await kvSize(data));
  });
  expect(tally(again)).toEqual({ 207: 2000 });
  const { live } = await journalOf(data);
  const max = Math.max(...sizes);
  const compactions = sizes.filter((s, i) => i > 0 && s < sizes[i - 1]!).length;
  console.log(`kv.jsonl: ${sizes[0]} bytes before the round, at most ${max}, ${sizes.at(-1)} after it (live ${live}, ${compactions} compaction(s))`);
  expect(compactions).toBeGreaterThan(0);
  expect(max).toBeLessThanOrEqual(2 * live + 64 * 1024);

  // Graceful restart.
  await stop(ts);
  expect(await tempFiles(data)).toEqual([]);
  ({ ts, dav } = await start(data));
  await verify(dav);
  await stop(ts);

  // The last acknowledged changes, then kill -9 at once.
  const child = await startChild(data);
  const last: number[] = [];
  await pool([...props.keys()].filter((p) => p.startsWith('/w/D/')), 8, async (p) => {
    const t = tokenOn(p);
    last.push((await child.dav('PROPPATCH', p, { body: win32(`t2${p}`), headers: t ? { If: `(<${t}>)` } : {} })).status);
    props.set(p, `t2${p}`);
  });
  for (const p of ['/w/D/s0/f0.txt', '/w/D/s1/f1.txt']) {
    const r = await child.dav('LOCK', p, { headers: { Timeout: 'Second-3600' }, body: LOCKINFO });
    last.push(r.status);
    locks.set(tokenOf(r.headers['lock-token']), p);
  }
  const [unlockT, unlockP] = under('/w/B/')[0]!;
  last.push((await child.dav('UNLOCK', unlockP, { headers: { 'Lock-Token': `<${unlockT}>` } })).status);
  locks.delete(unlockT);
  last.push((await child.dav('DELETE', '/w/B2/s3')).status);
  for (const p of [...props.keys()]) if (p.startsWith('/w/B2/s3/')) props.delete(p);
  layout.B2 = 3;
  last.push((await child.dav('PROPPATCH', '/w/D/s1/f7.txt', { body: win32('very last') })).status);
  props.set('/w/D/s1/f7.txt', 'very last');
  await child.kill9();
  expect(tally(last)).toEqual({ 200: 2, 204: 2, 207: 201 });

  ({ ts, dav } = await start(data));
  expect((await dav('PROPFIND', '/w/B2/s3/', { headers: { Depth: '0' } })).status).toBe(404);
  await verify(dav);
  expect(await tempFiles(data)).toEqual([]);
  const after = await journalOf(data);
  expect([after.props.length, after.locks.length]).toEqual([props.size, locks.size]);
  expect(after.props.filter(([p]) => /^\/w\/(A|C|B2\/s3)\//.test(p))).toEqual([]);
  expect(await kvSize(data)).toBeLessThanOrEqual(2 * after.live + 64 * 1024);
  await stop(ts);
}, 60_000);

it('keeps the bounds through the journal and a restart: 1,000 live locks per user, 64K per resource, 8M in all, also for COPY', async () => {
  const data = await tempDir('tg-kvbound-');
  let { ts, dav } = await start(data);
  expect((await dav('MKCOL', '/l')).status).toBe(201);
  const names = Array.from({ length: MAX_LOCKS_PER_USER }, (_, i) => `/l/k${i}`);
  const tokens = new Map<string, string>();
  const got: number[] = [];
  await pool(names, 8, async (p) => {
    const r = await dav('LOCK', p, { body: LOCKINFO }); // a lock-null LOCK: makes the file
    got.push(r.status);
    tokens.set(p, tokenOf(r.headers['lock-token']));
  });
  expect(tally(got)).toEqual({ 201: MAX_LOCKS_PER_USER });
  expect((await dav('LOCK', '/l/one-more', { body: LOCKINFO })).status).toBe(507);

  expect((await dav('MKCOL', '/p')).status).toBe(201);
  expect((await dav('PUT', '/p/one', { body: '' })).status).toBe(201);
  // Counted: namespace (5) + local name (3) + value.
  expect((await dav('PROPPATCH', '/p/one', { body: bigProp(MAX_RESOURCE_CHARS - 8) })).status).toBe(207);
  expect((await dav('PROPPATCH', '/p/one', { body: bigProp(MAX_RESOURCE_CHARS - 7) })).status).toBe(507);
  const files = Array.from({ length: 140 }, (_, i) => `/p/f${i}`);
  const filled: number[] = [];
  await pool(files, 4, async (p) => {
    expect((await dav('PUT', p, { body: '' })).status).toBe(201);
    filled.push((await dav('PROPPATCH', p, { body: bigProp(60_000) })).status);
  });
  expect(tally(filled)[507]).toBeGreaterThan(0);
  const chars = (props: Array<[string, DeadProp[]]>) => props.reduce((n, [, ps]) => n + ps.reduce((m, p) => m + p.ns.length + p.local.length + p.xml.length, 0), 0);
  const filledChars = chars((await journalOf(data)).props);
  expect(filledChars).toBeLessThanOrEqual(MAX_TOTAL_CHARS);
  expect(filledChars).toBeGreaterThan(MAX_TOTAL_CHARS - 2 * 60_000);

  // A COPY of the folder would double them: 507, and the total stays within the bound.
  expect((await dav('COPY', '/p', { headers: { Destination: '/dav/p2' } })).status).toBe(507);
  expect(chars((await journalOf(data)).props)).toBe(filledChars);

  await stop(ts);
  ({ ts, dav } = await start(data));
  // Counts rebuilt from the journal.
  expect((await dav('LOCK', '/l/one-more', { body: LOCKINFO })).status).toBe(507);
  expect((await dav('PROPPATCH', '/p/f0', { body: bigProp(60_000, 'w') })).status).toBe(207); // replaces its own
  expect((await dav('PUT', '/p/new', { body: '' })).status).toBe(201);
  expect((await dav('PROPPATCH', '/p/new', { body: bigProp(60_000) })).status).toBe(507);
  expect((await dav('PROPPATCH', '/p/one', { body: bigProp(MAX_RESOURCE_CHARS - 7) })).status).toBe(507);
  // Room comes back when a lock goes.
  expect((await dav('UNLOCK', '/l/k0', { headers: { 'Lock-Token': `<${tokens.get('/l/k0')}>` } })).status).toBe(204);
  expect((await dav('LOCK', '/l/one-more', { body: LOCKINFO })).status).toBe(201);
  expect((await dav('LOCK', '/l/two-more', { body: LOCKINFO })).status).toBe(507);
  await stop(ts);
}, 40_000);

it('moves the locks and dead properties of an older store.json (kv) into kv.jsonl on first start', async () => {
  const data = await tempDir('tg-kvmig-');
  let { ts, dav } = await start(data);
  expect((await dav('MKCOL', '/mig')).status).toBe(201);
  for (const f of ['a', 'b', 'c']) expect((await dav('PUT', `/mig/${f}.txt`, { body: f })).status).toBe(201);
  await stop(ts);
  await rm(join(data, KV_FILE), { force: true });
  // As the version before kv.jsonl wrote them (locks.ts LockInfo, dead-props.ts DeadProp[]).
  const now = Date.now();
  const lock = (token: string, root: string, expires: number): LockInfo => ({
    root, depth: '0', scope: 'exclusive', owner: '<href xmlns="DAV:">WIN-PC\\bob</href>', userId: 1, timeout: 3600, token, expires,
  });
  const live = 'opaquelocktoken:00000000-0000-4000-8000-000000000001';
  const expired = 'opaquelocktoken:00000000-0000-4000-8000-000000000002';
  const store = JSON.parse(await readFile(join(data, 'store.json'), 'utf8')) as { kv: Record<string, Record<string, unknown>> };
  store.kv = {
    [LOCKS_NS]: { [live]: lock(live, '/mig/a.txt', now + 3_600_000), [expired]: lock(expired, '/mig/c.txt', now - 1000) },
    [PROPS_NS]: {
      '/mig/a.txt': [{ ns: 'urn:x', local: 'color', xml: 'blue' }],
      '/mig/b.txt': [{ ns: 'urn:schemas-microsoft-com:', local: 'Win32LastAccessTime', xml: OLD }],
    },
  };
  await writeFile(join(data, 'store.json'), JSON.stringify(store));

  ({ ts, dav } = await start(data));
  expect((JSON.parse(await readFile(join(data, 'store.json'), 'utf8')) as { kv: object }).kv).toEqual({});
  const a = await dav('PROPFIND', '/mig/a.txt', { headers: { Depth: '0' } });
  expect(a.body).toContain('<color xmlns="urn:x">blue</color>');
  expect(a.body).toContain(live);
  expect((await dav('PROPFIND', '/mig/b.txt', { headers: { Depth: '0' } })).body).toContain(`<Win32LastAccessTime xmlns="urn:schemas-microsoft-com:">${OLD}<`);
  expect((await dav('PUT', '/mig/a.txt', { body: 'no token' })).status).toBe(423);
  expect((await dav('PUT', '/mig/c.txt', { body: 'expired lock' })).status).toBe(204);
  expect((await dav('PUT', '/mig/a.txt', { body: 'token', headers: { If: `(<${live}>)` } })).status).toBe(204);
  expect((await dav('PROPPATCH', '/mig/b.txt', { body: win32('after') })).status).toBe(207);
  expect((await dav('UNLOCK', '/mig/a.txt', { headers: { 'Lock-Token': `<${live}>` } })).status).toBe(204);
  const fresh = await dav('LOCK', '/mig/b.txt', { body: LOCKINFO });
  expect(fresh.status).toBe(200);
  await stop(ts);

  const j = await journalOf(data);
  expect(j.locks.map(([t, l]) => [t, l.root])).toEqual([[tokenOf(fresh.headers['lock-token']), '/mig/b.txt']]);
  expect(j.props.map(([p]) => p).sort()).toEqual(['/mig/a.txt', '/mig/b.txt']);
  ({ ts, dav } = await start(data)); // nothing moves over a second time
  expect((await dav('PUT', '/mig/a.txt', { body: 'unlocked' })).status).toBe(204);
  expect((await dav('PROPFIND', '/mig/b.txt', { headers: { Depth: '0' } })).body).toContain('>after<');
  await stop(ts);
});

it('a delete and a set of the same key written together leave the set in get() and entries()', async () => {
  const dir = await tempDir('tg-kvrace-');
  const kv = await KvJournal.open(join(dir, KV_FILE));
  await kv.set('ns', 'k', 1);
  // A removed resource's properties dropped (follow-changes.ts) while a new file of that name gets some.
  const [gone] = await Promise.all([kv.delete('ns', 'k'), kv.set('ns', 'k', 2)]);
  expect(gone).toBe(true);
  expect(await kv.get('ns', 'k')).toBe(2);
  expect(await kv.entries('ns')).toEqual([['k', 2]]);
  await kv.close();
  const again = await KvJournal.open(join(dir, KV_FILE));
  expect(await again.get('ns', 'k')).toBe(2);
  await again.close();
});
