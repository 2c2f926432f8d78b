/**
 * WriteHandle against a fake VfsApi whose put() consumes the body slowly: ordering, the reorder
 * buffer, spilling to a temp file, backpressure on acks, and abort leaving nothing behind.
 */
import { mkdtemp, readdir, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Readable } from 'node:stream';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { AccessContext } from '../../src/auth/principal.js';
import { VfsError } from '../../src/errors.js';
import type { Entry, PutOptions, VfsApi } from '../../src/vfs/types.js';
import { MAX_RW } from './openssh-ext.js';
import { REORDER_BUDGET, WriteHandle } from './write-handle.js';

const ctx = { principal: { username: 'u' }, protocol: 'sftp', ip: '127.0.0.1' } as unknown as AccessContext;
let tmp: string;

function fakeVfs(opts: { refuse?: VfsError; slowMs?: number; gate?: Promise<void>; free?: number } = {}) {
  const files = new Map<string, Buffer>();
  const vfs = {
    async usage() {
      return { free: opts.free };
    },
    async put(_c: AccessContext, path: string, body: Readable): Promise<Entry> {
      if (opts.refuse) throw opts.refuse;
      const chunks: Buffer[] = [];
      for await (const c of body as AsyncIterable<Buffer>) {
        chunks.push(c);
        if (opts.gate) await opts.gate; // the consumer stalls until the test opens the gate
        if (opts.slowMs) await new Promise((r) => setTimeout(r, opts.slowMs));
      }
      const data = Buffer.concat(chunks);
      files.set(path, data);
      return { name: path.slice(1), size: data.length, isDir: false, modified: new Date(), vpath: path };
    },
  } as unknown as VfsApi;
  return { vfs, files };
}

const chunk = (i: number, n = 1000) => Buffer.alloc(n, i);
const handle = (vfs: VfsApi) => new WriteHandle(vfs, ctx, '/f', { overwrite: true, append: false, tmpDir: tmp });

beforeEach(async () => {
  tmp = await mkdtemp(join(tmpdir(), 'treegate-wh-'));
});
afterEach(async () => {
  await rm(tmp, { recursive: true, force: true });
});

