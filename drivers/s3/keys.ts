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
  if (name === 'TimeoutError') return new VfsError('UPSTREAM', `S3 endpoint timed out: ${err.message ?? ''}`.trim(), { path, cause: e });
  const code = (e as NodeJS.ErrnoException).code;
  if (code) return new VfsError('UPSTREAM', `cannot reach S3 endpoint: ${code}`, { path, cause: e });
  return new VfsError('UPSTREAM', `S3 error: ${name || err.message || 'unknown'}`, { path, cause: e });
}
