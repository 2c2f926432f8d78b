/**
 * Background tasks, follow-up of a code review, each defect shown over the real server: retries
 * lost or overwritten while a task's end (its cleanup, the `finished` hook: a download tool
 * contacted, a temp file removed) or the start-up cleanups still ran, and a cancelled automatic
 * retry still firing. A slow cleanup is held as a slow download tool would hold it.
 */
import { readFile, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import type { TestServer } from './harness.js';
import { ok, startRestServer } from './fs-helpers.js';
import { addLocalStorage, holdPutsOf, settle, until } from './tasks-helpers.js';
import type { KindRunner, TaskInfo } from '../src/tasks/types.js';
import type { TaskManager } from '../src/tasks/manager.js';

let ts: TestServer;
let admin: string;
let bRoot: string;
let m: TaskManager;

beforeAll(async () => {
  ts = await startRestServer();
  admin = await ts.login();
  bRoot = await addLocalStorage(ts, admin, '/b');
  m = ts.running.core.tasks.manager;
});
afterAll(async () => {
  await ts?.close();
  if (bRoot) await rm(bRoot, { recursive: true, force: true });
});
afterEach(async () => {
  await settle(ts, admin, 'copy');
  ok(await ts.api('/api/task/copy/clear_done', { token: admin, body: {} }));
  ok(await ts.api('/api/admin/setting/save', { token: admin, body: [{ key: 'copy_task_threads_num', value: '5' }] }));
});

const copy = async (name: string) => {
  await writeFile(join(ts.dataDir, 'storage', name), `${name}\n`);
  const r = await ts.api<{ tasks: TaskInfo[] } | null>('/api/fs/copy', { token: admin, body: { src_dir: '/', dst_dir: '/b', names: [name] } });
  ok(r);
  return r.data!.tasks[0]!.id;
};
const call = (what: string, id: string) => ts.api(`/api/task/copy/${what}?tid=${id}`, { token: admin, body: {} });
const info = async (id: string) => (await ts.api<TaskInfo>(`/api/task/copy/info?tid=${id}`, { token: admin, body: {} }));

/** Hold the copy kind's end-of-task cleanup (its `finished` hook) until release(). */
function holdCleanups(): { held(): number; release(): void; restore(): void } {
  const runner = (m as unknown as { runners: Map<string, KindRunner> }).runners.get('copy')!;
  const finished = runner.finished;
  let release!: () => void;
  const gate = new Promise<void>((r) => (release = r));
  let held = 0;
  runner.finished = async (rec) => {
    held++;
    await gate;
    await finished?.(rec);
  };
  return { held: () => held, release, restore: () => void ((runner.finished = finished), release()) };
}

/** Puts of `path` run `attempt(n)` first (n from 1): it may hold or throw. */
function scriptPuts(path: string, attempt: (n: number) => Promise<void>): { count(): number; most(): number; restore(): void } {
  const vfs = ts.running.core.vfs;
  const put = vfs.put.bind(vfs);
  let n = 0;
  let inFlight = 0;
  let most = 0;
  vfs.put = async (ctx, p, ...rest) => {
    if (p !== path) return put(ctx, p, ...rest);
    most = Math.max(most, ++inFlight);
    try {
      await attempt(++n);
      return await put(ctx, p, ...rest);
    } finally {
      inFlight--;
    }
  };
  return { count: () => n, most: () => most, restore: () => void (vfs.put = put) };
}

/** Call a manager method through the REST route, resolving once the call reached the manager. */
async function reaching(method: 'retry' | 'removeMany', request: () => Promise<unknown>): Promise<{ pending: Promise<unknown> }> {
  const target = m as unknown as Record<string, (...a: unknown[]) => Promise<void>>;
  const orig = target[method]!.bind(m);
  let asked = false;
  target[method] = (...a: unknown[]) => ((asked = true), orig(...a));
  const pending = request();
  try {
    await until(`${method} at the manager`, async () => (asked ? true : undefined), 10_000, 5);
  } finally {
    target[method] = orig;
  }
  return { pending }; // wrapped: an async function returning the promise itself would wait for it
}

const fatal = () => Object.assign(new Error('refused for good'), { fatal: true });

describe('retry during a task end', () => {
  it('a retry that comes while a failed task is still cleaning up (failing) runs it again, not lost', async () => {
    const puts = scriptPuts('/b/failing.txt', async (n) => {
      if (n === 1) throw fatal();
    });
    const hold = holdCleanups();
    try {
      const id = await copy('failing.txt');
      await until('the failure cleanup', async () => (hold.held() ? true : undefined));
      expect((await info(id)).data!.state).toBe(6); // failing
      const { pending: retried } = await reaching('retry', () => call('retry', id));
      hold.release();
      ok((await retried) as { code: number; message: string });
      await settle(ts, admin, 'copy');
      // Was: the retry saw neither failed nor canceled, did nothing and answered success.
      expect((await info(id)).data).toMatchObject({ state: 2, error: '' });
      expect(await readFile(join(bRoot, 'failing.txt'), 'utf8')).toBe('failing.txt\n');
      expect(puts.count()).toBe(2);
    } finally {
      hold.restore();
      puts.restore();
    }
  });

  it('a retry that comes while a task cancelled in the queue is still cleaning up runs it, not canceled again', async () => {
    ok(await ts.api('/api/admin/setting/save', { token: admin, body: [{ key: 'copy_task_threads_num', value: '1' }] }));
    const busy = holdPutsOf(ts, '/b/busy.txt');
    let hold: ReturnType<typeof holdCleanups> | undefined;
    try {
      await copy('busy.txt');
      await until('the worker busy', async () => (busy.held() ? true : undefined));
      const id = await copy('queued.txt');
      hold = holdCleanups();
      const cancelled = call('cancel', id);
      await until('the cancel cleanup', async () => (hold!.held() ? true : undefined));
      const { pending: retried } = await reaching('retry', () => call('retry', id));
      hold.release();
      ok((await cancelled) as { code: number; message: string });
      ok((await retried) as { code: number; message: string });
      busy.release();
      await settle(ts, admin, 'copy');
      // Was: the cancel's end wrote "canceled" over the retried (queued) task, which never ran.
      expect((await info(id)).data).toMatchObject({ state: 2, error: '' });
      expect(await readFile(join(bRoot, 'queued.txt'), 'utf8')).toBe('queued.txt\n');
    } finally {
      hold?.restore();
      busy.restore();
    }
  });
});

describe('clear_done during the start-up cleanups', () => {
  it('a task retried before clear_done came, both waiting for the start-up cleanups, is kept and runs', async () => {
    const puts = scriptPuts('/b/cleared.txt', async (n) => {
      if (n === 1) throw fatal();
    });
    const state = m as unknown as { cleanups: Promise<void> };
    const before = state.cleanups;
    let release!: () => void;
    // As after a restart whose dropped tasks' cleanups wait on a download tool.
    state.cleanups = new Promise<void>((r) => (release = r));
    try {
      const id = await copy('cleared.txt');
      await until('the copy failed', async () => ((await info(id)).data!.state === 7 ? true : undefined));
      const { pending: retried } = await reaching('retry', () => call('retry', id));
      const { pending: cleared } = await reaching('removeMany', () => ts.api('/api/task/copy/clear_done', { token: admin, body: {} }));
      release();
      ok((await retried) as { code: number; message: string });
      ok((await cleared) as { code: number; message: string });
      await settle(ts, admin, 'copy');
      // Was: clear_done, which picked it while it had failed, cancelled the retried task and deleted it.
      expect((await info(id)).data).toMatchObject({ state: 2, error: '' });
      expect(await readFile(join(bRoot, 'cleared.txt'), 'utf8')).toBe('cleared.txt\n');
    } finally {
      release();
      state.cleanups = before;
      puts.restore();
    }
  });
});

describe('cancel and retry of a task waiting for its automatic retry', () => {
  it('the cancelled wait does not queue it a second time: the next automatic retry still waits its delay', async () => {
    ok(await ts.api('/api/admin/setting/save', { token: admin, body: [{ key: 'copy_task_threads_num', value: '1' }] }));
    let releaseFirst!: () => void;
    const first = new Promise<void>((r) => (releaseFirst = r));
    let releaseThird!: () => void;
    const third = new Promise<void>((r) => (releaseThird = r));
    const puts = scriptPuts('/b/twice.txt', async (n) => {
      if (n === 1) {
        await first;
        throw new Error('flaky storage');
      }
      if (n === 2) throw new Error('flaky storage');
      await third;
    });
    const busy = holdPutsOf(ts, '/b/other.txt');
    try {
      const id = await copy('twice.txt');
      await until('the first attempt', async () => (puts.count() === 1 ? true : undefined));
      await copy('other.txt'); // queued behind it
      releaseFirst();
      await until('its automatic retry waiting', async () => (m.get(id)?.state === 8 ? true : undefined), 10_000, 5);
      ok(await call('cancel', id));
      ok(await call('retry', id)); // queued behind other.txt, held
      // The cancelled wait's timer (1 s) comes and goes while the retried task is queued.
      await new Promise((r) => setTimeout(r, 1500));
      busy.release();
      // The second attempt fails at once: the task waits its delay before the third.
      const seen = await until('the wait after the second attempt, or a third attempt', async () => {
        const r = m.get(id)!;
        if (r.state === 8 && r.retry_count === 1) return 'waiting';
        return puts.count() >= 3 ? 'third attempt' : undefined;
      }, 20_000, 5);
      // Was: queued twice (the old timer too), the copy ran again at once, its delay skipped.
      expect(seen).toBe('waiting');
      expect(puts.count()).toBe(2);
      await until('the third attempt', async () => (puts.count() === 3 ? true : undefined));
      releaseThird();
      await settle(ts, admin, 'copy');
      expect((await info(id)).data).toMatchObject({ state: 2, error: '' });
      expect(puts.most()).toBe(1);
      expect(puts.count()).toBe(3);
    } finally {
      releaseFirst();
      releaseThird();
      busy.restore();
      puts.restore();
    }
  });
});
