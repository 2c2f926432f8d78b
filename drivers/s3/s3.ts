import { createHash } from 'node:crypto';
import { pipeline, type Readable } from 'node:stream';
import {
  CopyObjectCommand, DeleteObjectCommand, DeleteObjectsCommand, GetObjectCommand, HeadObjectCommand, PutObjectCommand, S3Client,
} from '@aws-sdk/client-s3';
import { Upload } from '@aws-sdk/lib-storage';
import { getSignedUrl } from '@aws-sdk/s3-request-presigner';
import { contentTypeOf, rfc5987 } from '../../src/content-headers.js';
import { VfsError } from '../../src/errors.js';
import { basename, isWithin, join, segments, validateName } from '../../src/paths.js';
import type { CallArgs, Driver, DriverContext, Link, Obj, PutArgs, RemoveArgs } from '../types.js';
import { abortError, counter } from '../util/streams.js';
import type { S3Options } from './index.js';
import { copySource, KeyMap, s3Error } from './keys.js';
import { allKeys, anyBelow, pages, type ListParams } from './listing.js';

/** Parts of 5 MiB (the S3 minimum), three in flight: an upload of unknown length holds at most ~15 MiB. */
const PART_SIZE = 5 * 1024 * 1024;
const QUEUE_SIZE = 3;
/** S3 takes at most 10,000 parts per multipart upload. */
const MAX_PARTS = 10_000;

/**
 * Part size for an upload of `size` bytes. Fixed 5 MiB parts capped an upload at 10,000 × 5 MiB
 * (about 48.8 GiB): a bigger one failed at part 10,001, after all of that was sent. With the size
 * announced the parts grow to fit (as AList's uploader does), so anything S3 takes (5 TiB) fits;
 * memory is QUEUE_SIZE parts. A stream of unknown length keeps the minimum, hence that cap.
 */
function partSizeFor(size: number | undefined): number {
  return Math.max(PART_SIZE, Math.ceil((size ?? 0) / MAX_PARTS));
}
/** SigV4 presigned URLs cannot outlive 7 days. */
const MAX_PRESIGN_SECONDS = 7 * 24 * 3600;
/** AList's placeholder name when the option is empty; such objects are hidden from listings. */
const ALIST_PLACEHOLDER = '.placeholder';

/**
 * A key segment no virtual path can carry (`.`, `..`, a backslash, as other S3 clients write:
 * `dir\file.txt` from Windows tools). Such entries are left out of a listing, as the Local driver
 * does: joined into a path they threw INVALID, and the whole folder could not be listed.
 */
const unreachable = (name: string) => name === '.' || name === '..' || name.includes('\\');

/**
 * HTTP timeouts of every S3 request (@smithy/node-http-handler 4.x). `idleMs` is the socket idle
 * timeout (socketTimeout: no byte either way for that long, while sending the body, waiting for the
 * answer or reading it), so a transfer that keeps moving is never cut. The handler's requestTimeout
 * is not an idle timeout but a wall-clock deadline up to the response headers, and also how long a
 * part waits for `100 Continue` before sending its body anyway: 0 (none) keeps that wait at 6 s and
 * never cuts a slow part; throwOnRequestTimeout makes any such deadline an error, not a warning.
 * The SDK retries a timed-out request (maxAttempts 3): a stalled endpoint fails as UPSTREAM after
 * ~3 × idleMs (~90 s). Mutable only so tests can shorten them; read when a client is made.
 */
export const S3_TIMEOUTS = { connectMs: 10_000, idleMs: 30_000, requestMs: 0 };

function withScheme(endpoint: string): string {
  return /^[a-z][a-z0-9+.-]*:\/\//i.test(endpoint) ? endpoint : `https://${endpoint}`;
}

/**
 * remove_bucket: the URL without the bucket's path segment, where path-style puts it (right after
 * custom_host's own path). Replacing the first `/<bucket>` anywhere hit the host of a CDN named after
 * its bucket (`https://media.example.com/media/x` became `https:/.example.com/media/x`).
 */
function withoutBucket(url: string, customHost: string, bucket: string): string {
  const host = new URL(withScheme(customHost));
  if (new URL(url).host !== host.host) return url; // virtual-hosted: the bucket is in the host name
  const at = url.indexOf('/', url.indexOf('//') + 2) + host.pathname.replace(/\/$/, '').length;
  return url.startsWith(`/${bucket}/`, at) ? url.slice(0, at) + url.slice(at + bucket.length + 1) : url;
}

