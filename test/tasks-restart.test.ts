/**
 * A treegate killed with SIGKILL in the middle of a folder copy: after a restart on the same data
 * dir every task is still listed (finished ones as they were, unfinished ones resumed), the copy
 * completes with equal checksums and the source is intact.
 */
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, expect, it } from 'vitest';
import { ADMIN_PASSWORD, startTestServer, type TestServer } from './harness.js';
import { addLocalStorage, apiAt, checksums, makeFiles, settle, startChildServer, tasksOf, until, type ChildRun } from './tasks-helpers.js';
import { startFileServer, type FileServer } from './offline-helpers.js';
import type { TaskRecord } from '../src/store/types.js';
import { TASKS_FILE } from '../src/store/json-store.js';
import { TaskJournal } from '../src/store/task-journal.js';
import type { TaskInfo } from '../src/tasks/types.js';

let child: ChildRun | undefined;
let ts: TestServer | undefined;
let dataDir = '';
let web: FileServer | undefined;
let bRoot = '';

afterAll(async () => {
  if (child && child.proc.exitCode === null) child.proc.kill('SIGKILL');
  await ts?.close();
  await web?.close();
  if (bRoot) await rm(bRoot, { recursive: true, force: true });
  if (dataDir) await rm(dataDir, { recursive: true, force: true });
});

/** The task records on disk (the journal beside the store), as a restart will read them. */
async function onDisk(): Promise<TaskRecord[]> {
  const j = await TaskJournal.open(join(dataDir, TASKS_FILE), { readOnly: true });
  return j.list();
}

it('lists every task after a kill -9 and a restart, resumes the copy and leaves the source intact', async () => {
  dataDir = await mkdtemp(join(tmpdir(), 'treegate-kill-'));
  const started = await startChildServer(dataDir);
  child = started;
  const a = apiAt(`http://127.0.0.1:${started.port}`);
  const login = await a.api<{ token: string }>('/api/auth/login', { body: { username: 'admin', password: ADMIN_PASSWORD } });
  const admin = login.data!.token;
  bRoot = await addLocalStorage(a, admin, '/b');
  const srcHost = join(dataDir, 'storage', 'src');
  await makeFiles(srcHost, 200);
  const original = await checksums(srcHost);

  // An offline download that never ends: running when the process dies, it cannot be resumed.
  web = await startFileServer({});
  await a.api('/api/admin/setting/save', { token: admin, body: [{ key: 'offline_download_allow_private', value: 'true' }] });
  const dl = await a.api<{ tasks: TaskInfo[] }>('/api/fs/add_offline_download', {
    token: admin, body: { urls: [`${web.url}/endless`], path: '/dl', tool: 'SimpleHttp', delete_policy: 'delete_never' },
  });
  expect(dl.code, JSON.stringify(dl)).toBe(200);
  const dlId = dl.data!.tasks[0]!.id;
  await until('the download running', async () => ((await tasksOf(a, admin, 'offline_download', 'undone'))[0]?.progress === 0 && web!.hits.length ? true : undefined));

  const r = await a.api<{ tasks: TaskInfo[] }>('/api/fs/copy', { token: admin, body: { src_dir: '/', dst_dir: '/b', names: ['src'] } });
  expect(r.code, JSON.stringify(r)).toBe(200);
  // Finished states are written after the worker moves on (manager.ts finish): wait until the file
  // holds a few, so the kill leaves both kinds behind.
  await until('a few files copied and written', async () => {
    const n = (await onDisk()).filter((t) => t.kind === 'copy' && t.state === 2).length;
    return n >= 5 ? n : undefined;
  }, 30_000, 10);
  await child.kill9();

  // What the dead process left on disk: the store holds both finished and unfinished tasks.
  const stored = await onDisk();
  expect(stored.some((t) => t.state === 2)).toBe(true);
  expect(stored.some((t) => t.state !== 2)).toBe(true);

  ts = await startTestServer({ dataDir, env: { TREEGATE_SFTP_ENABLE: 'false' } });
  const admin2 = await ts.login();
  const listed: TaskInfo[] = [];
  for (const kind of ['copy', 'offline_download']) for (const which of ['undone', 'done'] as const) listed.push(...(await tasksOf(ts, admin2, kind, which)));
  const ids = new Set(listed.map((t) => t.id));
  expect(stored.filter((t) => !ids.has(t.id)).map((t) => t.name)).toEqual([]);
  const done = await settle(ts, admin2, 'copy');
  expect(done.filter((t) => t.state !== 2).map((t) => `${t.name}: ${t.error}`)).toEqual([]);
  expect(done.length).toBe(201);
  // A put cut by kill -9 may leave its hidden temp file (never anything under a final name): the
  // API never lists it, and the Local driver sweeps it once stale. Everything else must be exact.
  const landed = await checksums(join(bRoot, 'src'));
  const leftovers = Object.keys(landed).filter((n) => n.startsWith('.treegate-upload-'));
  for (const n of leftovers) delete landed[n];
  expect(landed).toEqual(original);
  const viaApi = await ts.api<{ content: Array<{ name: string }> }>('/api/fs/list', { token: admin2, body: { path: '/b/src' } });
  expect(viaApi.data!.content.map((e) => e.name).sort()).toEqual(Object.keys(original).sort());
  expect(await checksums(srcHost)).toEqual(original);

  const failed = (await tasksOf(ts, admin2, 'offline_download', 'done')).find((t) => t.id === dlId);
  expect(failed).toMatchObject({ state: 7, error: 'interrupted by a restart' });
  // Its temp folder goes in the cleanup the server runs after it started.
  await until('the abandoned download\'s temp folder removed', async () => (await readFile(join(dataDir, 'temp', 'SimpleHttp', dlId)).catch((e: NodeJS.ErrnoException) => e.code)) === 'ENOENT' ? true : undefined);
});
