/**
 * Editing, disabling or deleting a storage while transfers run on it: the old driver instance
 * finishes what had started and is dropped after, new requests go to the new instance at once.
 */
import { randomBytes } from 'node:crypto';
import { PassThrough, Readable } from 'node:stream';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { PERM } from '../auth/principal.js';
import { VfsError } from '../errors.js';
import type { CallArgs, Driver, DriverDefinition, Link, Obj, PutArgs, RemoveArgs } from '../../drivers/types.js';
import { memoryDefinition } from '../../drivers/memory/index.js';
import { MemoryDriver } from '../../drivers/memory/memory.js';
import type { StorageRecord } from '../store/types.js';
import { body, ctx, makeCore, principal, storage, type TestCore } from './testing.js';

/** Bytes in 1 KiB chunks: a stream of them lasts as long as its reader makes it. */
function* kibs(b: Buffer): Generator<Buffer> {
  for (let i = 0; i < b.length; i += 1024) yield b.subarray(i, i + 1024);
}

/**
 * Behaves like the remote drivers (SFTP, FTP, WebDAV): the files live in a backend every instance
 * shares, each instance is a connection of its own, and drop() closes it, failing the streams
 * still using it and every later call.
 */
class Connection implements Driver {
  dropped = false;
  /** Driver calls served, to tell which instance a request went to. */
  calls = 0;
  puts = 0;
  private readonly streams = new Set<Readable>();

  constructor(readonly n: number, private readonly backend: MemoryDriver, private readonly events: string[]) {}

  private live(): MemoryDriver {
    if (this.dropped) throw new VfsError('UPSTREAM', 'connection closed');
    this.calls++;
    return this.backend;
  }

  private uses<T extends Readable>(s: T): T {
    this.streams.add(s);
    s.once('close', () => this.streams.delete(s));
    return s;
  }

  async init(): Promise<void> {}

  async drop(): Promise<void> {
    this.dropped = true;
    this.events.push(`drop ${this.n}`);
    for (const s of this.streams) s.destroy(new Error('connection closed'));
  }

  list(dir: Obj): Promise<Obj[]> {
    return this.live().list(dir);
  }

  get(path: string): Promise<Obj> {
    return this.live().get(path);
  }

  mkdir(parent: Obj, name: string, args: CallArgs): Promise<Obj> {
    return this.live().mkdir(parent, name, args);
  }

  remove(obj: Obj, args: RemoveArgs): Promise<void> {
    return this.live().remove(obj, args);
  }

  async link(file: Obj): Promise<Link> {
    const inner = await this.live().link(file);
    if (inner.kind !== 'range') throw new Error('the memory driver links ranges');
    return {
      kind: 'range', size: inner.size,
      open: async (range, signal) => {
        const parts: Buffer[] = [];
        for await (const c of await inner.open(range, signal)) parts.push(c as Buffer);
        return this.uses(Readable.from(kibs(Buffer.concat(parts)), { objectMode: false }));
      },
    };
  }

  put(dir: Obj, stream: Readable, args: PutArgs): Promise<Obj> {
    this.puts++;
    return this.live().put(dir, this.uses(stream), args);
  }
}

