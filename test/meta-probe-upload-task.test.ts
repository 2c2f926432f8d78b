/**
 * An upload into a password-protected folder with the right `Password` header (what AList's web
 * front end sends) must land the same whether it runs at once or as a task (`As-Task: true`): the
 * task's put goes through the VFS again, so it must carry the password the request proved. The
 * password stays in memory (never in the task's arguments or its JSON).
 */
import { afterAll, beforeAll, expect, it } from 'vitest';
import type { TestServer } from './harness.js';
import { addMeta, expectCode, makeUser, mkdir, names, ok, PERM, putFile, startRestServer } from './fs-helpers.js';
import { settle } from './tasks-helpers.js';

let ts: TestServer;
let admin: string;
let ann: string;
const SECRET = 'vault-door-42';

beforeAll(async () => {
  ts = await startRestServer();
  admin = await ts.login();
  ok(await mkdir(ts, admin, '/vault'));
  await addMeta(ts, admin, { path: '/vault', password: SECRET, p_sub: true });
  ann = await makeUser(ts, admin, 'ann', PERM.WRITE);
});
afterAll(async () => ts?.close());

it('a direct upload and a task upload with the password both land', async () => {
  ok(await putFile(ts, ann, '/vault/direct.txt', 'd', { password: SECRET }));
  const r = (await putFile(ts, ann, '/vault/task.txt', 't', { password: SECRET, 'as-task': 'true' })) as { code: number; data: { task: { id: string } } };
  expect(r.code).toBe(200);
  const done = await settle(ts, ann, 'upload');
  expect(done.map((t) => ({ id: t.id, state: t.state, error: t.error }))).toEqual([{ id: r.data.task.id, state: 2, error: '' }]);
  expect(await names(ts, admin, '/vault')).toEqual(['direct.txt', 'task.txt']);
  expect(JSON.stringify(done)).not.toContain(SECRET);
});

it('without the password both are refused before anything is spooled', async () => {
  expectCode(await putFile(ts, ann, '/vault/no.txt', 'n'), 403);
  expectCode(await putFile(ts, ann, '/vault/no-task.txt', 'n', { 'as-task': 'true' }), 403);
  expectCode(await putFile(ts, ann, '/vault/bad-task.txt', 'n', { password: 'wrong', 'as-task': 'true' }), 403);
});
