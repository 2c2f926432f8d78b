/**
 * Store writes during a folder copy across storages: every task change is a write of the whole
 * store file (and an fsync), so a copy must let changes made together share one write instead of
 * waiting for each in turn (it took ~10 ms per file for 1,000 small files).
 */
import pino from 'pino';
import { afterEach, beforeEach, expect, it } from 'vitest';
import { Accounts } from '../auth/accounts.js';
import { ADMIN_DEFAULT_PERMISSION, ROLE } from '../auth/principal.js';
import type { TaskRecord, UserRecord } from '../store/types.js';
import { body, ctx, makeCore, principal, storage, type TestCore } from '../vfs/testing.js';
import { copyRunner, startCopy } from './copy.js';
import { TaskManager } from './manager.js';
import { DONE_STATES } from './types.js';

const FILES = 150;
let core: TestCore;
let manager: TaskManager | undefined;
let creator: UserRecord;

beforeEach(async () => {
  core = await makeCore();
  for (const path of ['/a', '/b']) await core.storages.create(storage(path));
  const admin = ctx(principal(ADMIN_DEFAULT_PERMISSION));
  for (let i = 0; i < FILES; i++) await core.vfs.put(admin, `/a/dir/f${i}.txt`, body(`file ${i}`));
  creator = await core.store.users.insert({
    username: 'copier', salt: 's', pwd_hash: 'h', pwd_ts: 1, base_path: '/', role: ROLE.ADMIN, disabled: false,
    permission: ADMIN_DEFAULT_PERMISSION, sso_id: '', otp_secret: '',
  });
});
afterEach(async () => {
  await manager?.close();
  manager = undefined;
  await core.cleanup();
});

/** Polls until `ok`, giving up after 10 s (the assertions that follow then fail with their message). */
const until = async (ok: () => boolean) => {
  for (let i = 0; i < 2000 && !ok(); i++) await new Promise((r) => setTimeout(r, 5));
};

it('a folder copy creates its children without waiting for each one to be written', async () => {
  manager = new TaskManager({ store: core.store, accounts: new Accounts(core.store), log: pino({ level: 'silent' }), workers: { copy: 2 } });
  manager.register('copy', copyRunner(core.vfs));
  await manager.start();
  manager.resume();
  const m = manager;
  const asCreator = ctx({ ...principal(ADMIN_DEFAULT_PERMISSION), userId: creator.id, role: ROLE.ADMIN });
  const info = await startCopy(m, core.vfs, asCreator, '/a/dir', '/b/dir');

  // From now on, hold every task write: a parent that awaited each child's write in turn would
  // have made one child when they are released.
  let release!: () => void;
  const held = new Promise<void>((r) => (release = r));
  const put = core.store.tasks.put.bind(core.store.tasks);
  let waiting = 0;
  core.store.tasks.put = async (rec: TaskRecord) => {
    waiting++;
    await held;
    return put(rec);
  };
  const children = () => m.records((r) => r.args.parent === info.id).length;
  await until(() => children() >= 100);
  expect(children()).toBeGreaterThanOrEqual(100);
  expect(waiting).toBeGreaterThan(0);

  release();
  await until(() => children() === FILES && m.records((r) => !DONE_STATES.has(r.state)).length === 0);
  expect(m.records((r) => r.args.parent === info.id && r.state === 2)).toHaveLength(FILES);
  expect((await core.vfs.list(asCreator, '/b/dir')).entries).toHaveLength(FILES);
  await m.close(); // waits for the writes still in flight
  manager = undefined;
  const stored = await core.store.tasks.list();
  expect(stored.filter((r) => r.state === 2)).toHaveLength(FILES + 1);
});