describe('a storage replaced or removed while operations run', () => {
  let core: TestCore;
  let instances: Connection[];
  let events: string[];
  let record: StorageRecord;
  const c = ctx(principal(PERM.WRITE | PERM.REMOVE));
  const data = randomBytes(256 * 1024);
  const old = () => instances[0]!;
  const fresh = () => instances[1]!;
  const edit = () => core.storages.update({ ...record, remark: 'edited' });
  const waitFor = (check: () => void) => vi.waitFor(check, { timeout: 10_000, interval: 5 });

  beforeEach(async () => {
    instances = [];
    events = [];
    const backend = new MemoryDriver();
    const remote: DriverDefinition = {
      config: { ...memoryDefinition.config, name: 'Remote', no_cache: false, only_proxy: false },
      options: [],
      create: () => {
        const d = new Connection(instances.length + 1, backend, events);
        instances.push(d);
        return d;
      },
    };
    core = await makeCore([remote]);
    record = (await core.storages.create(storage('/r', 'Remote', { cache_expiration: 30 }))).record;
    await core.vfs.put(c, '/r/f.bin', Readable.from([data]));
  });
  afterEach(() => core.cleanup());

  /** The remaining chunks of an iteration, joined. */
  const rest = async (it: AsyncIterator<Buffer>): Promise<Buffer> => {
    const parts: Buffer[] = [];
    for (let n = await it.next(); !n.done; n = await it.next()) parts.push(n.value);
    return Buffer.concat(parts);
  };

  const openDownload = async () => {
    const r = await core.vfs.read(c, '/r/f.bin');
    r.stream.once('end', () => events.push('end'));
    const it = r.stream[Symbol.asyncIterator]() as AsyncIterator<Buffer>;
    const first = (await it.next()).value as Buffer;
    return { it, first };
  };

  it('a download opened before an update delivers every byte; the old driver is dropped once it ends', async () => {
    const { it, first } = await openDownload();
    await edit();
    expect(instances).toHaveLength(2);
    expect(old().dropped).toBe(false);
    expect(Buffer.concat([first, await rest(it)]).equals(data)).toBe(true);
    await waitFor(() => expect(old().dropped).toBe(true));
    expect(events).toEqual(['end', 'drop 1']);
    expect(fresh().dropped).toBe(false);
  });

  it.each(['update', 'delete'] as const)('an upload started before a storage %s completes and lands', async (change) => {
    const src = new PassThrough();
    const started = old().puts;
    const putting = core.vfs.put(c, '/r/up.bin', src);
    src.write(data.subarray(0, 1000));
    await waitFor(() => expect(old().puts).toBe(started + 1));
    if (change === 'update') await edit();
    else await core.storages.delete(record.id);
    expect(old().dropped).toBe(false);
    src.end(data.subarray(1000));
    expect((await putting).size).toBe(data.length);
    await waitFor(() => expect(old().dropped).toBe(true));
    if (change === 'delete') await core.storages.create(storage('/r', 'Remote'));
    const r = await core.vfs.read(c, '/r/up.bin');
    expect(Buffer.concat(await r.stream.toArray()).equals(data)).toBe(true);
  });

  it('after an update, new requests go to the new instance while the old one drains', async () => {
    const { it } = await openDownload();
    await edit();
    const before = old().calls;
    expect((await core.vfs.stat(c, '/r/f.bin')).size).toBe(data.length);
    expect((await core.vfs.list(c, '/r')).entries.map((e) => e.name)).toEqual(['f.bin']);
    await core.vfs.put(c, '/r/new.txt', body('new'));
    expect(old().calls).toBe(before);
    expect(fresh().calls).toBeGreaterThan(0);
    expect(old().dropped).toBe(false);
    await rest(it);
    await waitFor(() => expect(old().dropped).toBe(true));
  });

  it('after a delete, new requests find nothing while a download still finishes', async () => {
    const { it, first } = await openDownload();
    await core.storages.delete(record.id);
    await expect(core.vfs.stat(c, '/r/f.bin')).rejects.toMatchObject({ code: 'NOT_FOUND' });
    expect(Buffer.concat([first, await rest(it)]).equals(data)).toBe(true);
    await waitFor(() => expect(old().dropped).toBe(true));
  });

  it('an idle storage is dropped before the update returns, as before', async () => {
    await edit();
    expect(old().dropped).toBe(true);
  });

  it('a positional reader keeps the old instance until it is closed', async () => {
    const { reader } = await core.vfs.openReader(c, '/r/f.bin');
    const buf = Buffer.alloc(4096);
    expect(await reader.read(buf, 4096, 0)).toBe(4096);
    await edit();
    expect(await reader.read(buf, 4096, 8192)).toBe(4096); // a new range: a new stream from the old instance
    expect(buf.equals(data.subarray(8192, 8192 + 4096))).toBe(true);
    expect(old().dropped).toBe(false);
    await reader.close();
    await waitFor(() => expect(old().dropped).toBe(true));
  });

  it.each(['stream', 'positional reader'] as const)('a download through an Alias (%s) keeps the target\'s old instance until it ends', async (kind) => {
    await core.storages.create(storage('/a', 'Alias', { addition: JSON.stringify({ paths: '/r' }) }));
    const b = Buffer.alloc(4096);
    let finish: () => Promise<Buffer>;
    if (kind === 'stream') {
      const r = await core.vfs.read(c, '/a/f.bin');
      const it = r.stream[Symbol.asyncIterator]() as AsyncIterator<Buffer>;
      const first = (await it.next()).value as Buffer;
      finish = async () => Buffer.concat([first, await rest(it)]);
    } else {
      const { reader } = await core.vfs.openReader(c, '/a/f.bin');
      expect(await reader.read(b, 4096, 0)).toBe(4096);
      finish = async () => {
        const all = Buffer.alloc(data.length);
        for (let at = 0; at < data.length; ) at += await reader.read(all.subarray(at), Math.min(65536, data.length - at), at);
        await reader.close();
        return all;
      };
    }
    await edit();
    expect(old().dropped).toBe(false);
    expect((await finish()).equals(data)).toBe(true);
    await waitFor(() => expect(old().dropped).toBe(true));
  });

  it('dropAll drops a draining instance at once', async () => {
    const { it } = await openDownload();
    await edit();
    expect(old().dropped).toBe(false);
    await core.mounts.dropAll();
    expect(old().dropped).toBe(true);
    expect(fresh().dropped).toBe(true);
    await expect(rest(it)).rejects.toThrow('connection closed');
  });

  it('what a draining operation lists never lands in the new instance\'s listing cache', async () => {
    const retired = core.mounts.get(record.id)!;
    const { it } = await openDownload();
    await edit();
    const tree = core.vfs.tree;
    const listed = await tree.list(retired, await tree.rootObj(retired, {}), {});
    expect(listed.map((o) => o.name)).toEqual(['f.bin']);
    expect(core.cache.size(record.id)).toBe(0);
    await core.vfs.list(c, '/r');
    expect(core.cache.size(record.id)).toBe(1);
    await rest(it);
  });
});
