/** Repo.revision(): what caches derived from the store compare (Accounts' credential cache). */
import { spawn } from 'node:child_process';
import { mkdtemp, readdir, readFile, rename, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { AtomicJsonFile } from './atomic-file.js';
import { JsonStore } from './json-store.js';
import { liveOwner } from './owner.js';

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

describe('a store file that cannot be used', () => {
  const cases: Array<[string, string, RegExp]> = [
    ['not JSON', '{"users": [}', /is not valid JSON/],
    ['null', 'null', /must be a JSON object, found null/],
    ['an array', '[]', /must be a JSON object, found an array/],
    ['users not an array', '{"schema_version":1,"users":"oops"}', /"users" must be an array, found string/],
    ['a user not an object', '{"schema_version":1,"users":[1]}', /"users\[0\]" must be an object/],
    ['a user without username', '{"schema_version":1,"users":[{"id":1}]}', /"users\[0\]\.username" must be a string/],
    ['kv not an object', '{"schema_version":1,"kv":[]}', /"kv" must be an object, found an array/],
    ['a newer schema', '{"schema_version":99}', /schema version 99 is newer/],
  ];
  for (const [what, text, message] of cases) {
    it(`is refused at open, naming the file and left untouched: ${what}`, async () => {
      const file = join(dir, 'store.json');
      await writeFile(file, text);
      const err = await JsonStore.open(file).then(() => undefined, (e: Error) => e);
      expect(err?.message).toMatch(message);
      expect(err?.message).toContain(file);
      expect(await readFile(file, 'utf8')).toBe(text);
    });
  }

  it('a newer schema written while watching is not loaded: reported, the state in memory is kept', async () => {
    const file = join(dir, 'store.json');
    const errors: Error[] = [];
    const s = await JsonStore.open(file, { watch: true, onReloadError: (e) => errors.push(e) });
    await s.users.insert(user('ann'));
    const newer = JSON.stringify({ schema_version: 99, users: 'another shape' });
    await writeFile(join(dir, 'next.json'), newer);
    await rename(join(dir, 'next.json'), file);
    const until = Date.now() + 5_000;
    while (errors.length === 0 && Date.now() < until) await new Promise((r) => setTimeout(r, 20));
    expect(errors[0]?.message).toMatch(/schema version 99 is newer.*state in memory is kept/);
    expect((await s.users.list()).map((u) => u.username)).toEqual(['ann']);
    await s.close();
  });
});

describe('one writer', () => {
  it('open never removes a live process\'s temp file, only a dead one\'s', async () => {
    const file = join(dir, 'store.json');
    const child = spawn('sleep', ['30']);
    const dead = spawn('true');
    await new Promise((r) => dead.once('exit', r));
    const live = `store.json.${child.pid}.1.tmp`;
    const stale = `store.json.${dead.pid}.1.tmp`;
    await writeFile(join(dir, live), '{}');
    await writeFile(join(dir, stale), '{}');
    try {
      await (await JsonStore.open(file)).close();
      const names = await readdir(dir);
      expect(names).toContain(live);
      expect(names).not.toContain(stale);
    } finally {
      child.kill('SIGKILL');
    }
  });

  it('an owner store marks DATA, refuses a second live owner, ignores a stale marker', async () => {
    const file = join(dir, 'store.json');
    const child = spawn('sleep', ['30']);
    try {
      await writeFile(join(dir, 'server.pid'), JSON.stringify({ pid: child.pid, start: null, instance: 'x' }));
      await expect(JsonStore.open(file, { owner: true })).rejects.toThrow(/in use by a running treegate \(pid \d+\)/);
    } finally {
      child.kill('SIGKILL');
      await new Promise((r) => child.once('exit', r));
    }
    const s = await JsonStore.open(file, { owner: true }); // the marker's process is gone now
    expect((await liveOwner(dir))?.pid).toBe(process.pid);
    await s.close();
    expect(await liveOwner(dir)).toBeUndefined();
  });
});

describe('a write that fails', () => {
  /**
   * Makes this process's `n`th store write fail for real: a folder stands where its temp file
   * (`store.json.<pid>.<n>.tmp`) would be opened.
   */
  const failWrite = (file: string, n: number) => import('node:fs/promises').then((fs) => fs.mkdir(`${file}.${process.pid}.${n}.tmp`));

  it('is not kept in memory: the change is gone, with what waited for the next write, and later writes do not save them', async () => {
    const file = join(dir, 'store.json');
    const s = await JsonStore.open(file); // write 1 creates the file
    await s.users.insert(user('kept')); // write 2
    const revision = s.users.revision();
    let told = 0;
    s.onExternalChange(() => told++);
    await failWrite(file, 3);
    const failed = s.users.insert(user('failed')); // write 3 starts at once and fails
    // Let write 3 begin (a few microtasks, no I/O yet): this change waits for write 4.
    for (let i = 0; i < 3; i++) await Promise.resolve();
    const waiting = s.settings.setMany({ waiting: '1' });
    await expect(failed).rejects.toThrow(/EISDIR/);
    await expect(waiting).rejects.toThrow(/not saved: the write before it failed/);
    expect((await s.users.list()).map((u) => u.username)).toEqual(['kept']);
    expect((await s.settings.all()).waiting).toBeUndefined();
    expect(s.users.revision()).not.toBe(revision);
    expect(told).toBe(1);
    await s.users.insert(user('later')); // write 5 works
    await s.close();
    const saved = JSON.parse(await readFile(file, 'utf8')) as { users: Array<{ username: string; id: number }>; settings: Record<string, string> };
    expect(saved.users.map((u) => u.username)).toEqual(['kept', 'later']);
    expect(saved.settings.waiting).toBeUndefined();
  });
});

describe('AtomicJsonFile.read', () => {
  it('does not parse a text the caller holds already (the watcher seeing our own writes)', async () => {
    const file = join(dir, 'x.json');
    await writeFile(file, '{"torn":');
    const f = new AtomicJsonFile<object>(file);
    await expect(f.read()).rejects.toThrow(/not valid JSON/);
    expect(await f.read('{"torn":')).toBeNull();
    expect(f.lastText).toBe('{"torn":');
    await writeFile(file, '{"a":1}');
    expect(await f.read('{"torn":')).toEqual({ a: 1 });
  });
});
