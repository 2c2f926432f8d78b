/**
 * The task journal (DATA/tasks.jsonl) against real processes: a treegate killed with SIGKILL while
 * a folder copy spawns, copies and compacts its journal restarts on the same DATA with every task
 * listed once, finishes the copy with equal checksums and leaves no temp file; tasks cleared just
 * before the kill stay cleared; a store.json of an older version holding tasks survives a kill right
 * after its migration; a disk that fills up in the middle of an append fails the change instead of
 * acknowledging a line cut short; an unreadable line is skipped but reported, never silently.
 */
import { execFile, type ChildProcess } from 'node:child_process';
import { mkdtemp, readdir, readFile, rm, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, expect, it } from 'vitest';
import { ADMIN_PASSWORD, startTestServer, type TestServer } from './harness.js';
import { addLocalStorage, apiAt, checksums, makeFiles, runTs, startChildServer, until, type Api } from './tasks-helpers.js';
import type { TaskRecord } from '../src/store/types.js';
import { KV_FILE, TASKS_FILE } from '../src/store/json-store.js';
import { KvJournal } from '../src/store/kv-journal.js';
import { COMPACT_MIN, TaskJournal } from '../src/store/task-journal.js';
import type { TaskInfo } from '../src/tasks/types.js';

const ROOT = resolve(import.meta.dirname, '..');
const children = new Set<ChildProcess>();
const dirs: string[] = [];
let ts: TestServer | undefined;

afterAll(async () => {
  for (const c of children) if (c.exitCode === null && c.signalCode === null) c.kill('SIGKILL');
  await ts?.close();
  for (const d of dirs) await rm(d, { recursive: true, force: true });
});

const tempDir = async (p: string) => {
  const d = await mkdtemp(join(tmpdir(), p));
  dirs.push(d);
  return d;
};

interface Child {
  proc: ChildProcess;
  a: Api;
  token: string;
  output: () => string;
  kill9(): Promise<void>;
}

/** test/tasks-child-server.ts in its own process on `data`; resolves once it is listening, logged in. */
async function startChild(data: string): Promise<Child> {
  const run = await startChildServer(data);
  children.add(run.proc);
  const { proc, port } = run;
  const a = apiAt(`http://127.0.0.1:${port}`);
  const login = await a.api<{ token: string }>('/api/auth/login', { body: { username: 'admin', password: ADMIN_PASSWORD } });
  expect(login.code, JSON.stringify(login)).toBe(200);
  return {
    proc, a, token: login.data!.token, output: run.output, kill9: run.kill9,
  };
}

/** Every copy task the API lists, undone then done; a task seen in both (it finished between the calls) once. */
async function listed(c: Child): Promise<{ tasks: TaskInfo[]; dupsWithinAList: number }> {
  const lists: TaskInfo[][] = [];
  for (const which of ['undone', 'done']) {
    const r = await c.a.api<TaskInfo[]>(`/api/admin/task/copy/${which}`, { token: c.token });
    expect(r.code, JSON.stringify(r)).toBe(200);
    lists.push(r.data!);
  }
  const dupsWithinAList = lists.reduce((n, l) => n + l.length - new Set(l.map((t) => t.id)).size, 0);
  const seen = new Set<string>();
  const tasks = lists.flat().filter((t) => !seen.has(t.id) && (seen.add(t.id), true));
  return { tasks, dupsWithinAList };
}

const journalOf = async (data: string) => {
  const j = await TaskJournal.open(join(data, TASKS_FILE), { readOnly: true });
  const recs = await j.list();
  await j.close();
  return recs;
};
const tempFiles = async (data: string) => (await readdir(data)).filter((n) => n.endsWith('.tmp'));