export class S3Driver implements Driver {
  private readonly client: S3Client;
  /** Signs download URLs; points at custom_host when one is set. */
  private readonly linkClient: S3Client;
  private readonly keys: KeyMap;
  private readonly bucket: string;
  /** Folders have no mtime in S3; they show the time the storage was mounted (as AList). */
  private readonly mountedAt = new Date();

  constructor(private readonly opts: S3Options, private readonly ctx: DriverContext) {
    this.bucket = opts.bucket;
    this.keys = new KeyMap(opts.root_folder_path || '/');
    this.client = this.makeClient(opts.endpoint);
    this.linkClient = opts.custom_host ? this.makeClient(opts.custom_host) : this.client;
  }

  private makeClient(endpoint: string): S3Client {
    const o = this.opts;
    return new S3Client({
      endpoint: withScheme(endpoint),
      region: o.region || 'us-east-1',
      forcePathStyle: o.force_path_style,
      credentials: { accessKeyId: o.access_key_id, secretAccessKey: o.secret_access_key, sessionToken: o.session_token || undefined },
      // Many S3-compatible servers reject the CRC32 trailers newer SDKs add to every request.
      requestChecksumCalculation: 'WHEN_REQUIRED',
      responseChecksumValidation: 'WHEN_REQUIRED',
      maxAttempts: 3,
      // TLS is verified by default (Node's agent); a dead or stalled endpoint fails instead of hanging.
      requestHandler: {
        connectionTimeout: S3_TIMEOUTS.connectMs,
        socketTimeout: S3_TIMEOUTS.idleMs,
        requestTimeout: S3_TIMEOUTS.requestMs,
        throwOnRequestTimeout: true,
      },
    });
  }

  private params(prefix: string, signal?: AbortSignal): Omit<ListParams, 'delimiter'> {
    return { client: this.client, bucket: this.bucket, v2: this.opts.list_object_version === 'v2', prefix, signal };
  }

  private async call<T>(path: string, fn: () => Promise<T>): Promise<T> {
    try {
      return await fn();
    } catch (e) {
      throw s3Error(e, path, this.bucket);
    }
  }

  private get placeholderName(): string {
    return this.opts.placeholder || ALIST_PLACEHOLDER;
  }

  private dirObj(path: string, modified = this.mountedAt): Obj {
    return { name: basename(path), path: '/' + segments(path).join('/'), size: 0, isDir: true, modified };
  }

  async init(signal: AbortSignal): Promise<void> {
    // One cheap request proves endpoint, credentials and bucket; the SDK honours the signal.
    await this.call('/', () => anyBelow(this.params(this.keys.rootPrefix, signal)));
    this.ctx.log.debug({ bucket: this.bucket }, 's3 storage ready');
  }

  async drop(): Promise<void> {
    this.client.destroy();
    if (this.linkClient !== this.client) this.linkClient.destroy();
  }

  private async head(path: string, signal?: AbortSignal): Promise<Obj | undefined> {
    try {
      const r = await this.client.send(new HeadObjectCommand({ Bucket: this.bucket, Key: this.keys.key(path) }), { abortSignal: signal });
      return { name: basename(path), path, size: r.ContentLength ?? 0, isDir: false, modified: r.LastModified ?? new Date(0) };
    } catch (e) {
      const err = s3Error(e, path, this.bucket);
      if (err.code === 'NOT_FOUND') return undefined;
      throw err;
    }
  }

  private isDirPath(path: string, signal?: AbortSignal): Promise<boolean> {
    return this.call(path, () => anyBelow(this.params(this.keys.dirPrefix(path), signal)));
  }

  async get(path: string, args: CallArgs): Promise<Obj> {
    const p = '/' + segments(path).join('/');
    if (p === '/') return this.dirObj('/');
    const file = await this.head(p, args.signal);
    if (file) return file;
    if (await this.isDirPath(p, args.signal)) return this.dirObj(p);
    throw new VfsError('NOT_FOUND', undefined, { path: p });
  }

