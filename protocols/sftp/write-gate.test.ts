import type { SFTPWrapper } from 'ssh2';
import { describe, expect, it } from 'vitest';
import { SharedWrites, WriteGate } from './write-gate.js';

/** Just the ssh2 channel internals the gate works with (openssh-ext.ts); window adjusts recorded. */
function fakeChannel(id: number, adjusts: number[]) {
  const ch = {
    _version: 3, _buffer: [], _extensions: {}, _waitWindow: false,
    outgoing: { id, state: 'open', window: 1 << 20, packetSize: 32768 },
    incoming: { window: 0 },
    _protocol: { channelData() {}, exitStatus() {}, channelWindowAdjust: (_: number, n: number) => adjusts.push(id) && n },
    push: (_data: Buffer | null) => true,
  };
  return { ch, sftp: ch as unknown as SFTPWrapper, receive: () => ch.push(Buffer.alloc(0)) as unknown as boolean };
}

describe('WriteGate', () => {
  it('channels share one bound: past it each channel receiving more holds its window; all open again at half', () => {
    const shared = new SharedWrites(100);
    const opened: number[] = [];
    const a = fakeChannel(1, opened);
    const b = fakeChannel(2, opened);
    const ga = new WriteGate(a.sftp, shared);
    const gb = new WriteGate(b.sftp, shared);
    const doneA = ga.taken(60);
    expect(a.receive()).toBe(true); // 60 of 100
    const doneB = gb.taken(60);
    expect(b.receive()).toBe(false); // 120 > 100: B waits, though it holds only 60 itself
    expect(a.receive()).toBe(false); // and so does A, the next time it receives
    doneA();
    expect([shared.pending, opened]).toEqual([60, []]); // 60 > 50: both still wait
    doneB();
    expect([shared.pending, opened.sort()]).toEqual([0, [1, 2]]);
    expect(shared.held.size).toBe(0);
    expect([a.receive(), b.receive()]).toEqual([true, true]);
  });

  it('a channel that is gone stops waiting for the shared bound', () => {
    const shared = new SharedWrites(10);
    const opened: number[] = [];
    const a = fakeChannel(1, opened);
    const ga = new WriteGate(a.sftp, shared);
    const done = ga.taken(20);
    expect(a.receive()).toBe(false);
    expect(shared.held.size).toBe(1);
    ga.dispose();
    expect(shared.held.size).toBe(0);
    done(); // its last write is answered: the count falls, and nothing is opened for it
    expect([shared.pending, opened]).toEqual([0, []]);
  });
});
