/** Repo.revision(): what caches derived from the store compare (Accounts' credential cache). */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { JsonStore } from './json-store.js';

let dir: string;
beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), 'tg-store-'));
});
afterEach(async () => {
  await rm(dir, { recursive: true, force: true });
});

const user = (username: string) => ({ username, salt: 's', pwd_hash: 'h', pwd_ts: 1, base_path: '/', role: 0, disabled: false, permission: 0, sso_id: '', otp_secret: '' });

describe('Repo.revision', () => {
  it('changes with every write to its collection, and only its own', async () => {
    const s = await JsonStore.open(join(dir, 'store.json'));
    const seen = new Set([s.users.revision()]);
    const metas = s.metas.revision();
    const { id } = await s.users.insert(user('ann'));
    seen.add(s.users.revision());
    await s.users.update(id, { disabled: true });
    seen.add(s.users.revision());
    await s.users.delete(id);
    seen.add(s.users.revision());
    expect(seen.size).toBe(4);
    expect(s.metas.revision()).toBe(metas);
    const last = s.users.revision();
    await s.users.list(); // reads change nothing
    expect(s.users.revision()).toBe(last);
    await s.close();
  });

  it('changes when another process writes the file', async () => {
    const file = join(dir, 'store.json');
    const watching = await JsonStore.open(file, { watch: true });
    const other = await JsonStore.open(file);
    const before = watching.users.revision();
    const reloaded = new Promise<void>((resolve) => watching.onExternalChange(resolve));
    await other.users.insert(user('bob'));
    await reloaded;
    expect(watching.users.revision()).not.toBe(before);
    expect((await watching.users.findBy('username', 'bob')).length).toBe(1);
    await Promise.all([watching.close(), other.close()]);
  });
});