  async list(dir: Obj, args: CallArgs): Promise<Obj[]> {
    if (!dir.isDir) throw new VfsError('NOT_A_DIR', undefined, { path: dir.path });
    const prefix = this.keys.dirPrefix(dir.path);
    const out: Obj[] = [];
    let seen = false;
    await this.call(dir.path, async () => {
      for await (const page of pages({ ...this.params(prefix, args.signal), delimiter: '/' })) {
        for (const p of page.prefixes) {
          seen = true;
          const name = p.slice(prefix.length, -1);
          if (name && !unreachable(name)) out.push(this.dirObj(join(dir.path, name)));
        }
        for (const o of page.contents) {
          seen = true;
          const name = o.Key!.slice(prefix.length);
          if (!name || name === this.placeholderName || name === ALIST_PLACEHOLDER || unreachable(name)) continue;
          out.push({ name, path: join(dir.path, name), size: o.Size ?? 0, isDir: false, modified: o.LastModified ?? new Date(0) });
        }
      }
    });
    if (!seen && segments(dir.path).length) {
      if (await this.head(dir.path, args.signal)) throw new VfsError('NOT_A_DIR', undefined, { path: dir.path });
      throw new VfsError('NOT_FOUND', undefined, { path: dir.path });
    }
    return out;
  }

  async link(file: Obj): Promise<Link> {
    if (file.isDir) throw new VfsError('IS_A_DIR', undefined, { path: file.path });
    const hours = this.opts.sign_url_expire > 0 ? this.opts.sign_url_expire : 4;
    const seconds = Math.min(Math.round(hours * 3600), MAX_PRESIGN_SECONDS);
    const disposition = this.opts.add_filename_to_disposition ? `attachment; filename*=UTF-8''${rfc5987(file.name)}` : undefined;
    const cmd = new GetObjectCommand({ Bucket: this.bucket, Key: this.keys.key(file.path), ResponseContentDisposition: disposition });
    let url = await this.call(file.path, () => getSignedUrl(this.linkClient, cmd, { expiresIn: seconds }));
    if (this.opts.custom_host) {
      // A CDN in front of a public bucket needs no signature unless asked for one.
      if (!this.opts.enable_custom_host_presign) url = url.split('?')[0]!;
      if (this.opts.remove_bucket) url = withoutBucket(url, this.opts.custom_host, this.bucket);
    }
    return { kind: 'url', url, expiresAt: new Date(Date.now() + seconds * 1000) };
  }

  private async exists(path: string, signal?: AbortSignal): Promise<boolean> {
    return !!(await this.head(path, signal)) || (await this.isDirPath(path, signal));
  }

  async mkdir(parent: Obj, name: string, args: CallArgs): Promise<Obj> {
    if (!parent.isDir) throw new VfsError('NOT_A_DIR', undefined, { path: parent.path });
    const path = join(parent.path, validateName(name));
    if (await this.exists(path, args.signal)) throw new VfsError('EXISTS', undefined, { path });
    const key = this.keys.dirPrefix(path) + (this.opts.placeholder || '');
    await this.call(path, () => this.client.send(new PutObjectCommand({ Bucket: this.bucket, Key: key, Body: new Uint8Array(0), ContentLength: 0 }), { abortSignal: args.signal }));
    return this.dirObj(path, new Date());
  }

