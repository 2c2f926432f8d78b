import { randomBytes } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import type { AccessContext } from '../../src/auth/principal.js';
import type { PositionalReader } from '../../src/vfs/positional.js';
import type { VfsApi } from '../../src/vfs/types.js';
import { ReadHandle } from './read-handle.js';

const DATA = randomBytes(1_000_000);

/** A VFS with just openReader, over DATA in memory, counting reads. */
function fakeVfs() {
  const reads: number[] = [];
  const reader: PositionalReader = {
    read: async (buf, length, position) => {
      reads.push(position);
      return DATA.copy(buf, 0, Math.min(position, DATA.length), Math.min(position + length, DATA.length));
    },
    close: async () => undefined,
  };
  const vfs = { openReader: async () => ({ entry: { name: 'f', isDir: false, size: DATA.length, modified: new Date() }, reader }) };
  return { vfs: vfs as unknown as VfsApi, reads };
}
const ctx = {} as AccessContext;

describe('ReadHandle', () => {
  it('serves exact spans, EOF past the end, and reuses a released buffer', async () => {
    const { vfs } = fakeVfs();
    const h = await ReadHandle.open(vfs, ctx, '/f');
    const a = (await h.read(0, 32_768))!;
    expect(a.equals(DATA.subarray(0, 32_768))).toBe(true);
    h.release(a);
    h.release(a); // twice: must not put the buffer in the pool twice
    const b = (await h.read(32_768, 32_768))!;
    const c = (await h.read(65_536, 32_768))!;
    expect(b.buffer).toBe(a.buffer); // reused
    expect(c.buffer).not.toBe(b.buffer); // b not released yet: c must not share its memory
    expect(b.equals(DATA.subarray(32_768, 65_536)) && c.equals(DATA.subarray(65_536, 98_304))).toBe(true);
    expect((await h.read(DATA.length - 5, 100))!.equals(DATA.subarray(DATA.length - 5))).toBe(true);
    expect(await h.read(DATA.length, 100)).toBeNull();
    h.close();
    expect(await h.read(0, 10)).toBeNull();
  });

  it('serves a reordered burst in offset order, the continuing read first', async () => {
    const { vfs, reads } = fakeVfs();
    const h = await ReadHandle.open(vfs, ctx, '/f');
    await h.read(0, 100);
    const got = await Promise.all([h.read(300, 100), h.read(100, 100), h.read(200, 100)]);
    // 300 is served at once (nothing else queued yet); then the lowest offset, then the one continuing it.
    expect(reads).toEqual([0, 300, 100, 200]);
    expect([got[0]!.equals(DATA.subarray(300, 400)), got[1]!.equals(DATA.subarray(100, 200)), got[2]!.equals(DATA.subarray(200, 300))]).toEqual([true, true, true]);
  });

  it('answers a READ past the end only after the READs queued before it (pscp takes replies in order)', async () => {
    const { vfs, reads } = fakeVfs();
    const h = await ReadHandle.open(vfs, ctx, '/f');
    const order: string[] = [];
    const tail = DATA.length - 100;
    await Promise.all([
      h.read(tail, 32_768).then((b) => order.push(`data ${b!.length}`)),
      h.read(DATA.length, 32_768).then((b) => order.push(`eof ${String(b)}`)),
      h.read(DATA.length + 32_768, 32_768).then((b) => order.push(`eof ${String(b)}`)),
    ]);
    expect(order).toEqual(['data 100', 'eof null', 'eof null']);
    expect(reads).toEqual([tail]); // nothing past the end is read from the storage
    expect(await h.read(DATA.length, 10)).toBeNull(); // idle: answered at once
  });
});
