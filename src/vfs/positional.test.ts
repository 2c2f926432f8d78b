import { randomBytes } from 'node:crypto';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { fileReader, streamReader, type PositionalReader } from './positional.js';

const DATA = randomBytes(300_000);
let dir: string;
let file: string;

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'tg-pos-'));
  file = join(dir, 'f.bin');
  await writeFile(file, DATA);
});
afterAll(async () => rm(dir, { recursive: true, force: true }));

/** Read [pos, pos+len) through `r` into a fresh buffer. */
async function at(r: PositionalReader, pos: number, len: number): Promise<Buffer> {
  const buf = Buffer.alloc(len);
  return buf.subarray(0, await r.read(buf, len, pos));
}

/** A stream of DATA from `start`, in odd-sized chunks, counting how often one is opened. */
function opener(failAt?: number) {
  const calls: number[] = [];
  const openAt = async (start: number) => {
    calls.push(start);
    if (start >= DATA.length) return undefined;
    const chunks: Buffer[] = [];
    for (let p = start; p < DATA.length; p += 7_777) chunks.push(DATA.subarray(p, Math.min(p + 7_777, DATA.length)));
    if (failAt !== undefined && calls.length === 1) {
      return new Readable({
        read() {
          this.destroy(new Error('upstream broke'));
        },
      });
    }
    return Readable.from(chunks, { objectMode: false });
  };
  return { calls, openAt };
}

describe('fileReader', () => {
  it('reads any offset into the caller buffer, 0 past the end and after close', async () => {
    const r = fileReader(file);
    expect((await at(r, 0, 1000)).equals(DATA.subarray(0, 1000))).toBe(true);
    expect((await at(r, 123_456, 50_000)).equals(DATA.subarray(123_456, 173_456))).toBe(true);
    expect((await at(r, DATA.length - 10, 100)).equals(DATA.subarray(DATA.length - 10))).toBe(true);
    expect((await at(r, DATA.length, 100)).length).toBe(0);
    await r.close();
    expect((await at(r, 0, 100)).length).toBe(0);
  });
});

describe('streamReader', () => {
  it('serves sequential reads from one stream and reopens on a seek', async () => {
    const { calls, openAt } = opener();
    const r = streamReader(openAt);
    let pos = 0;
    const parts: Buffer[] = [];
    while (pos < DATA.length) {
      const b = await at(r, pos, 32_768);
      if (!b.length) break;
      parts.push(b);
      pos += b.length;
    }
    expect(Buffer.concat(parts).equals(DATA)).toBe(true);
    expect(calls).toEqual([0]);
    expect((await at(r, 1_000, 10)).equals(DATA.subarray(1_000, 1_010))).toBe(true);
    expect(calls).toEqual([0, 1_000]);
    expect((await at(r, DATA.length + 5, 10)).length).toBe(0);
    await r.close();
  });

  it('reports a broken stream and opens a new one for the next read', async () => {
    const { calls, openAt } = opener(0);
    const r = streamReader(openAt);
    // A backend failure (the cause kept for the log), not a bare error an adapter takes for a bug.
    await expect(at(r, 0, 100)).rejects.toMatchObject({ code: 'UPSTREAM', cause: expect.objectContaining({ message: 'upstream broke' }) });
    expect((await at(r, 0, 100)).equals(DATA.subarray(0, 100))).toBe(true);
    expect(calls).toEqual([0, 0]);
    await r.close();
  });
});
