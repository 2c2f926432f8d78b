/**
 * Paged listing over ListObjects (v1) or ListObjectsV2, as the list_object_version option says:
 * some S3-compatible services only implement one of them.
 */
import { ListObjectsCommand, ListObjectsV2Command, type S3Client, type _Object } from '@aws-sdk/client-s3';

export interface Page {
  contents: _Object[];
  prefixes: string[];
}

export interface ListParams {
  client: S3Client;
  bucket: string;
  v2: boolean;
  prefix: string;
  /** '/' for one level, undefined for everything below the prefix. */
  delimiter?: string;
  /** Stop after this many keys (existence checks). */
  maxKeys?: number;
  signal?: AbortSignal;
}

/** Every page of a listing, lazily. */
export async function* pages(p: ListParams): AsyncGenerator<Page> {
  let token: string | undefined;
  for (;;) {
    const common = { Bucket: p.bucket, Prefix: p.prefix, Delimiter: p.delimiter, MaxKeys: p.maxKeys };
    let page: Page;
    let next: string | undefined;
    if (p.v2) {
      const r = await p.client.send(new ListObjectsV2Command({ ...common, ContinuationToken: token }), { abortSignal: p.signal });
      page = { contents: r.Contents ?? [], prefixes: (r.CommonPrefixes ?? []).map((c) => c.Prefix!).filter(Boolean) };
      next = r.IsTruncated ? r.NextContinuationToken : undefined;
    } else {
      const r = await p.client.send(new ListObjectsCommand({ ...common, Marker: token }), { abortSignal: p.signal });
      page = { contents: r.Contents ?? [], prefixes: (r.CommonPrefixes ?? []).map((c) => c.Prefix!).filter(Boolean) };
      // v1 gives NextMarker only with a delimiter; otherwise the last key is the marker.
      const last = [page.contents.at(-1)?.Key, page.prefixes.at(-1)].filter((k): k is string => !!k).sort().at(-1);
      next = r.IsTruncated ? r.NextMarker ?? last : undefined;
    }
    yield page;
    if (!next || p.maxKeys !== undefined) return;
    token = next;
  }
}

/** Every object key below a prefix (recursive). */
export async function allKeys(p: Omit<ListParams, 'delimiter'>): Promise<string[]> {
  const keys: string[] = [];
  for await (const page of pages(p)) for (const o of page.contents) if (o.Key) keys.push(o.Key);
  return keys;
}

/** True when anything exists below the prefix. */
export async function anyBelow(p: Omit<ListParams, 'delimiter' | 'maxKeys'>): Promise<boolean> {
  for await (const page of pages({ ...p, maxKeys: 1 })) return page.contents.length > 0 || page.prefixes.length > 0;
  return false;
}
