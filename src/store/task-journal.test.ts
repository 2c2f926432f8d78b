/**
 * The task journal (tasks.jsonl): changes survive a reopen, a line cut by a crash is ignored and
 * the file made clean, the file is compacted once it is mostly dead lines, and tasks an older
 * version kept in store.json move into it once.
 */
import { appendFile, mkdtemp, readFile, rm, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, expect, it } from 'vitest';
import { JsonStore, TASKS_FILE } from './json-store.js';
import { COMPACT_MIN, TaskJournal } from './task-journal.js';
import type { TaskRecord } from './types.js';

let dir: string;
let file: string;
beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), 'tg-journal-'));
  file = join(dir, TASKS_FILE);
});
afterEach(async () => {
  await rm(dir, { recursive: true, force: true });
});

const task = (id: string, extra: Partial<TaskRecord> = {}): TaskRecord => ({
  id, kind: 'copy', name: `copy ${id}`, creator: 'admin', creator_id: 1, creator_role: 2, state: 0, status: '', progress: 0,
  start_time: null, end_time: null, total_bytes: 0, error: '', retry_count: 0, args: { src: `/a/${id}`, dst: `/b/${id}` }, ...extra,
});
const ids = async (j: TaskJournal) => (await j.list()).map((r) => `${r.id}:${r.state}`).sort();

it('keeps puts and deletes across a reopen, the last change of a record winning', async () => {
  const j = await TaskJournal.open(file);
  await Promise.all([j.put(task('a')), j.put(task('b')), j.put(task('c'))]);
  await j.put(task('a', { state: 2 }));
  expect(await j.delete('b')).toBe(true);
  expect(await j.delete('b')).toBe(false);
  await j.close();
  expect((await stat(file)).mode & 0o777).toBe(0o600);

  const again = await TaskJournal.open(file);
  expect(await ids(again)).toEqual(['a:2', 'c:0']);
  expect(await again.get('c')).toEqual(task('c'));
  await again.close();
});

it('ignores a line cut short by a crash, and the next write leaves a clean file', async () => {
  const j = await TaskJournal.open(file);
  await j.put(task('a'));
  await j.put(task('b'));
  await j.close();
  await appendFile(file, '{"put":{"id":"c","kind":"co'); // the process died mid-append

  const again = await TaskJournal.open(file);
  expect(await ids(again)).toEqual(['a:0', 'b:0']);
  await again.put(task('d'));
  await again.close();
  const lines = (await readFile(file, 'utf8')).split('\n');
  expect(lines.pop()).toBe('');
  expect(lines.map((l) => (JSON.parse(l) as { put: TaskRecord }).put.id).sort()).toEqual(['a', 'b', 'd']);
});

it('compacts the file once it is mostly lines of earlier states', async () => {
  const j = await TaskJournal.open(file);
  const big = 'x'.repeat(4000);
  for (let i = 0; i < 600; i++) await j.put(task('only', { progress: i % 100, error: big }));
  await j.close();
  // 600 lines of ~4 KB each (2.4 MB) without compaction; with it, never much over COMPACT_MIN.
  expect((await stat(file)).size).toBeLessThan(COMPACT_MIN + 10_000);
  const again = await TaskJournal.open(file);
  expect((await again.list()).map((r) => r.progress)).toEqual([599 % 100]);
  await again.close();
});

it('moves the tasks an older version kept in store.json into the journal, once', async () => {
  const store = await JsonStore.open(join(dir, 'store.json'));
  await store.close();
  const old = JSON.parse(await readFile(join(dir, 'store.json'), 'utf8')) as { tasks: TaskRecord[] };
  old.tasks = [task('x', { state: 2 }), task('y')];
  await writeFile(join(dir, 'store.json'), JSON.stringify(old));

  const s = await JsonStore.open(join(dir, 'store.json'));
  expect((await s.tasks.list()).map((r) => r.id).sort()).toEqual(['x', 'y']);
  await s.tasks.put(task('y', { state: 1 }));
  await s.close();
  expect((JSON.parse(await readFile(join(dir, 'store.json'), 'utf8')) as { tasks: TaskRecord[] }).tasks).toEqual([]);

  const again = await JsonStore.open(join(dir, 'store.json'));
  expect(await ids(again.tasks as TaskJournal)).toEqual(['x:2', 'y:1']);
  await again.close();
});

it('a read-only store reads the journal and never writes it', async () => {
  const s = await JsonStore.open(join(dir, 'store.json'));
  await s.tasks.put(task('a'));
  await s.close();
  const before = await readFile(file, 'utf8');
  const ro = await JsonStore.open(join(dir, 'store.json'), { readOnly: true });
  expect((await ro.tasks.list()).map((r) => r.id)).toEqual(['a']);
  await expect(ro.tasks.put(task('b'))).rejects.toThrow(/read-only/);
  await ro.close();
  expect(await readFile(file, 'utf8')).toBe(before);
});
