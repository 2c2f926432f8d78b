/** Test pictures made by ffmpeg, and the size of the PNGs thumbnails answer. */
import { execFileSync } from 'node:child_process';
import { expect } from 'vitest';

/** Run ffmpeg quietly (its errors still fail the call). */
export const ffmpeg = (...args: string[]) => execFileSync('ffmpeg', ['-v', 'error', '-y', ...args], { stdio: ['ignore', 'ignore', 'pipe'] });

/** Width and height from a PNG's IHDR, after checking the signature. */
export function pngSize(b: Buffer): { width: number; height: number } {
  expect(b.subarray(0, 8).toString('hex')).toBe('89504e470d0a1a0a');
  expect(b.subarray(12, 16).toString('latin1')).toBe('IHDR');
  return { width: b.readUInt32BE(16), height: b.readUInt32BE(20) };
}
