/**
 * Background tasks, second pass (code review), each defect shown over the real server: a retry
 * lost while its task was still cancelling, and a folder copy following links that loop back
 * (a Local storage listed them as folders, so the copy spawned tasks without end).
 */
import { mkdir, readdir, readFile, rm, symlink, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { TestServer } from './harness.js';
import { ok, startRestServer } from './fs-helpers.js';
import { addLocalStorage, boundedCopy, holdPutsOf, settle, until } from './tasks-helpers.js';
import type { TaskInfo } from '../src/tasks/types.js';

let ts: TestServer;
let admin: string;
let bRoot: string;

beforeAll(async () => {
  ts = await startRestServer();
  admin = await ts.login();
  bRoot = await addLocalStorage(ts, admin, '/b');
});
afterAll(async () => {
  await ts?.close();
  if (bRoot) await rm(bRoot, { recursive: true, force: true });
});

const copy = (src_dir: string, dst_dir: string, names: string[]) =>
  ts.api<{ tasks: TaskInfo[] } | null>('/api/fs/copy', { token: admin, body: { src_dir, dst_dir, names } });
const info = async (id: string) => (await ts.api<TaskInfo>(`/api/task/copy/info?tid=${id}`, { token: admin, body: {} })).data!;

describe('retry', () => {
  it('a retry that comes while a cancelled copy is still stopping (canceling) runs the copy again, not lost', async () => {
    await writeFile(join(ts.dataDir, 'storage', 'slow.txt'), 'slow to stop\n');
    // The put does not notice the cancel at once (a remote storage still closing its upload).
    const hold = holdPutsOf(ts, '/b/slow.txt');
    try {
      const r = await copy('/', '/b', ['slow.txt']);
      ok(r);
      const id = r.data!.tasks[0]!.id;
      await until('the copy in its put', async () => (hold.held() ? true : undefined));
      ok(await ts.api(`/api/task/copy/cancel?tid=${id}`, { token: admin, body: {} }));
      expect((await info(id)).state).toBe(3); // canceling: the work has not stopped yet
      const m = ts.running.core.tasks.manager;
      const retry = m.retry.bind(m);
      let asked = false;
      m.retry = (tid) => ((asked = true), retry(tid));
      const retried = ts.api(`/api/task/copy/retry?tid=${id}`, { token: admin, body: {} });
      await until('the retry at the manager', async () => (asked ? true : undefined), 10_000, 5);
      m.retry = retry;
      hold.release();
      ok(await retried);
      await settle(ts, admin, 'copy');
      // Was: the retry found the task canceling, did nothing and answered success; the task then
      // ended canceled and the file was never copied.
      expect(await info(id)).toMatchObject({ state: 2, error: '' });
      expect(await readFile(join(bRoot, 'slow.txt'), 'utf8')).toBe('slow to stop\n');
    } finally {
      hold.restore();
    }
  });
});

describe('folder copies', () => {
  it('a source folder holding links that loop back is copied once, not followed into 2^depth tasks', async () => {
    const src = join(ts.dataDir, 'storage', 'loopy');
    await mkdir(join(src, 'sub'), { recursive: true });
    await writeFile(join(src, 'f.txt'), 'once\n');
    // Inside the root, so a Local storage follows them: to the folder itself, to its parent, to the root.
    await symlink(src, join(src, 'a'));
    await symlink('..', join(src, 'b'));
    await symlink('../..', join(src, 'sub', 'up'));
    // Two folders linking to each other (twice): each link alone leads elsewhere, followed twice it loops.
    for (const [from, to] of [['x', 'y'], ['y', 'x']]) {
      await mkdir(join(src, from));
      await writeFile(join(src, from, `${from}.txt`), from);
      await symlink(`../${to}`, join(src, from, 'l1'));
      await symlink(`../${to}`, join(src, from, 'l2'));
    }
    // Bounded: settled, or clearly running away (then stopped, so the server can be closed).
    const total = await boundedCopy(ts, admin, '/', '/b', 'loopy', 30_000);
    // Was: thousands of tasks within seconds (the links followed at every level, until ELOOP).
    const copied = (await readdir(join(bRoot, 'loopy'), { recursive: true })).sort();
    expect(copied).toEqual([
      'f.txt', 'sub', 'x', 'x/l1', 'x/l1/y.txt', 'x/l2', 'x/l2/y.txt', 'x/x.txt', 'y', 'y/l1', 'y/l1/x.txt', 'y/l2', 'y/l2/x.txt', 'y/y.txt',
    ]);
    expect(total).toBe(copied.length + 1); // a task per entry, and the folder's own
  });
});