it('survives kill -9 while spawning, copying and compacting: tasks listed once, copy exact, no temp files, file bounded', async () => {
  const data = await tempDir('tg-jcrash-');
  let c = await startChild(data);
  const bRoot = await addLocalStorage(c.a, c.token, '/b');
  dirs.push(bRoot);
  const srcHost = join(data, 'storage', 'src');
  await makeFiles(srcHost, 1500);
  const original = await checksums(srcHost);
  const r = await c.a.api<{ tasks: TaskInfo[] }>('/api/fs/copy', { token: c.token, body: { src_dir: '/', dst_dir: '/b', names: ['src'] } });
  expect(r.code, JSON.stringify(r)).toBe(200);

  const journal = join(data, TASKS_FILE);
  // Three moments: children being spawned, a compaction's temp file present (or, if none shows up
  // in time, whenever the wait ends: the checks hold either way), and the copy well under way.
  const moments: Array<() => Promise<unknown>> = [
    () => until('children spawned', async () => ((await journalOf(data)).length >= 200 ? true : undefined), 30_000, 5),
    async () => {
      const end = Date.now() + 15_000;
      while (Date.now() < end && !(await tempFiles(data)).some((n) => n.startsWith(`${TASKS_FILE}.`))) await new Promise((res) => setTimeout(res, 1));
    },
    () => until('some copies written', async () => ((await journalOf(data)).filter((t) => t.state === 2).length >= 50 ? true : undefined), 30_000, 5),
  ];
  for (const wait of moments) {
    await wait();
    await c.kill9();
    c = await startChild(data);
    expect(c.output()).not.toMatch(/tasks\.jsonl/);
    // The dead process's compaction temp file is swept at start (the live one's may be in flight).
    expect((await tempFiles(data)).filter((n) => !n.includes(`.${c.proc.pid}.`))).toEqual([]);
    const { tasks, dupsWithinAList } = await listed(c);
    expect(dupsWithinAList).toBe(0);
    // One task per source entry (and the folder's own): a resumed folder task never doubles one.
    const names = tasks.map((t) => t.name);
    expect(names.length - new Set(names).size).toBe(0);
  }

  // Cleared just before a kill: the clear's answer means it is on disk, so it stays cleared.
  await until('some done', async () => ((await listed(c)).tasks.some((t) => t.state === 2) ? true : undefined), 30_000, 20);
  const doneBefore = (await listed(c)).tasks.filter((t) => [2, 4, 7].includes(t.state)).map((t) => t.id);
  const cleared = await c.a.api('/api/admin/task/copy/clear_done', { token: c.token, body: {} });
  expect(cleared.code).toBe(200);
  await c.kill9();
  c = await startChild(data);
  const afterClear = new Set((await listed(c)).tasks.map((t) => t.id));
  expect(doneBefore.filter((id) => afterClear.has(id))).toEqual([]);

  await until('the copy to finish', async () => ((await listed(c)).tasks.every((t) => [2, 4, 7].includes(t.state)) ? true : undefined), 45_000, 100);
  const final = (await listed(c)).tasks;
  expect(final.filter((t) => t.state !== 2).map((t) => `${t.name}: ${t.error}`)).toEqual([]);
  const landed = await checksums(join(bRoot, 'src'));
  for (const n of Object.keys(landed)) if (n.startsWith('.treegate-upload-')) delete landed[n];
  expect(landed).toEqual(original);

  // Bounded: never more than twice what the live records need (or COMPACT_MIN), plus the last batch.
  const live = (await journalOf(data)).reduce((n, t) => n + Buffer.byteLength(JSON.stringify({ put: t })) + 1, 0);
  expect((await stat(journal)).size).toBeLessThanOrEqual(Math.max(COMPACT_MIN, 2 * live) + 256 * 1024);
  await c.kill9();
  expect(await tempFiles(data)).toEqual([]);
}, 120_000);

const rec = (id: string, extra: Partial<TaskRecord> = {}): TaskRecord => ({
  id, kind: 'copy', name: `old ${id}`, creator: 'admin', creator_id: 1, creator_role: 2, state: 2, status: '', progress: 100,
  start_time: null, end_time: '2024-01-01T00:00:00.000Z', total_bytes: 0, error: '', retry_count: 0, args: { src: `/x/${id}`, dst: `/y/${id}` }, ...extra,
});

it('keeps the tasks of an older store.json when killed right after moving them to the journal', async () => {
  const data = await tempDir('tg-jmigrate-');
  const first = await startTestServer({ dataDir: data, env: { TREEGATE_SFTP_ENABLE: 'false' } });
  await first.close();
  const store = JSON.parse(await readFile(join(data, 'store.json'), 'utf8')) as { tasks: TaskRecord[] };
  store.tasks = Array.from({ length: 300 }, (_, i) => rec(`t${i}`));
  await writeFile(join(data, 'store.json'), JSON.stringify(store));

  const c = await startChild(data); // the migration is done before it listens
  await c.kill9();
  const again = await startChild(data);
  const { tasks } = await listed(again);
  expect(tasks.map((t) => t.id).sort()).toEqual(store.tasks.map((t) => t.id).sort());
  await again.kill9();
  expect((JSON.parse(await readFile(join(data, 'store.json'), 'utf8')) as { tasks: unknown[] }).tasks).toEqual([]);
}, 60_000);

