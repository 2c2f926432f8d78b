/** Helpers for the task and offline download tests (not a test file itself). */
import { spawn, type ChildProcess } from 'node:child_process';
import { createHash } from 'node:crypto';
import { mkdir, mkdtemp, readdir, readFile, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { expect } from 'vitest';
import { ADMIN_PASSWORD, type TestServer } from './harness.js';
import type { TaskInfo } from '../src/tasks/types.js';
import type { Envelope } from '../protocols/rest/envelope.js';

export type Api = Pick<TestServer, 'api'>;

/** Mount a second Local storage at `mount`, rooted at a fresh temp folder; returns that folder. */
export async function addLocalStorage(ts: Api, admin: string, mount: string): Promise<string> {
  const root = await mkdtemp(join(tmpdir(), 'treegate-st-'));
  const r = await ts.api('/api/admin/storage/create', {
    token: admin,
    body: { mount_path: mount, driver: 'Local', order: 0, addition: JSON.stringify({ root_folder_path: root }), cache_expiration: 0 },
  });
  expect(r.code, JSON.stringify(r)).toBe(200);
  return root;
}

/** A storage as the admin API lists it. */
export type StorageRow = Record<string, unknown> & { id: number; mount_path: string; addition: string };

/** The admin API's row of the storage at `mount`. */
export async function storageRow(ts: Api, admin: string, mount: string): Promise<StorageRow> {
  const list = await ts.api<{ content: StorageRow[] }>('/api/admin/storage/list', { token: admin });
  return list.data!.content.find((s) => s.mount_path === mount)!;
}

/** addLocalStorage with the new storage's admin row (for updates); its root joins `roots`, for the caller's cleanup. */
export async function addLocalStorageRow(ts: Api, admin: string, mount: string, roots: string[]): Promise<{ root: string; row: StorageRow }> {
  const root = await addLocalStorage(ts, admin, mount);
  roots.push(root);
  return { root, row: await storageRow(ts, admin, mount) };
}

/** What an admin does to a storage that takes it out of the tree, or (a remark edit) does not. */
export type StorageChange = 'delete' | 'disable' | 'mount path edit' | 'remark edit';

/** Do `what` to the storage `row` over the admin API. */
export async function changeStorage(ts: Api, admin: string, what: StorageChange, row: StorageRow): Promise<void> {
  const post = (path: string, body: unknown = {}) => ts.api(path, { token: admin, body });
  const r = what === 'delete' ? await post(`/api/admin/storage/delete?id=${row.id}`)
    : what === 'disable' ? await post(`/api/admin/storage/disable?id=${row.id}`)
      : what === 'remark edit' ? await post('/api/admin/storage/update', { ...row, remark: 'edited' })
        : await post('/api/admin/storage/update', { ...row, mount_path: `${row.mount_path}-moved` });
  expect(r.code, JSON.stringify(r)).toBe(200);
}

/** Write `n` small files with distinct contents into a host folder. */
export async function makeFiles(dir: string, n: number): Promise<void> {
  await mkdir(dir, { recursive: true });
  for (let i = 0; i < n; i++) await writeFile(join(dir, `f${String(i).padStart(3, '0')}.txt`), `file ${i} ${'x'.repeat(i % 97)}\n`);
}

/** name → sha256 of every file directly in a host folder. */
export async function checksums(dir: string): Promise<Record<string, string>> {
  const out: Record<string, string> = {};
  for (const n of (await readdir(dir)).sort()) out[n] = createHash('sha256').update(await readFile(join(dir, n))).digest('hex');
  return out;
}

export async function tasksOf(ts: Api, token: string, kind: string, which: 'undone' | 'done', admin = false): Promise<TaskInfo[]> {
  const r = await ts.api<TaskInfo[]>(`/api/${admin ? 'admin/' : ''}task/${kind}/${which}`, { token });
  expect(r.code, JSON.stringify(r)).toBe(200);
  return r.data!;
}

/** Poll until `check` returns a value (not undefined), bounded in time. */
export async function until<T>(what: string, check: () => Promise<T | undefined>, timeoutMs = 30_000, everyMs = 100): Promise<T> {
  const end = Date.now() + timeoutMs;
  for (;;) {
    const v = await check();
    if (v !== undefined) return v;
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, everyMs));
  }
}

/** Wait until a kind has no undone task; returns the done list. */
export async function settle(ts: Api, token: string, kind: string, timeoutMs = 60_000): Promise<TaskInfo[]> {
  await until(`${kind} tasks to finish`, async () => ((await tasksOf(ts, token, kind, 'undone')).length === 0 ? true : undefined), timeoutMs, 150);
  return tasksOf(ts, token, kind, 'done');
}

/**
 * Copy `srcDir`/`name` to `dstDir` as a copy task and wait until it settles, or stop it once it has
 * clearly run away (more than 100 tasks: links that loop followed at every level), so a test of a
 * runaway copy is bounded either way. Returns the number of copy tasks it made.
 */
