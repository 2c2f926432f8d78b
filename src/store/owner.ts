/**
 * One writer per store. A process that writes store.json first claims DATA with `server.pid` (its
 * pid, its start time on Linux so a pid reused after a kill -9 is not mistaken for it, and whether it
 * is the server or a CLI run). The claim is exclusive: the marker appears with link(2), which fails
 * when one exists, so two servers starting at once, or a CLI run and a server starting, cannot both
 * write. While a server holds it, the CLI hands its change over as a request file in DATA, which the
 * server applies and answers (see JsonStore.onRequest); a CLI run holds it for well under a second,
 * and a starting server waits for it.
 */
import { randomUUID } from 'node:crypto';
import { existsSync, readFileSync } from 'node:fs';
import { link, open, readFile, rename, rm, stat, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { AtomicJsonFile } from './atomic-file.js';
import { linkNew } from './link-new.js';

export const OWNER_FILE = 'server.pid';
/** `control-<uuid>.request` (from the CLI) and `control-<uuid>.result` (the server's answer). */
export const REQUEST_RE = /^control-([0-9a-f-]{36})\.request$/;
export const requestName = (id: string) => `control-${id}.request`;
export const resultName = (id: string) => `control-${id}.result`;

export type OwnerKind = 'server' | 'cli';

export interface OwnerMarker {
  pid: number;
  /** Field 22 of /proc/PID/stat (start time in clock ticks since boot); null where there is no /proc. */
  start: string | null;
  instance: string;
  /** Absent in markers of older versions, which only servers wrote. */
  kind?: OwnerKind;
}

/** A claim refused because another live process holds DATA (`owner`: its marker). */
export class OwnerBusyError extends Error {
  constructor(readonly dataDir: string, readonly owner: OwnerMarker) {
    super(`${dataDir} is in use by a running treegate (pid ${owner.pid}); stop it first`);
  }
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

const markerAlive = (m: OwnerMarker) => isAlive(m.pid, typeof m.start === 'string' ? m.start : null);

/** The marker in `file`: missing, unreadable ('torn': being written, or cut by a crash), or parsed. */
async function readMarker(file: string): Promise<OwnerMarker | 'torn' | undefined> {
  let text: string;
  try {
    text = await readFile(file, 'utf8');
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw e;
  }
  try {
    const m = JSON.parse(text) as OwnerMarker;
    return m && typeof m.pid === 'number' ? m : 'torn';
  } catch {
    return 'torn';
  }
}

/** The live process that owns `dataDir`, if any (a stale marker of a dead process counts as none). */
export async function liveOwner(dataDir: string): Promise<OwnerMarker | undefined> {
  const m = await readMarker(join(dataDir, OWNER_FILE)).catch(() => undefined);
  return m && m !== 'torn' && markerAlive(m) ? m : undefined;
}

/**
 * Create `file` holding `text` only if it does not exist; false when it does. link(2) makes a
 * complete file appear at once; file systems without hard links (exFAT, some FUSE and SMB mounts)
 * get an exclusive create, whose moment of emptiness readers treat as a claim under way.
 */
async function createExclusive(file: string, text: string): Promise<boolean> {
  const linked = await linkNew(file, (tmp) => writeFile(tmp, text, { mode: 0o644 }));
  if (linked !== 'no-links') return linked;
  let fh;
  try {
    fh = await open(file, 'wx', 0o644);
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === 'EEXIST') return false;
    throw e;
  }
  try {
    await fh.writeFile(text, 'utf8');
  } finally {
    await fh.close();
  }
  return true;
}

/**
 * Remove a marker judged stale, unless it changed since it was read: it is renamed aside first and
 * checked there, and a live claim made in between (another process removed the stale one and
 * claimed) is put back.
 */
async function removeStale(file: string, seen: OwnerMarker | 'torn'): Promise<void> {
  const aside = `${file}.${randomUUID()}.stale`;
  try {
    await rename(file, aside);
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === 'ENOENT') return; // someone else removed it
    throw e;
  }
  const now = await readMarker(aside).catch(() => 'torn' as const);
  const same = seen === 'torn' ? now === 'torn' : now !== 'torn' && now?.instance === seen.instance;
  if (!same) await link(aside, file).catch(() => undefined); // a live claim: back in place
  await rm(aside, { force: true });
}

const TORN_GRACE_MS = 5_000;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/**
 * Claim `dataDir` for this process as `kind`; returns the release function (removes the marker if
 * it is still ours). A live CLI run holding it is waited for (up to `waitMs`); a live server, or a
 * CLI still there after `waitMs`, is refused with OwnerBusyError. A marker of a dead process, or one
 * left unreadable by a crash, is replaced. The same process may claim again (tests open stores twice).
 */
export async function claimOwner(dataDir: string, kind: OwnerKind = 'server', waitMs = 10_000): Promise<() => Promise<void>> {
  const st = procStat(process.pid);
  const marker: OwnerMarker = { pid: process.pid, start: typeof st === 'object' && st ? st.start : null, instance: randomUUID(), kind };
  const file = join(dataDir, OWNER_FILE);
  const deadline = Date.now() + waitMs;
  for (;;) {
    if (await createExclusive(file, JSON.stringify(marker))) break;
    const other = await readMarker(file);
    if (other === undefined) continue; // released meanwhile
    if (other === 'torn') {
      const age = Date.now() - (await stat(file).catch(() => ({ mtimeMs: 0 }))).mtimeMs;
      if (age > TORN_GRACE_MS) await removeStale(file, other);
      else await sleep(50); // another process is writing its claim
      continue;
    }
    if (!markerAlive(other)) {
      await removeStale(file, other);
      continue;
    }
    if (other.pid === process.pid) {
      await new AtomicJsonFile<OwnerMarker>(file).write(marker);
      break;
    }
    if (other.kind !== 'cli' || Date.now() >= deadline) throw new OwnerBusyError(dataDir, other);
    await sleep(50);
  }
  return async () => {
    try {
      const now = JSON.parse(await readFile(file, 'utf8')) as OwnerMarker;
      if (now.instance === marker.instance) await rm(file, { force: true });
    } catch {
      // gone or replaced: not ours to remove
    }
  };
}

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
