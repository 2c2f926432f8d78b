import { randomBytes } from 'node:crypto';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import { ListObjectsV2Command, PutObjectCommand, S3Client } from '@aws-sdk/client-s3';
import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseOptions } from '../options.js';
import { runConformance } from '../conformance/suite.js';
import { chunked, codeOf, collect, NO_ARGS, rootObj } from '../conformance/helpers.js';
import { openLink } from '../../src/vfs/link.js';
import type { Driver, DriverDefinition } from '../types.js';
import { freePort, startServer } from '../testing/process.js';
import { isVfsError } from '../../src/errors.js';
import { startS3rver } from '../testing/s3rver.js';
import { s3Definition } from './index.js';
import { S3_TIMEOUTS } from './s3.js';

const def = s3Definition as unknown as DriverDefinition;
const log = pino({ level: 'silent' });

const optionsFor = (port: number, extra: Record<string, unknown> = {}) => parseOptions(def, {
  bucket: 'bucket', endpoint: `http://127.0.0.1:${port}`, region: 'us-east-1', access_key_id: 'S3RVER',
  secret_access_key: 'S3RVER', force_path_style: true, ...extra,
});

describe('S3 driver against s3rver', () => {
  let server: Awaited<ReturnType<typeof startS3rver>>;
  beforeAll(async () => { server = await startS3rver(); });
  afterAll(async () => { await server?.stop(); });

  runConformance(def, async () => ({
    options: optionsFor(server.port, { root_folder_path: '/conf' }), cleanup: async () => undefined,
    // s3rver keeps each object as the file `<key>._S3rver_object`, 15 bytes more than the key's last
    // segment, so the 244-byte name would pass the host's 255-byte limit (and s3rver throws): 229 bytes do.
    testServerNames: { 'long-cjk': '漢'.repeat(75) + '.txt' },
  }));

  const raw = () => new S3Client({
    endpoint: `http://127.0.0.1:${server.port}`, region: 'us-east-1', forcePathStyle: true,
    credentials: { accessKeyId: 'S3RVER', secretAccessKey: 'S3RVER' },
  });
  const make = async (extra: Record<string, unknown> = {}) => {
    const d = await def.create(optionsFor(server.port, extra), { log, dataDir: '/nonexistent' }) as Required<Driver>;
    await d.init(AbortSignal.timeout(10_000));
    return d;
  };

  it('keeps empty folders as `<dir>/` placeholders and hides AList `.placeholder` objects', async () => {
    const d = await make({ root_folder_path: '/ph' });
    await d.mkdir(rootObj, 'empty', NO_ARGS);
    await raw().send(new PutObjectCommand({ Bucket: 'bucket', Key: 'ph/alist/.placeholder', Body: new Uint8Array(0) }));
    const keys = (await raw().send(new ListObjectsV2Command({ Bucket: 'bucket', Prefix: 'ph/' }))).Contents!.map((o) => o.Key).sort();
    expect(keys).toEqual(['ph/alist/.placeholder', 'ph/empty/']);
    expect((await d.list(rootObj, NO_ARGS)).map((o) => [o.name, o.isDir])).toEqual([['alist', true], ['empty', true]]);
    expect(await d.list(await d.get('/alist', NO_ARGS), NO_ARGS)).toEqual([]);
    await d.drop();
  });

  it('links are presigned GET URLs that work without credentials, with the configured expiry', async () => {
    const d = await make({ root_folder_path: '/links', sign_url_expire: 2, add_filename_to_disposition: true });
    await d.put(rootObj, Readable.from([Buffer.from('hello s3')]), { name: 'hi there.txt', size: 8 });
    const link = await d.link(await d.get('/hi there.txt', NO_ARGS), NO_ARGS);
    if (link.kind !== 'url') throw new Error('expected a url link');
    expect(link.url).toContain('X-Amz-Expires=7200');
    const res = await fetch(link.url);
    expect(res.status).toBe(200);
    expect(await res.text()).toBe('hello s3');
    expect(Math.abs(link.expiresAt!.getTime() - Date.now() - 7200_000)).toBeLessThan(60_000);
    await d.drop();
  });

  it('uploads streams of unknown length larger than a part as multipart', async () => {
    const d = await make({ root_folder_path: '/multi' });
    const data = randomBytes(6 * 1024 * 1024 + 17);
    const obj = (await d.put(rootObj, chunked(data, 256 * 1024), { name: 'big.bin' }))!;
    expect(obj.size).toBe(data.length);
    const got = await collect(await openLink(await d.link(await d.get('/big.bin', NO_ARGS), NO_ARGS), { start: 5 * 1024 * 1024 - 3, end: 5 * 1024 * 1024 + 3 }));
    expect(got.equals(data.subarray(5 * 1024 * 1024 - 3, 5 * 1024 * 1024 + 4))).toBe(true);
    await d.drop();
  });

  it('fails init quickly and clearly on bad credentials, a missing bucket or a dead endpoint', async () => {
    // s3rver checks access key ids but not v4 signatures, so a wrong key id stands for bad credentials.
    const bad = await def.create(optionsFor(server.port, { access_key_id: 'WRONG' }), { log, dataDir: '/x' });
    await expect(bad.init(AbortSignal.timeout(10_000))).rejects.toThrow(/access denied|S3 error/);
    const nob = await def.create(optionsFor(server.port, { bucket: 'nope' }), { log, dataDir: '/x' });
    await expect(nob.init(AbortSignal.timeout(10_000))).rejects.toThrow('bucket nope does not exist');
    const dead = await def.create(optionsFor(await freePort()), { log, dataDir: '/x' });
    const t0 = Date.now();
    await expect(dead.init(AbortSignal.timeout(10_000))).rejects.toThrow(/cannot reach|S3 error/);
    expect(Date.now() - t0).toBeLessThan(9_000);
    const ac = new AbortController();
    const hanging = (await def.create(optionsFor(server.port), { log, dataDir: '/x' })).init(ac.signal);
    ac.abort();
    expect(await codeOf(hanging)).toBe('UPSTREAM');
  });

  it('a stalled endpoint (s3rver stopped with SIGSTOP) fails as UPSTREAM once the idle timeout passes, with retries', async () => {
    // s3rver in a child process of its own, so that SIGSTOP freezes the server and not this test.
    const port = await freePort();
    const dir = await mkdtemp(join(tmpdir(), 'tg-s3-stop-'));
    const script = `import S3rver from 's3rver'; await new S3rver(${JSON.stringify({ port, address: '127.0.0.1', silent: true, directory: dir, configureBuckets: [{ name: 'bucket' }] })}).run();`;
    const srv = await startServer(process.execPath, ['--input-type=module', '-e', script], port, { maxSeconds: 120, cwd: process.cwd() });
    const node = Number((await readFile(`/proc/${srv.pid}/task/${srv.pid}/children`, 'utf8')).trim().split(/\s+/)[0]); // under `timeout`
    const saved = { ...S3_TIMEOUTS };
    Object.assign(S3_TIMEOUTS, { connectMs: 1000, idleMs: 1500 });
    const d = await def.create(optionsFor(port), { log, dataDir: '/x' }) as Required<Driver>;
    try {
      await d.init(AbortSignal.timeout(10_000));
      process.kill(node, 'SIGSTOP');
      const t0 = Date.now();
      const err = await d.list(rootObj, NO_ARGS).then(() => undefined, (e: unknown) => e);
      const ms = Date.now() - t0;
      expect(isVfsError(err, 'UPSTREAM') && (err as Error).message).toMatch(/S3 endpoint timed out/);
      expect(ms).toBeGreaterThanOrEqual(1500 * 3 - 100); // every attempt waited the whole idle timeout
      expect(ms).toBeLessThan(15_000);
    } finally {
      Object.assign(S3_TIMEOUTS, saved);
      await d.drop();
      process.kill(node, 'SIGKILL');
      await srv.stop();
      await rm(dir, { recursive: true, force: true });
    }
  });
});
