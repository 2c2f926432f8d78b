/**
 * The store's key-value data (WebDAV locks, dead properties) in kv.jsonl: set, delete and entries
 * survive a reopen, data an older version kept in store.json moves over once, and a read-only store
 * reads it without writing.
 */
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, expect, it } from 'vitest';
import { JsonStore, KV_FILE } from './json-store.js';
import { KvJournal } from './kv-journal.js';

let dir: string;
beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), 'tg-kv-'));
});
afterEach(async () => {
  await rm(dir, { recursive: true, force: true });
});

it('keeps sets and deletes per namespace across a reopen, values copied in and out', async () => {
  const kv = await KvJournal.open(join(dir, KV_FILE));
  const lock = { token: 't1', owner: { who: 'a' } };
  await Promise.all([kv.set('locks', 't1', lock), kv.set('locks', 't2', { token: 't2' }), kv.set('props', '/a', { 'DAV: x': '1' })]);
  lock.owner.who = 'changed after set';
  await kv.set('props', '/a', { 'DAV: x': '2' });
  expect(await kv.delete('locks', 't2')).toBe(true);
  expect(await kv.delete('locks', 't2')).toBe(false);
  await kv.close();

  const again = await KvJournal.open(join(dir, KV_FILE));
  expect(await again.entries('locks')).toEqual([['t1', { token: 't1', owner: { who: 'a' } }]]);
  expect(await again.get('props', '/a')).toEqual({ 'DAV: x': '2' });
  expect(await again.get('props', '/missing')).toBeUndefined();
  expect(await again.entries('none')).toEqual([]);
  const got = (await again.get<{ token: string }>('locks', 't1'))!;
  got.token = 'mutated';
  expect((await again.get<{ token: string }>('locks', 't1'))!.token).toBe('t1');
  await again.close();
});

it('moves the key-value data an older version kept in store.json into kv.jsonl, once', async () => {
  const store = await JsonStore.open(join(dir, 'store.json'));
  await store.close();
  const old = JSON.parse(await readFile(join(dir, 'store.json'), 'utf8')) as { kv: Record<string, Record<string, unknown>> };
  old.kv = { 'webdav-locks': { tok: { token: 'tok', path: '/f' } }, 'webdav-props': { '/f': { a: 1 } } };
  await writeFile(join(dir, 'store.json'), JSON.stringify(old));

  const s = await JsonStore.open(join(dir, 'store.json'));
  expect(await s.kv.entries('webdav-locks')).toEqual([['tok', { token: 'tok', path: '/f' }]]);
  await s.kv.set('webdav-props', '/f', { a: 2 });
  await s.close();
  expect((JSON.parse(await readFile(join(dir, 'store.json'), 'utf8')) as { kv: object }).kv).toEqual({});

  const again = await JsonStore.open(join(dir, 'store.json'));
  expect(await again.kv.get('webdav-props', '/f')).toEqual({ a: 2 });
  expect(await again.kv.entries('webdav-locks')).toEqual([['tok', { token: 'tok', path: '/f' }]]);
  await again.close();
});

it('a read-only store reads kv.jsonl and never writes it', async () => {
  const s = await JsonStore.open(join(dir, 'store.json'));
  await s.kv.set('ns', 'k', 1);
  await s.close();
  const before = await readFile(join(dir, KV_FILE), 'utf8');
  const ro = await JsonStore.open(join(dir, 'store.json'), { readOnly: true });
  expect(await ro.kv.entries('ns')).toEqual([['k', 1]]);
  await expect(ro.kv.set('ns', 'k2', 2)).rejects.toThrow(/read-only/);
  expect(await ro.kv.entries('ns')).toEqual([['k', 1]]);
  await ro.close();
  expect(await readFile(join(dir, KV_FILE), 'utf8')).toBe(before);
});
