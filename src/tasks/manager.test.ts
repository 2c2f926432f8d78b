/**
 * TaskManager keeps the most recently finished tasks only (keepFinished, retention.ts): a finished
 * task whose descendants still run is kept, since cancel follows the tree through it, and so is one
 * whose ancestors still run. Finishing frees the worker before the state is written.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pino from 'pino';
import { afterEach, beforeEach, expect, it } from 'vitest';
import { Accounts } from '../auth/accounts.js';
import { JsonStore } from '../store/json-store.js';
import { TaskManager, type TaskManagerOptions } from './manager.js';
import { DONE_STATES } from './types.js';

let dir: string;
let store: JsonStore;
let manager: TaskManager | undefined;

beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), 'tg-tasks-'));
  store = await JsonStore.open(join(dir, 'store.json'));
});
afterEach(async () => {
  await manager?.close();
  manager = undefined;
  await store.close();
  await rm(dir, { recursive: true, force: true });
});

const newCreator = () =>
  store.users.insert({ username: 'u', salt: 's', pwd_hash: 'h', pwd_ts: 1, base_path: '/', role: 0, disabled: false, permission: 0, sso_id: '', otp_secret: '' });
const newManager = (opts: Partial<TaskManagerOptions>) => new TaskManager({ store, accounts: new Accounts(store), log: pino({ level: 'silent' }), ...opts });
/** A promise the test resolves when it chooses. */
const gate = () => {
  let release!: () => void;
  const held = new Promise<void>((r) => (release = r));
  return { held, release };
};

/** Polls until `ok`, giving up after 10 s (the assertions that follow then fail with their message). */
const until = async (ok: () => boolean | Promise<boolean>) => {
  for (let i = 0; i < 2000 && !(await ok()); i++) await new Promise((r) => setTimeout(r, 5));
};

it('forgets the oldest finished tasks past keepFinished, in memory and in the store, but not a parent whose child still runs', async () => {
  const creator = await newCreator();
  manager = newManager({ keepFinished: 10, workers: { copy: 4 } });
  const { held, release } = gate();
  manager.register('copy', {
    resumable: false,
    run: async (t) => {
      if (t.args.spawn) await t.spawn('copy', 'child', { hold: true });
      if (t.args.hold) await held;
    },
  });
  await manager.start();
  manager.resume();
  const m = manager;
  const finished = () => m.records().filter((r) => DONE_STATES.has(r.state));

  const parent = await m.create('copy', creator, 'parent', { spawn: true }); // finishes first; its child waits
  await until(() => m.records().length === 2 && DONE_STATES.has(m.get(parent.id)!.state));
  const ids: string[] = [];
  for (let i = 0; i < 30; i++) {
    ids.push((await m.create('copy', creator, `t${i}`, {})).id);
    await until(() => DONE_STATES.has(m.get(ids[i]!)?.state ?? -1));
  }
  await until(() => finished().length <= 11);
  expect(finished().length).toBeLessThanOrEqual(11);
  const kept = finished().map((r) => r.id);
  expect(kept).toContain(parent.id); // its child still runs
  expect(kept).toContain(ids[29]); // the newest stay
  expect(kept).not.toContain(ids[0]);
  await until(async () => (await store.tasks.list()).length === m.records().length);
  expect((await store.tasks.list()).map((r) => r.id).sort()).toEqual(m.records().map((r) => r.id).sort());

  release(); // the child finishes: the parent is now the oldest settled task, and goes in the next clean-up
  for (let i = 30; i < 32; i++) {
    ids.push((await m.create('copy', creator, `t${i}`, {})).id);
    await until(() => DONE_STATES.has(m.get(ids[i]!)?.state ?? -1));
  }
  await until(() => finished().length <= 11);
  expect(finished().map((r) => r.id)).not.toContain(parent.id);
});