it('fails a change whose line a full disk cut short, instead of acknowledging it (RLIMIT_FSIZE)', async () => {
  const dir = await tempDir('tg-jfull-');
  const file = join(dir, TASKS_FILE);
  const script = join(dir, 'fill.mts');
  // Waits for "go" (its file size limit is set meanwhile), then puts ~1 KB records until one fails.
  await writeFile(script, `
    import { TaskJournal } from ${JSON.stringify(join(ROOT, 'src/store/task-journal.ts'))};
    const j = await TaskJournal.open(${JSON.stringify(file)});
    process.stdout.write('READY\\n');
    await new Promise((r) => process.stdin.once('data', r));
    const ok = [];
    for (let i = 0; i < 100; i++) {
      const rec = { id: 'r' + i, kind: 'copy', name: 'n'.repeat(900), creator: 'admin', creator_id: 1, creator_role: 2, state: 2, status: '', progress: 100, start_time: null, end_time: null, total_bytes: 0, error: '', retry_count: 0, args: {} };
      try { await j.put(rec); ok.push(rec.id); } catch (e) { process.stdout.write('FAILED ' + e.code + '\\n'); break; }
    }
    process.stdout.write('OK ' + JSON.stringify(ok) + '\\n');
    process.exit(0);
  `);
  const { proc, output, exited } = runTs(script);
  children.add(proc);
  await until('the writer ready', async () => (output().includes('READY') ? true : undefined), 30_000, 20);
  // 20,000 bytes: 18 lines fit whole, the 19th only in part (as on a disk that fills up).
  await promisify(execFile)('prlimit', ['--pid', String(proc.pid), '--fsize=20000:20000']);
  proc.stdin!.write('go\n');
  await exited;
  expect(output()).toMatch(/FAILED (EFBIG|ENOSPC)/);
  const acknowledged = JSON.parse(/OK (\[.*\])/.exec(output())![1]!) as string[];
  expect(acknowledged.length).toBeGreaterThan(0);
  const onDisk = new Set((await journalOf(dir)).map((t) => t.id));
  expect(acknowledged.filter((id) => !onDisk.has(id))).toEqual([]);
}, 60_000);

it('skips an unreadable line in the middle but says so, naming the file and line, and keeps the file as found', async () => {
  const data = await tempDir('tg-jdamaged-');
  const good = (id: string) => JSON.stringify({ put: rec(id) }) + '\n';
  const text = good('a') + '{"put":{"id":"b","kind":"co\u0000\u0000py"\n' + '{"put":{"id":"c"}}\n' + good('d') + '{"put":{"id":"e","ki';
  await writeFile(join(data, TASKS_FILE), text);
  ts = await startTestServer({ dataDir: data, env: { TREEGATE_SFTP_ENABLE: 'false' } });
  const token = await ts.login();
  const r = await ts.api<TaskInfo[]>('/api/admin/task/copy/done', { token });
  expect(r.data!.map((t) => t.id).sort()).toEqual(['a', 'd']);
  // Lines 2 (a disk error) and 3 (a record without arguments, which stopped the server with
  // "Cannot read properties of undefined") are reported; line 5, cut by a crash, is expected.
  const warned = ts.logs.filter((l) => l.includes(TASKS_FILE) && l.includes('could not be read'));
  expect(warned.join('\n')).toContain(`${join(data, TASKS_FILE)}: lines 2, 3 could not be read`);
  expect(await readFile(join(data, `${TASKS_FILE}.damaged`), 'utf8')).toBe(text);
  await ts.close();
  ts = undefined;
});

it('a change whose write failed is not saved by a later write (a LOCK refused on a full disk does not come back)', async () => {
  const dir = await tempDir('tg-jundo-');
  const file = join(dir, KV_FILE);
  const script = join(dir, 'undo.mts');
  await writeFile(script, `
    import { KvJournal } from ${JSON.stringify(join(ROOT, 'src/store/kv-journal.ts'))};
    const kv = await KvJournal.open(${JSON.stringify(file)});
    const step = () => new Promise((r) => process.stdin.once('data', r));
    await kv.set('webdav.locks', 'A', { token: 'A' });
    process.stdout.write('READY\\n');
    await step(); // the file size limit is set meanwhile
    try { await kv.set('webdav.locks', 'B', { token: 'B', owner: 'x'.repeat(5000) }); process.stdout.write('B SAVED\\n'); }
    catch (e) { process.stdout.write('B FAILED ' + e.code + ' ' + JSON.stringify(await kv.get('webdav.locks', 'B')) + '\\n'); }
    await step(); // and lifted
    await kv.set('webdav.locks', 'C', { token: 'C' });
    process.stdout.write('DONE\\n');
    process.exit(0);
  `);
  const { proc, output, exited } = runTs(script);
  children.add(proc);
  await until('the writer ready', async () => (output().includes('READY') ? true : undefined), 30_000, 20);
  const size = (await stat(file)).size;
  await promisify(execFile)('prlimit', ['--pid', String(proc.pid), `--fsize=${size + 1000}:unlimited`]);
  proc.stdin!.write('go\n');
  await until('B refused', async () => (/B (FAILED|SAVED)/.test(output()) ? true : undefined), 30_000, 20);
  expect(output()).toMatch(/B FAILED (EFBIG|ENOSPC) undefined/); // refused, and not kept in memory either
  await promisify(execFile)('prlimit', ['--pid', String(proc.pid), '--fsize=unlimited:unlimited']);
  proc.stdin!.write('go\n');
  await exited;
  expect(output()).toContain('DONE');
  const kv = await KvJournal.open(file, { readOnly: true });
  expect((await kv.entries('webdav.locks')).map(([k]) => k).sort()).toEqual(['A', 'C']);
}, 60_000);
