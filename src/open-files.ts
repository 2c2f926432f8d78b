/**
 * How many HTTP connections may be open at once. Every connection holds a file descriptor, and so do
 * the store, the storages, uploads and SFTP: without a cap, clients holding connections (idle ones
 * may wait 60 s for their headers) used up the process's limit on open files, and meanwhile the
 * store, uploads and SFTP failed with EMFILE. Half the limit goes to HTTP; past it, new connections
 * are closed at once and the rest of the server works on.
 */
import { readFileSync } from 'node:fs';

/** The soft limit on open files in /proc/self/limits' text; undefined when absent or unlimited. */
export function openFilesLimit(limitsText: string): number | undefined {
  const m = /^Max open files\s+(\d+|unlimited)\s/m.exec(limitsText);
  return m && m[1] !== 'unlimited' ? Number(m[1]) : undefined;
}

/** The cap for this process (half its open-files limit, at least 32); undefined where the limit is unknown (not Linux). */
export function httpConnectionCap(): number | undefined {
  let text: string;
  try {
    text = readFileSync('/proc/self/limits', 'utf8');
  } catch {
    return undefined;
  }
  const limit = openFilesLimit(text);
  return limit === undefined ? undefined : Math.max(32, Math.floor(limit / 2));
}