  async put(dstDir: Obj, stream: Readable, args: PutArgs): Promise<Obj> {
    if (!dstDir.isDir) throw new VfsError('NOT_A_DIR', undefined, { path: dstDir.path });
    const path = join(dstDir.path, validateName(args.name));
    if (await this.isDirPath(path, args.signal)) throw new VfsError('IS_A_DIR', undefined, { path });
    // The object appears with the upload itself: noReplace can only look first.
    if (args.noReplace && (await this.head(path, args.signal))) throw new VfsError('EXISTS', 'file exists', { path });
    const count = counter(args.size, args.onProgress);
    const partSize = partSizeFor(args.size);
    pipeline(stream, count, () => undefined); // a source error destroys `count`, which fails the upload
    const upload = new Upload({
      client: this.client,
      // The type is stored with the object: a presigned link answers with it (octet-stream made
      // browsers download a PDF or a video instead of showing it).
      params: { Bucket: this.bucket, Key: this.keys.key(path), Body: count, ContentType: contentTypeOf(args.name) },
      partSize,
      queueSize: QUEUE_SIZE,
      leavePartsOnError: false, // a failed multipart upload is aborted: nothing is left behind
    });
    const onAbort = () => {
      count.destroy(abortError(args.signal));
      void upload.abort();
    };
    args.signal?.addEventListener('abort', onAbort, { once: true });
    try {
      if (args.signal?.aborted) throw abortError(args.signal);
      await upload.done();
    } catch (e) {
      // A failed part makes lib-storage stop reading `count`, which destroys it with a bare
      // AbortError: no failure of the source, and it hid S3's own error (a part refused with
      // AccessDenied was answered 500 "operation aborted").
      const source = (count.errored as NodeJS.ErrnoException | null)?.code === 'ABORT_ERR' ? undefined : count.errored;
      count.destroy();
      if (args.signal?.aborted) throw abortError(args.signal);
      if (source || !(await this.storedAnyway(upload, path, Math.ceil(count.bytes / partSize)))) throw s3Error(source ?? e, path, this.bucket);
    } finally {
      args.signal?.removeEventListener('abort', onAbort);
    }
    // What S3 stored (its LastModified): our clock's time of the upload gave WebDAV's PUT an ETag
    // the file never had, and the client's next If-Match with it failed 412.
    const stored = await this.head(path, args.signal).catch(() => undefined);
    return stored ?? { name: args.name, path, size: count.bytes, isDir: false, modified: new Date() };
  }

