/**
 * Driver path ↔ object key mapping and S3 error mapping. A driver path `/a/b` under root folder
 * `/base` is the key `base/a/b`; the folder `/a` is the prefix `base/a/`; the storage root is
 * `base/` (or `` for a whole bucket).
 */
import { VfsError } from '../../src/errors.js';
import { segments } from '../../src/paths.js';

export class KeyMap {
  /** '' or 'base/' */
  readonly rootPrefix: string;

  constructor(rootFolder: string) {
    const s = segments(rootFolder);
    this.rootPrefix = s.length ? s.join('/') + '/' : '';
  }

  /** The object key of a file at a driver path. */
  key(path: string): string {
    return this.rootPrefix + segments(path).join('/');
  }

  /** The prefix of a folder's children (ends with `/`, or the root prefix). */
  dirPrefix(path: string): string {
    const s = segments(path);
    return s.length ? this.rootPrefix + s.join('/') + '/' : this.rootPrefix;
  }
}

/** `CopySource` wants `bucket/key` URL-encoded (the SDK does not do it). */
export function copySource(bucket: string, key: string): string {
  return `${bucket}/${key.split('/').map(encodeURIComponent).join('/')}`;
}

interface SdkError {
  name?: string;
  message?: string;
  Code?: string;
  $metadata?: { httpStatusCode?: number };
}

/** Map an AWS SDK failure to a VfsError; credentials or bucket problems get a message that says so. */
export function s3Error(e: unknown, path?: string, bucket?: string): VfsError {
  if (e instanceof VfsError) return e;
  const err = (e ?? {}) as SdkError;
  const name = err.name ?? err.Code ?? '';
  const status = err.$metadata?.httpStatusCode;
  if (name === 'AbortError') return new VfsError('UPSTREAM', 'operation aborted', { path, cause: e });
  if (name === 'NoSuchBucket') return new VfsError('UPSTREAM', `bucket ${bucket ?? ''} does not exist`, { path, cause: e });
  // A 404 too, but of the upload, not of a file: an upload answered "object not found" (WebDAV 404).
  if (name === 'NoSuchUpload') return new VfsError('UPSTREAM', 'S3 no longer knows the multipart upload (NoSuchUpload)', { path, cause: e });
  if (name === 'NoSuchKey' || name === 'NotFound' || status === 404) return new VfsError('NOT_FOUND', undefined, { path, cause: e });
  // AccessDenied names good credentials that the key's rights or the bucket policy do not let do
  // this: a refusal (403), as FTP's. It was a 500 telling to check credentials that were fine. A bare
  // 403 (HEAD answers have no body) may be either, so it keeps the hint.
  if (name === 'AccessDenied') {
    return new VfsError('FORBIDDEN', `S3 refused it (AccessDenied): the key's rights or the bucket policy do not allow it`, { path, cause: e });
  }
  if (['InvalidAccessKeyId', 'SignatureDoesNotMatch', 'Forbidden'].includes(name) || status === 403) {
    return new VfsError('UPSTREAM', `access denied by S3 (${name || status}): check access_key_id and secret_access_key`, { path, cause: e });
  }
  const code = (e as NodeJS.ErrnoException).code;
  // The SDK names a reset connection TimeoutError too (so that it is retried): a connection a proxy
  // or the endpoint cut read "S3 endpoint timed out: socket hang up".
  const reset = code === 'ECONNRESET' || code === 'EPIPE';
  if (name === 'TimeoutError' && !reset) return new VfsError('UPSTREAM', `S3 endpoint timed out: ${err.message ?? ''}`.trim(), { path, cause: e });
  if (code) return new VfsError('UPSTREAM', `cannot reach S3 endpoint: ${code}`, { path, cause: e });
  // A HEAD answer has no body, so no error code: the SDK names it 'Unknown', and a 503 (S3 busy,
  // throttling) read "S3 error: Unknown". The status is then all S3 said.
  const what = name && name !== 'Unknown' ? name : status ? `HTTP ${status}` : err.message || 'unknown';
  return new VfsError('UPSTREAM', `S3 error: ${what}`, { path, cause: e });
}