it('a finished task frees its worker before its state is written, and the write still lands', async () => {
  const creator = await newCreator();
  manager = newManager({ workers: { copy: 1 } });
  const ran: string[] = [];
  manager.register('copy', { resumable: false, run: async (t) => void ran.push(t.id) });
  await manager.start();
  manager.resume();
  const m = manager;
  // Hold the writes of finished states: one worker that waited for each would run one task.
  const { held, release } = gate();
  const put = store.tasks.put.bind(store.tasks);
  store.tasks.put = async (rec) => {
    if (DONE_STATES.has(rec.state)) await held;
    return put(rec);
  };
  const ids: string[] = [];
  for (let i = 0; i < 3; i++) ids.push((await m.create('copy', creator, `t${i}`, {})).id);
  await until(() => ran.length === 3);
  expect(ran).toEqual(ids);
  expect((await store.tasks.list()).filter((r) => DONE_STATES.has(r.state))).toEqual([]);

  release();
  await m.close(); // waits for the writes in flight
  manager = undefined;
  expect((await store.tasks.list()).map((r) => r.state)).toEqual([2, 2, 2]);
});

it('keeps finished children while their parent still runs (a resumed folder copy skips the entries whose child exists)', async () => {
  const creator = await newCreator();
  manager = newManager({ keepFinished: 10, workers: { copy: 4 } });
  const { held, release } = gate();
  manager.register('copy', {
    resumable: false,
    run: async (t) => {
      if (!t.args.parent) {
        for (let i = 0; i < 30; i++) await t.spawn('copy', `child ${i}`, {});
        await held; // still "making children"
      }
    },
  });
  await manager.start();
  manager.resume();
  const m = manager;
  const parent = await m.create('copy', creator, 'parent', {});
  const children = () => m.records((r) => r.args.parent === parent.id);
  await until(() => children().length === 30 && children().every((c) => DONE_STATES.has(c.state)));
  for (let i = 0; i < 15; i++) {
    const id = (await m.create('copy', creator, `other ${i}`, { parent: 'none' })).id;
    await until(() => DONE_STATES.has(m.get(id)?.state ?? -1));
  }
  expect(children()).toHaveLength(30); // 45 finished, keepFinished 10: the parent's are kept

  release();
  await until(() => DONE_STATES.has(m.get(parent.id)!.state));
  for (let i = 0; i < 15; i++) {
    const id = (await m.create('copy', creator, `late ${i}`, { parent: 'none' })).id;
    await until(() => DONE_STATES.has(m.get(id)?.state ?? -1));
  }
  await until(() => children().length < 30);
  expect(children().length).toBeLessThan(30);
});

it('a retry while a cancelled run is still cleaning up waits for it: one run at a time, and the new run can be cancelled', async () => {
  const creator = await newCreator();
  manager = newManager({ workers: { copy: 4 } });
  const cleanup = gate();
  let runs = 0;
  let running = 0;
  let most = 0;
  manager.register('copy', {
    resumable: false,
    run: async (t) => {
      runs++;
      most = Math.max(most, ++running);
      try {
        await new Promise<void>((_, reject) => t.signal.addEventListener('abort', () => reject(t.signal.reason), { once: true }));
      } finally {
        running--;
      }
    },
    // A slow cleanup (a download tool removing its job): the cancelled run has not ended yet.
    finished: async (rec) => {
      if (rec.state === 4 && runs === 1) await cleanup.held;
    },
  });
  await manager.start();
  manager.resume();
  const m = manager;
  const { id } = await m.create('copy', creator, 'slow', {});
  await until(() => m.get(id)?.state === 1);
  await m.cancel(id);
  const retried = m.retry(id);
  await new Promise((r) => setTimeout(r, 50));
  expect(runs).toBe(1); // not started again while the first run cleans up
  cleanup.release();
  await retried;
  await until(() => runs === 2 && m.get(id)?.state === 1);
  expect(m.get(id)?.state).toBe(1);
  await m.cancel(id);
  await until(() => m.get(id)?.state === 4);
  expect(m.get(id)?.state).toBe(4);
  expect(running).toBe(0);
  expect(most).toBe(1);
});
