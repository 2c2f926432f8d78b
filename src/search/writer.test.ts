/** The build's writer thread: the same rows as IndexStore.upsert, the job's queue and progress, in order, and nothing after a failure. */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, expect, it } from 'vitest';
import { IndexStore, type IndexRow } from './store.js';
import { BatchWriter, MAX_TX_ROWS } from './writer.js';

let tmp: string;
let store: IndexStore;
let writer: BatchWriter;

const rows = (n: number, parent = '/d', size = 1): IndexRow[] =>
  Array.from({ length: n }, (_, i) => ({ parent, name: `Row ${i} Café.txt`, isDir: false, size }));
const table = (s: IndexStore) => s.db.prepare('SELECT id, parent, name, lname, is_dir, size FROM entries ORDER BY id').all();
const matches = (s: IndexStore, q: string) => s.db.prepare('SELECT rowid FROM names WHERE names MATCH ? ORDER BY rowid').pluck().all(q);

beforeEach(async () => {
  tmp = await mkdtemp(join(tmpdir(), 'tg-search-writer-'));
  store = new IndexStore(join(tmp, 'search.db'));
  store.setState('progress', { obj_count: 0, is_done: false, last_done_time: null, error: '' });
  writer = new BatchWriter(store.file);
});
afterEach(async () => {
  await writer.close();
  store.close();
  await rm(tmp, { recursive: true, force: true });
});

it('writes what IndexStore.upsert writes, with the queue and the progress, batch after batch', async () => {
  const first = [...rows(50), { parent: '/', name: 'd', isDir: true, size: 9 }];
  const second = [...rows(60, '/d', 7), ...rows(20, '/e')]; // fifty updates, thirty new rows (several rows a statement)
  writer.write({ rows: first, enqueue: [{ id: 1, path: '/d', depth: 1 }, { id: 2, path: '/e', depth: 1 }], dequeue: [], count: first.length });
  writer.write({ rows: second, enqueue: [], dequeue: [1], count: second.length });
  await writer.settle();

  const same = new IndexStore(join(tmp, 'same.db'));
  same.upsert(first);
  same.upsert(second);
  expect(table(store)).toEqual(table(same));
  expect(matches(store, '"row 4 caf"')).toEqual(matches(same, '"row 4 caf"'));
  expect(matches(store, '"row 4 caf"')).toHaveLength(2); // /d and /e
  expect(store.count()).toBe(81);
  same.close();
  expect(() => store.db.exec(`INSERT INTO names(names, rank) VALUES ('integrity-check', 1)`)).not.toThrow();
  expect(store.queued()).toEqual([{ id: 2, path: '/e', depth: 1 }]);
  expect(store.getState('progress')).toMatchObject({ obj_count: 131 });
});

it('after a failed batch writes nothing more, and says why', async () => {
  writer.write({ rows: rows(3, '/a'), enqueue: [{ id: 1, path: '/a', depth: 1 }], dequeue: [], count: 0 });
  writer.write({ rows: rows(3, '/b'), enqueue: [{ id: 1, path: '/b', depth: 1 }], dequeue: [], count: 0 }); // queue id taken
  writer.write({ rows: rows(3, '/c'), enqueue: [], dequeue: [], count: 0 });
  await expect(writer.settle()).rejects.toThrow(/UNIQUE/);
  expect(() => writer.write({ rows: [], enqueue: [], dequeue: [], count: 0 })).toThrow(/UNIQUE/);
  expect(store.db.prepare('SELECT DISTINCT parent FROM entries').pluck().all()).toEqual(['/a']);
});

it('writes a batch bigger than one transaction in several, with the queue and the progress in the last', async () => {
  store.enqueue('/taken', 1); // queue id 1
  writer.write({ rows: rows(2 * MAX_TX_ROWS + 10), enqueue: [{ id: 1, path: '/d/sub', depth: 2 }], dequeue: [], count: 2 * MAX_TX_ROWS + 10 });
  await expect(writer.settle()).rejects.toThrow(/UNIQUE/); // the last transaction fails on the queue
  expect(store.count()).toBe(2 * MAX_TX_ROWS); // the first two were written…
  expect(store.getState('progress')).toMatchObject({ obj_count: 0 }); // …without counting them
  expect(store.queued()).toEqual([{ id: 1, path: '/taken', depth: 1 }]);
  expect(() => store.db.exec(`INSERT INTO names(names, rank) VALUES ('integrity-check', 1)`)).not.toThrow();
});
