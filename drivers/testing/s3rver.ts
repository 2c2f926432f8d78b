/**
 * Test-only: s3rver (npm) on 127.0.0.1 in this process, with one bucket `bucket` in a temp folder.
 * Credentials are s3rver's fixed `S3RVER`/`S3RVER`. Stopped in afterAll.
 */
import { createReadStream } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Readable } from 'node:stream';
import { freePort } from './process.js';

interface S3rverInstance { run(): Promise<unknown>; close(): Promise<void> }

export interface S3rver {
  port: number;
  bucket: string;
  accessKeyId: string;
  secretAccessKey: string;
  /** s3rver's store folder (objects as `<bucket>/<key>._S3rver_object`), for tests that look inside. */
  dir: string;
  stop(): Promise<void>;
}

export async function startS3rver(): Promise<S3rver> {
  const dir = await mkdtemp(join(tmpdir(), 'tg-s3-'));
  const port = await freePort();
  const modName = 's3rver'; // untyped package: import by name, typed by hand here
  const { default: S3rverClass } = (await import(modName)) as { default: new (o: object) => S3rverInstance };
  await patchZeroEndRange();
  const server = new S3rverClass({ port, address: '127.0.0.1', silent: true, directory: dir, configureBuckets: [{ name: 'bucket' }] });
  await server.run();
  return {
    port, bucket: 'bucket', accessKeyId: 'S3RVER', secretAccessKey: 'S3RVER', dir,
    stop: async () => { await server.close(); await rm(dir, { recursive: true, force: true }); },
  };
}

/**
 * s3rver 3.7.1 bug: `Range: bytes=0-0` is served as the whole object (`options.end || Infinity`).
 * Real S3 answers one byte; patch the store so the test server behaves like S3 here.
 */
async function patchZeroEndRange(): Promise<void> {
  interface Res { content?: Readable | null; range?: { start: number; end: number } }
  interface Store { getObject(b: string, k: string, o?: { start?: number; end?: number }): Promise<Res | null>; getResourcePath(b: string, k: string, t: string): string }
  const storeMod: string = 's3rver/lib/stores/filesystem.js';
  const Fs = ((await import(storeMod)) as { default: { prototype: Store & { zeroEndPatched?: boolean } } }).default;
  if (Fs.prototype.zeroEndPatched) return;
  Fs.prototype.zeroEndPatched = true;
  const orig = Fs.prototype.getObject;
  Fs.prototype.getObject = async function (this: Store, b, k, o) {
    const res = await orig.call(this, b, k, o);
    if (o?.end === 0 && (o.start ?? 0) === 0 && res?.content) {
      res.content.destroy();
      res.content = createReadStream(this.getResourcePath(b, k, 'object'), { start: 0, end: 0 });
      res.range = { start: 0, end: 0 };
    }
    return res;
  };
}