  /**
   * Whether a multipart upload that failed at its Complete stored the object all the same: the SDK
   * retries a Complete whose answer was lost, and S3-compatible servers (MinIO, Ceph) answer the
   * retry NoSuchUpload, so an upload that was stored was reported failed ("object not found"). The
   * ETag S3 gives a multipart object, MD5 of its parts' MD5s then "-" and their count, names these
   * very parts (content), whatever else was there before.
   */
  private async storedAnyway(upload: Upload, path: string, partCount: number): Promise<boolean> {
    const parts = (upload as unknown as { uploadedParts?: Array<{ PartNumber: number; ETag: string }> }).uploadedParts ?? [];
    // Complete is only sent once every part is in: any other failure (S3 down) is not asked about again.
    if (!upload.uploadId || parts.length < 2 || parts.length !== partCount) return false;
    const md5 = createHash('md5');
    for (const p of [...parts].sort((a, b) => a.PartNumber - b.PartNumber)) md5.update(Buffer.from(p.ETag.replace(/"/g, ''), 'hex'));
    const r = await this.client.send(new HeadObjectCommand({ Bucket: this.bucket, Key: this.keys.key(path) })).catch(() => undefined);
    return r?.ETag?.replace(/"/g, '') === `${md5.digest('hex')}-${parts.length}`;
  }

  private async copyKey(from: string, to: string, signal?: AbortSignal): Promise<void> {
    await this.client.send(new CopyObjectCommand({ Bucket: this.bucket, Key: to, CopySource: copySource(this.bucket, from) }), { abortSignal: signal });
  }

  private async deleteKeys(keys: string[], signal?: AbortSignal): Promise<void> {
    for (let i = 0; i < keys.length; i += 1000) {
      const batch = keys.slice(i, i + 1000);
      const r = await this.client.send(new DeleteObjectsCommand({
        Bucket: this.bucket, Delete: { Objects: batch.map((Key) => ({ Key })), Quiet: true },
      }), { abortSignal: signal });
      const code = r.Errors?.[0]?.Code;
      // Per-key refusals come in a 200 answer: AccessDenied is a refusal as in s3Error.
      if (r.Errors?.length) throw new VfsError(code === 'AccessDenied' ? 'FORBIDDEN' : 'UPSTREAM', `S3 refused to delete ${r.Errors.length} object(s): ${code}`);
    }
  }

  /** Rename, move and copy: S3 has no rename, so every key below is copied (then deleted). */
  private async transfer(obj: Obj, dstDir: Obj, newName: string, keepSource: boolean, signal?: AbortSignal): Promise<Obj> {
    if (!dstDir.isDir) throw new VfsError('NOT_A_DIR', undefined, { path: dstDir.path });
    const dst = join(dstDir.path, validateName(newName));
    return this.call(obj.path, async () => {
      if (!obj.isDir) {
        const src = await this.head(obj.path, signal);
        if (!src) throw new VfsError('NOT_FOUND', undefined, { path: obj.path });
        if (await this.exists(dst, signal)) throw new VfsError('EXISTS', `file [${newName}] exists`, { path: dst });
        await this.copyKey(this.keys.key(obj.path), this.keys.key(dst), signal);
        if (!keepSource) await this.client.send(new DeleteObjectCommand({ Bucket: this.bucket, Key: this.keys.key(obj.path) }), { abortSignal: signal });
        return { ...src, name: newName, path: dst };
      }
      if (isWithin(obj.path, dst)) throw new VfsError('INVALID', 'the destination folder is a subfolder of the source folder');
      const from = this.keys.dirPrefix(obj.path);
      const keys = await allKeys(this.params(from, signal));
      if (!keys.length) throw new VfsError('NOT_FOUND', undefined, { path: obj.path });
      if (await this.exists(dst, signal)) throw new VfsError('EXISTS', `file [${newName}] exists`, { path: dst });
      const to = this.keys.dirPrefix(dst);
      // Every key a copy was sent for, done or not: one aborted by our signal (the client went away)
      // or whose answer was lost may still be made by S3, and was left behind as a partial folder.
      const sent: string[] = [];
      try {
        for (let i = 0; i < keys.length; i += 8) {
          const batch = keys.slice(i, i + 8);
          sent.push(...batch.map((k) => to + k.slice(from.length)));
          // Settled, not Promise.all: every copy of the batch has ended before any cleanup.
          const done = await Promise.allSettled(batch.map((k) => this.copyKey(k, to + k.slice(from.length), signal)));
          const failed = done.find((r) => r.status === 'rejected');
          if (failed) throw failed.reason;
        }
      } catch (e) {
        // The new name did not exist: what was copied of a failed copy is only a partial folder
        // there, which also made a retry fail with EXISTS. Best effort; the copy's error is the answer.
        await this.deleteKeys(sent).catch((err: unknown) => this.ctx.log.warn({ err, path: dst }, 's3: could not remove a partial copy'));
        throw e;
      }
      if (!keepSource) await this.deleteKeys(keys, signal);
      return this.dirObj(dst, new Date());
    });
  }

  rename(obj: Obj, newName: string, args: CallArgs): Promise<Obj> {
    const parent = this.dirObj('/' + segments(obj.path).slice(0, -1).join('/'));
    return this.transfer(obj, parent, newName, false, args.signal);
  }

  move(obj: Obj, dstDir: Obj, args: CallArgs): Promise<Obj> {
    return this.transfer(obj, dstDir, obj.name, false, args.signal);
  }

  copy(obj: Obj, dstDir: Obj, args: CallArgs): Promise<Obj> {
    return this.transfer(obj, dstDir, obj.name, true, args.signal);
  }

  async remove(obj: Obj, args: RemoveArgs): Promise<void> {
    await this.call(obj.path, async () => {
      if (!obj.isDir) {
        if (!(await this.head(obj.path, args.signal))) throw new VfsError('NOT_FOUND', undefined, { path: obj.path });
        await this.client.send(new DeleteObjectCommand({ Bucket: this.bucket, Key: this.keys.key(obj.path) }), { abortSignal: args.signal });
        return;
      }
      const prefix = this.keys.dirPrefix(obj.path);
      const params = this.params(prefix, args.signal);
      // onlyEmpty: the folder's own placeholder objects are all it may hold (looked at before any goes).
      const own = new Set([prefix, prefix + this.placeholderName, prefix + ALIST_PLACEHOLDER]);
      if (args.onlyEmpty) {
        for await (const page of pages(params)) {
          if (page.contents.some((o) => !own.has(o.Key!))) throw new VfsError('NOT_EMPTY', undefined, { path: obj.path });
        }
      }
      // Page by page, each deleted as it comes: the keys of a folder of millions of objects were
      // all held in memory first (about 100 bytes each).
      let found = false;
      for await (const page of pages(params)) {
        const keys = page.contents.map((o) => o.Key).filter((k): k is string => !!k);
        found ||= keys.length > 0;
        await this.deleteKeys(keys, args.signal);
      }
      if (!found) throw new VfsError('NOT_FOUND', undefined, { path: obj.path });
    });
  }
}
