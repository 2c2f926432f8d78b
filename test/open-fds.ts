/**
 * What this process (the test server runs in it) has open, from /proc/self/fd: leak checks look
 * for a descriptor left on a file after the operation that opened it ended.
 */
import { readdirSync, readlinkSync } from 'node:fs';

/** Targets of the open descriptors that are not sockets (files, pipes, anon inodes). */
export function openFiles(): string[] {
  const out: string[] = [];
  for (const fd of readdirSync('/proc/self/fd')) {
    try {
      const target = readlinkSync(`/proc/self/fd/${fd}`);
      if (!target.startsWith('socket:')) out.push(target);
    } catch {
      // closed meanwhile (the readdir's own descriptor, too)
    }
  }
  return out;
}

/** Descriptors open on `path`. */
export function fdsOn(path: string): number {
  return openFiles().filter((t) => t === path).length;
}
