/**
 * One writer per store. A running server marks its DATA dir with `server.pid` (its pid and, on Linux,
 * its start time, so a pid reused after a kill -9 is not mistaken for it). While that marker names a
 * live process, other processes (the CLI) never write store.json: they hand the change to the server
 * as a request file in DATA, which the server applies and answers (see JsonStore.onRequest).
 */
import { randomUUID } from 'node:crypto';
import { existsSync, readFileSync } from 'node:fs';
import { readFile, rm } from 'node:fs/promises';
import { join } from 'node:path';
import { AtomicJsonFile } from './atomic-file.js';

export const OWNER_FILE = 'server.pid';
/** `control-<uuid>.request` (from the CLI) and `control-<uuid>.result` (the server's answer). */
export const REQUEST_RE = /^control-([0-9a-f-]{36})\.request$/;
export const requestName = (id: string) => `control-${id}.request`;
export const resultName = (id: string) => `control-${id}.result`;

export interface OwnerMarker {
  pid: number;
  /** Field 22 of /proc/PID/stat (start time in clock ticks since boot); null where there is no /proc. */
  start: string | null;
  instance: string;
}

/** A process's state and start time from /proc; null when it does not exist; 'unknown' without /proc. */
function procStat(pid: number): { state: string; start: string } | null | 'unknown' {
  let text: string;
  try {
    text = readFileSync(`/proc/${pid}/stat`, 'utf8');
  } catch {
    return existsSync('/proc/self/stat') ? null : 'unknown';
  }
  const f = text.slice(text.lastIndexOf(')') + 2).split(' ');
  return { state: f[0] ?? '', start: f[19] ?? '' };
}

/** Whether `pid` runs (not a zombie) and, when `start` is given, is the same process that wrote it. */
export function isAlive(pid: number, start: string | null = null): boolean {
  if (!Number.isInteger(pid) || pid <= 0) return false;
  const st = procStat(pid);
  if (st === null) return false;
  if (st !== 'unknown') return st.state !== 'Z' && st.state !== 'X' && (start === null || st.start === start);
  try {
    process.kill(pid, 0);
    return true;
  } catch (e) {
    return (e as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/** The live server that owns `dataDir`, if any (a stale marker of a dead process counts as none). */
export async function liveOwner(dataDir: string): Promise<OwnerMarker | undefined> {
  let m: OwnerMarker;
  try {
    m = JSON.parse(await readFile(join(dataDir, OWNER_FILE), 'utf8')) as OwnerMarker;
  } catch {
    return undefined; // missing, or torn by hand: no owner we could talk to
  }
  return m && typeof m.pid === 'number' && isAlive(m.pid, typeof m.start === 'string' ? m.start : null) ? m : undefined;
}

/**
 * Mark `dataDir` as owned by this process; refuses when another live process owns it. Returns the
 * release function (removes the marker if it is still ours).
 */
export async function claimOwner(dataDir: string): Promise<() => Promise<void>> {
  const other = await liveOwner(dataDir);
  if (other && other.pid !== process.pid) {
    throw new Error(`${dataDir} is in use by a running treegate (pid ${other.pid}); stop it first`);
  }
  const st = procStat(process.pid);
  const marker: OwnerMarker = { pid: process.pid, start: typeof st === 'object' && st ? st.start : null, instance: randomUUID() };
  const file = join(dataDir, OWNER_FILE);
  await new AtomicJsonFile<OwnerMarker>(file).write(marker);
  return async () => {
    try {
      const now = JSON.parse(await readFile(file, 'utf8')) as OwnerMarker;
      if (now.instance === marker.instance) await rm(file, { force: true });
    } catch {
      // gone or replaced: not ours to remove
    }
  };
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/**
 * Hand `body` to the server that owns `dataDir` and wait (bounded) for its answer. Throws a clear
 * error when the server does not take it in time (then nothing was changed) or answers an error.
 */
export async function submitRequest(dataDir: string, owner: OwnerMarker, body: object, timeoutMs = 15_000): Promise<Record<string, unknown>> {
  const id = randomUUID();
  const req = join(dataDir, requestName(id));
  const res = join(dataDir, resultName(id));
  await new AtomicJsonFile<object>(req).write(body);
  const deadline = Date.now() + timeoutMs;
  let taken = false;
  for (;;) {
    let text: string | undefined;
    try {
      text = await readFile(res, 'utf8');
    } catch {
      // not answered yet
    }
    if (text !== undefined) {
      await rm(res, { force: true });
      const r = JSON.parse(text) as Record<string, unknown>;
      if (r.ok !== true) throw new Error(`the running server (pid ${owner.pid}) refused the change: ${String(r.error)}`);
      return r;
    }
    const gone = !isAlive(owner.pid, owner.start);
    if (gone || Date.now() > deadline) {
      if (!taken) {
        try {
          await rm(req); // still ours: the server never saw it
          throw new Error(
            gone
              ? `the running server (pid ${owner.pid}) stopped before it took the change; nothing was changed, try again`
              : `the running server (pid ${owner.pid}) did not take the change within ${timeoutMs / 1000} s; nothing was changed`,
          );
        } catch (e) {
          if ((e as NodeJS.ErrnoException).code !== 'ENOENT') throw e;
          taken = true; // taken at the last moment: give it a little longer to answer
          if (!gone) {
            await sleep(2_000);
            continue;
          }
        }
      }
      throw new Error(`the running server (pid ${owner.pid}) took the change but did not confirm it; check with treegate admin show`);
    }
    await sleep(50);
  }
}
