import type { SFTPWrapper } from 'ssh2';
import { describe, expect, it } from 'vitest';
import { WritePool } from './write-pool.js';

/** A stand-in for ssh2's SFTP object: push joins a packet of `n` bytes, as ssh2 does for WRITEs. */
function fakeChannel() {
  const joined: Buffer[] = [];
  const ch = {
    push(n: number) {
      joined.push(Buffer.allocUnsafe(n));
    },
  };
  return { ch, joined, push: (n: number) => (ch as unknown as { push(n: number): void }).push(n) };
}

describe('WritePool', () => {
  it('lends big joins from reused memory and takes back only a whole data region', () => {
    const pool = new WritePool();
    const { ch, joined, push } = fakeChannel();
    expect(pool.attach(ch as unknown as SFTPWrapper)).toBe(true);
    push(200_000);
    const first = joined[0]!;
    // Outside ssh2's parse, allocations are untouched.
    expect(Buffer.allocUnsafe(200_000).buffer).not.toBe(first.buffer);
    // A chunk cut short, or one starting past the header, does not bring the memory back.
    pool.release(first.subarray(30, 150_000));
    pool.release(first.subarray(100_000));
    push(200_000);
    expect(joined[1]!.buffer).not.toBe(first.buffer);
    // The data region (after a header, up to the packet's end) does, once.
    pool.release(first.subarray(30));
    pool.release(first.subarray(30));
    push(200_000);
    push(200_000);
    expect(joined[2]!.buffer).toBe(first.buffer);
    expect(joined[3]!.buffer).not.toBe(first.buffer);
    // Small joins (not big WRITEs) are ordinary buffers.
    push(1000);
    pool.release(joined[4]!);
    expect(joined[4]!.length).toBe(1000);
  });
});