export async function boundedCopy(ts: Api, admin: string, srcDir: string, dstDir: string, name: string, timeoutMs = 60_000): Promise<number> {
  await settle(ts, admin, 'copy');
  expect((await ts.api('/api/task/copy/clear_done', { token: admin, body: {} })).code).toBe(200);
  const r = await ts.api<{ tasks: TaskInfo[] }>('/api/fs/copy', { token: admin, body: { src_dir: srcDir, dst_dir: dstDir, names: [name] } });
  expect(r.code, r.message).toBe(200);
  const root = r.data!.tasks[0]!.id;
  const total = await until('the copy settled or running away', async () => {
    const n = (await tasksOf(ts, admin, 'copy', 'undone')).length;
    const all = n + (await tasksOf(ts, admin, 'copy', 'done')).length;
    return n === 0 || all > 100 ? all : undefined;
  }, timeoutMs, 50);
  if (total > 100) expect((await ts.api(`/api/task/copy/cancel?tid=${root}`, { token: admin, body: {} })).code).toBe(200);
  await settle(ts, admin, 'copy', 120_000);
  return total;
}

/**
 * Hold every VFS put of `path` until release(): an As-Task upload of it then keeps its worker busy
 * (with upload_task_threads_num 1, later uploads wait in the queue). restore() puts vfs.put back.
 */
export function holdPutsOf(ts: TestServer, path: string): { held(): boolean; release(): void; restore(): void } {
  const vfs = ts.running.core.vfs;
  let release!: () => void;
  const gate = new Promise<void>((res) => (release = res));
  let held = false;
  const put = vfs.put.bind(vfs);
  vfs.put = async (ctx, p, ...rest) => {
    if (p === path) {
      held = true;
      await gate;
    }
    return put(ctx, p, ...rest);
  };
  return { held: () => held, release, restore: () => void ((vfs.put = put), release()) };
}

/**
 * Run `fn`, counting the calls of the task store's `method` and the most in flight at once: writes
 * issued together (which the store coalesces) or awaited one by one.
 */
export async function countingStoreCalls(ts: TestServer, method: 'put' | 'delete', fn: () => Promise<unknown>): Promise<{ calls: number; most: number }> {
  const repo = ts.running.core.store.tasks as unknown as Record<typeof method, (arg: never) => Promise<unknown>>;
  const original = repo[method].bind(repo);
  let inFlight = 0;
  let most = 0;
  let calls = 0;
  repo[method] = async (arg: never) => {
    calls++;
    most = Math.max(most, ++inFlight);
    try {
      return await original(arg);
    } finally {
      inFlight--;
    }
  };
  try {
    await fn();
  } finally {
    repo[method] = original;
  }
  return { calls, most };
}

const ROOT = resolve(import.meta.dirname, '..');
/** Runs a TypeScript file of this repo in its own Node process (no build needed). */
export const VITE_NODE = join(ROOT, 'node_modules/vite-node/vite-node.mjs');

export interface ChildRun {
  proc: ChildProcess;
  /** Everything it printed so far (stdout and stderr). */
  output(): string;
  exited: Promise<void>;
  kill9(): Promise<void>;
}

/** `node vite-node <script>` with its stdin a pipe (for step-by-step scripts); output collected. */
export function runTs(script: string, env: Record<string, string | undefined> = process.env): ChildRun {
  const proc = spawn(process.execPath, [VITE_NODE, script], { cwd: ROOT, env, stdio: ['pipe', 'pipe', 'pipe'] });
  let out = '';
  proc.stdout!.on('data', (b: Buffer) => (out += b.toString()));
  proc.stderr!.on('data', (b: Buffer) => (out += b.toString()));
  const exited = new Promise<void>((res) => proc.once('exit', () => res()));
  return {
    proc, output: () => out, exited,
    kill9: async () => {
      proc.kill('SIGKILL');
      await exited;
    },
  };
}

/**
 * A treegate in its own process on `data` (test/tasks-child-server.ts, for kill -9 tests): resolves
 * with its HTTP port once it listens. SFTP is off; `env` adds to the environment.
 */
export async function startChildServer(data: string, env: Record<string, string> = {}): Promise<ChildRun & { port: number }> {
  const run = runTs(join(ROOT, 'test/tasks-child-server.ts'), {
    PATH: process.env.PATH, HOME: process.env.HOME, TREEGATE_DATA: data, TREEGATE_HTTP_ADDRESS: '127.0.0.1', TREEGATE_HTTP_PORT: '0',
    TREEGATE_SFTP_ENABLE: 'false', TREEGATE_ADMIN_PASSWORD: ADMIN_PASSWORD, TREEGATE_LOG_LEVEL: 'warn', ...env,
  });
  const port = await new Promise<number>((res, rej) => {
    const timer = setTimeout(() => rej(new Error(`child did not start: ${run.output()}`)), 60_000);
    const check = () => {
      const m = /PORT (\d+)/.exec(run.output());
      if (m) {
        clearTimeout(timer);
        res(Number(m[1]));
      }
    };
    run.proc.stdout!.on('data', check);
    run.proc.stderr!.on('data', check);
    run.proc.once('exit', (code) => rej(new Error(`child exited (${code}): ${run.output()}`)));
  });
  return { ...run, port };
}

/** The REST API of a server at `url` (a child process) as the helpers above use it. */
export function apiAt(url: string): Api {
  return {
    api: async <T>(path: string, o: { body?: unknown; token?: string } = {}) => {
      const res = await fetch(url + path, {
        method: o.body === undefined ? 'GET' : 'POST',
        headers: { ...(o.token ? { authorization: o.token } : {}), 'content-type': 'application/json' },
        body: o.body === undefined ? undefined : JSON.stringify(o.body),
      });
      return (await res.json()) as Envelope<T>;
    },
  } as Api;
}
