import { describe, expect, it } from 'vitest';
import { planRange } from './http-range.js';

const plan = (range: string, size = 100) => planRange({ range }, size, '"e"', new Date(1_600_000_000_000));

describe('planRange', () => {
  it('reads the range forms clients send, spaces around the numbers included', () => {
    expect(plan('bytes=0-9')).toEqual({ kind: 'partial', start: 0, end: 9 });
    expect(plan('bytes= 5 - 9 ')).toEqual({ kind: 'partial', start: 5, end: 9 });
    expect(plan('bytes=90-')).toEqual({ kind: 'partial', start: 90, end: 99 });
    expect(plan('bytes=-10')).toEqual({ kind: 'partial', start: 90, end: 99 });
    expect(plan('bytes=- 10')).toEqual({ kind: 'partial', start: 90, end: 99 });
    expect(plan('bytes=50-500')).toEqual({ kind: 'partial', start: 50, end: 99 });
    expect(plan('bytes=100-')).toEqual({ kind: 'unsatisfiable' });
    expect(plan('bytes=-0')).toEqual({ kind: 'unsatisfiable' });
    expect(plan('bytes=9-5')).toEqual({ kind: 'unsatisfiable' }); // as Go's ServeContent (AList) and WebDAV
  });

  it('serves the whole file for what it cannot read: several ranges, other units, junk, an empty range', () => {
    for (const r of ['bytes=0-1,5-6', 'items=0-9', 'bytes=a-b', 'bytes=-', `bytes=${' '.repeat(15_000)}x`, `bytes=-${' '.repeat(15_000)}x`]) {
      expect(plan(r), r.slice(0, 20)).toEqual({ kind: 'full' });
    }
  });
});
