/** Test pictures made by ffmpeg, and the size of the PNGs thumbnails answer. */
import { execFileSync } from 'node:child_process';
import { readdirSync, readFileSync, readlinkSync } from 'node:fs';
import { expect } from 'vitest';

/** Run ffmpeg quietly (its errors still fail the call). */
export const ffmpeg = (...args: string[]) => execFileSync('ffmpeg', ['-v', 'error', '-y', ...args], { stdio: ['ignore', 'ignore', 'pipe'] });

/** Width and height from a PNG's IHDR, after checking the signature. */
export function pngSize(b: Buffer): { width: number; height: number } {
  expect(b.subarray(0, 8).toString('hex')).toBe('89504e470d0a1a0a');
  expect(b.subarray(12, 16).toString('latin1')).toBe('IHDR');
  return { width: b.readUInt32BE(16), height: b.readUInt32BE(20) };
}

/** An ffmpeg or ffprobe process the server in this process started (Local's thumbnails). */
export interface ThumbTool {
  pid: number;
  tool: 'ffmpeg' | 'ffprobe';
  /** Its VmHWM (peak resident memory), KiB; 0 once it exited. */
  peak: number;
  /** The host file it reads as its fd 3 (thumbs.ts); '' once it exited and is not reaped yet (a zombie). */
  file: string;
}

/**
 * This process's ffmpeg and ffprobe children right now, zombies included (one not reaped is still
 * there): the test server runs in this process (harness.ts), so the tools it starts are ours.
 */
export function thumbTools(): ThumbTool[] {
  const found: ThumbTool[] = [];
  for (const name of readdirSync('/proc')) {
    if (!/^\d+$/.test(name)) continue;
    let stat: string;
    try {
      stat = readFileSync(`/proc/${name}/stat`, 'latin1');
    } catch {
      continue; // exited while we looked
    }
    // `pid (comm) state ppid ...`: comm may hold spaces and parentheses, so split after its last ')'.
    const end = stat.lastIndexOf(')');
    const tool = stat.slice(stat.indexOf('(') + 1, end);
    if (Number(stat.slice(end + 2).split(' ')[1]) !== process.pid || (tool !== 'ffmpeg' && tool !== 'ffprobe')) continue;
    const read = (f: () => string) => {
      try {
        return f();
      } catch {
        return ''; // exited (a zombie has no fds), or about to
      }
    };
    const hwm = /VmHWM:\s+(\d+) kB/.exec(read(() => readFileSync(`/proc/${name}/status`, 'latin1')));
    found.push({ pid: Number(name), tool, peak: Number(hwm?.[1] ?? 0), file: read(() => readlinkSync(`/proc/${name}/fd/3`)) });
  }
  return found;
}
