/**
 * Small helpers for the conformance suite: building streams, reading links, finding objects.
 */
import { Readable } from 'node:stream';
import { isVfsError, type VfsErrorCode } from '../../src/errors.js';
import { basename, join, segments } from '../../src/paths.js';
import { openLink } from '../../src/vfs/link.js';
import type { ByteRange, CallArgs, Driver, Obj } from '../types.js';

export const NO_ARGS: CallArgs = {};

/** A stream yielding `data` in chunks of `chunk` bytes, asynchronously, like a network body. */
export function chunked(data: Buffer, chunk = 7): Readable {
  return Readable.from((async function* () {
    for (let i = 0; i < data.length; i += chunk) {
      await new Promise((r) => setImmediate(r));
      yield data.subarray(i, i + chunk);
    }
  })(), { objectMode: false });
}

/** A stream that sends some bytes, then fails (a client that disconnects mid-upload). */
export function failing(prefix: Buffer): Readable {
  return Readable.from((async function* () {
    yield prefix;
    await new Promise((r) => setImmediate(r));
    throw new Error('client went away');
  })(), { objectMode: false });
}

export async function collect(s: Readable): Promise<Buffer> {
  const parts: Buffer[] = [];
  for await (const c of s) parts.push(Buffer.isBuffer(c) ? c : Buffer.from(c as Uint8Array));
  return Buffer.concat(parts);
}

export const rootObj: Obj = { name: '', path: '/', size: 0, isDir: true, modified: new Date(0) };

/** The object at a driver path: via get when the driver has it, else by listing the parents. */
export async function objAt(d: Driver, path: string): Promise<Obj> {
  if (d.get) return d.get(path, NO_ARGS);
  let cur = rootObj;
  for (const s of segments(path)) {
    const hit = (await d.list(cur, NO_ARGS)).find((o) => o.name === s);
    if (!hit) throw Object.assign(new Error(`no ${s} in ${cur.path}`), { code: 'NOT_FOUND' });
    cur = hit;
  }
  return cur;
}

export async function names(d: Driver, dirPath: string): Promise<string[]> {
  return (await d.list(await objAt(d, dirPath), NO_ARGS)).map((o) => o.name);
}

export async function readAll(d: Driver, path: string, range?: ByteRange): Promise<Buffer> {
  const link = await d.link(await objAt(d, path), NO_ARGS);
  return collect(await openLink(link, range));
}

/** Resolves to the error code a promise rejects with ('' when it resolves). */
export async function codeOf(p: Promise<unknown>): Promise<VfsErrorCode | ''> {
  try {
    await p;
    return '';
  } catch (e) {
    if (isVfsError(e)) return e.code;
    throw e;
  }
}

export const childPath = (dir: string, name: string) => join(dir, name);
export const nameOf = basename;