describe('WriteHandle', () => {
  it('streams sequential and reordered writes into one put', async () => {
    const { vfs, files } = fakeVfs();
    const h = handle(vfs);
    await h.start();
    await Promise.all([3, 1, 0, 2].map((i) => h.write(i * 1000, chunk(i))));
    await h.close();
    expect(files.get('/f')).toEqual(Buffer.concat([0, 1, 2, 3].map((i) => chunk(i))));
    expect(await readdir(tmp)).toEqual([]);
  });

  it('spills far-ahead writes to a temp file and fills holes with zeros', async () => {
    const { vfs, files } = fakeVfs();
    const h = handle(vfs);
    await h.start();
    await h.write(0, chunk(1));
    await h.write(40 << 20, chunk(2)); // beyond the reorder window
    expect((await readdir(tmp)).length).toBe(1);
    await h.close();
    const f = files.get('/f')!;
    expect(f.length).toBe((40 << 20) + 1000);
    expect(f.subarray(0, 1000)).toEqual(chunk(1));
    expect(f.subarray(1000, 40 << 20).every((b) => b === 0)).toBe(true);
    expect(f.subarray(40 << 20)).toEqual(chunk(2));
    expect(await readdir(tmp)).toEqual([]);
  });

  it('refuses rewriting bytes already streamed', async () => {
    const { vfs } = fakeVfs();
    const h = handle(vfs);
    await h.start();
    await h.write(0, chunk(1));
    await expect(h.write(0, chunk(2))).rejects.toMatchObject({ code: 'NOT_SUPPORTED' });
  });

  it('a READ|WRITE handle reads back, rewrites and resizes what it holds; a write-only one refuses', async () => {
    const { vfs, files } = fakeVfs();
    const h = new WriteHandle(vfs, ctx, '/f', { overwrite: true, append: false, tmpDir: tmp, readable: true });
    await h.start();
    await h.write(0, Buffer.from('hello world'));
    expect(String(await h.read(6, 100))).toBe('world');
    await h.write(0, Buffer.from('HELLO')); // rewriting is fine: nothing was handed to the put yet
    expect(String(await h.read(0, 5))).toBe('HELLO');
    expect(await h.read(11, 10)).toBeUndefined(); // EOF
    await h.resize(8);
    expect(String(await h.read(0, 100))).toBe('HELLO wo');
    await h.resize(10); // growing reads as zeros
    expect(await h.read(8, 100)).toEqual(Buffer.alloc(2));
    await h.write(20, Buffer.from('!')); // a hole past the spill file's end, then a byte
    expect(await h.read(18, 10)).toEqual(Buffer.from([0, 0, 33]));
    await h.close();
    expect(files.get('/f')).toEqual(Buffer.concat([Buffer.from('HELLO wo'), Buffer.alloc(12), Buffer.from('!')]));
    expect(await readdir(tmp)).toEqual([]);

    const w = handle(vfs);
    await w.start();
    await w.write(0, chunk(1));
    await expect(w.read(0, 10)).rejects.toMatchObject({ code: 'NOT_SUPPORTED' });
    await expect(w.resize(0)).rejects.toMatchObject({ code: 'NOT_SUPPORTED' });
    await w.close();
    expect(files.get('/f')).toEqual(chunk(1));
  });

  it('a READ on a READ|WRITE handle answers at most one DATA packet, whatever length it asks', async () => {
    const { vfs } = fakeVfs();
    const h = new WriteHandle(vfs, ctx, '/f', { overwrite: true, append: false, tmpDir: tmp, readable: true });
    await h.start();
    await h.write(0, Buffer.alloc(1 << 20, 1));
    expect((await h.read(0, 2 ** 32 - 1))!.length).toBe(MAX_RW);
    await h.close();
  });

  it('out-of-order writes share one memory budget across handles: past it they spill; an abort gives its share back', async () => {
    const { vfs, files } = fakeVfs();
    const budget = { held: 0 };
    const open = async (path: string) => {
      const h = new WriteHandle(vfs, ctx, path, { overwrite: true, append: false, tmpDir: tmp, budget });
      await h.start();
      return h;
    };
    const a = await open('/a');
    await a.write(1000, chunk(1)); // byte 0 missing: held in memory
    expect(budget.held).toBe(1000);
    budget.held = REORDER_BUDGET - 500; // as if other uploads held the rest
    const b = await open('/b');
    await b.write(1000, chunk(2)); // no room left: to a spill file, not memory
    expect(budget.held).toBe(REORDER_BUDGET - 500);
    expect((await readdir(tmp)).length).toBe(1);
    await b.write(0, chunk(3));
    await b.close();
    expect(files.get('/b')).toEqual(Buffer.concat([chunk(3), chunk(2)]));
    budget.held = 1000;
    a.abort();
    await a.settled();
    expect(budget.held).toBe(0);
  });

  it('refuses a write or resize leaving a hole the storage has no room for, and offsets past 2^53', async () => {
    const { vfs, files } = fakeVfs({ free: 100 << 20 });
    const h = handle(vfs);
    await h.start();
    await h.write(0, chunk(1));
    await h.write(60 << 20, chunk(2)); // a 60 MiB hole fits in 100 MiB
    await expect(h.write(2 ** 40, chunk(3))).rejects.toMatchObject({ code: 'NO_SPACE' }); // 1 TiB does not
    await expect(h.write(2 ** 63, chunk(3))).rejects.toMatchObject({ code: 'INVALID' });
    expect(h.size).toBe((60 << 20) + 1000);
    await h.close();
    expect(files.get('/f')!.length).toBe((60 << 20) + 1000);

    const rw = new WriteHandle(vfs, ctx, '/g', { overwrite: true, append: false, tmpDir: tmp, readable: true });
    await rw.start();
    await expect(rw.resize(2 ** 40)).rejects.toMatchObject({ code: 'NO_SPACE' });
    await rw.resize(1 << 20);
    await rw.close();
    expect(files.get('/g')!.length).toBe(1 << 20);
    expect(await readdir(tmp)).toEqual([]);
  });

  it('holds acks while the put is behind (backpressure)', async () => {
    let open!: () => void;
    const gate = new Promise<void>((r) => (open = r));
    const { vfs, files } = fakeVfs({ gate });
    const h = handle(vfs);
    await h.start();
    let acked = 0;
    const big = 1 << 20;
    const writes = Array.from({ length: 16 }, (_, i) => h.write(i * big, Buffer.alloc(big, i)).then(() => acked++));
    // While the consumer is stalled, give the handle every chance to ack more than it should.
    for (let i = 0; i < 20; i++) await new Promise((r) => setImmediate(r));
    await new Promise((r) => setTimeout(r, 20));
    expect(acked).toBeLessThan(16); // 16 MiB cannot all be acked while the consumer is stalled
    open();
    await Promise.all(writes);
    await h.close();
    expect(acked).toBe(16);
    expect(files.get('/f')!.length).toBe(16 * big);
  });

  it('answers OPEN-time refusals from the put and aborts cleanly', async () => {
    const refused = handle(fakeVfs({ refuse: new VfsError('READ_ONLY') }).vfs);
    await expect(refused.start()).rejects.toMatchObject({ code: 'READ_ONLY' });
    const { vfs, files } = fakeVfs();
    const h = handle(vfs);
    await h.start();
    await h.write(0, chunk(1));
    await h.write(50 << 20, chunk(2)); // a spill file exists now
    h.abort();
    await h.settled();
    expect(files.has('/f')).toBe(false);
    expect(await readdir(tmp)).toEqual([]);
    await expect(h.write(1000, chunk(3))).rejects.toBeInstanceOf(Error);
  });

  it('OPEN answers once the put passed its checks (onTarget), before the driver reads the body', async () => {
    let release!: () => void;
    let driverReady = new Promise<void>((r) => (release = r));
    let failAfterTarget = false;
    const got: Buffer[] = [];
    const vfs = {
      async put(_c: AccessContext, path: string, body: Readable, o: PutOptions): Promise<Entry> {
        await new Promise((r) => setTimeout(r, 5)); // the VFS's checks
        o.onTarget?.(false);
        await driverReady; // the driver is slow to start (temp file, remote session…)
        if (failAfterTarget) throw new VfsError('UPSTREAM', 'disk gone');
        for await (const c of body as AsyncIterable<Buffer>) got.push(c);
        return { name: path.slice(1), size: Buffer.concat(got).length, isDir: false, modified: new Date(), vpath: path };
      },
    } as unknown as VfsApi;
    const h = handle(vfs);
    await h.start(); // would hang here if OPEN waited for the first read
    await h.write(0, chunk(1));
    const closing = h.close();
    release();
    await closing;
    expect(Buffer.concat(got)).toEqual(chunk(1));

    // A driver failure after the checks is reported by CLOSE (and nothing is kept).
    failAfterTarget = true;
    driverReady = new Promise<void>((r) => (release = r));
    const bad = handle(vfs);
    await bad.start();
    await bad.write(0, chunk(2));
    const failing = expect(bad.close()).rejects.toMatchObject({ code: 'UPSTREAM' });
    release();
    await failing;
  });
});
