/**
 * Small helpers shared by the fs route plugins: reading AList request fields (JSON body, form or
 * query, loosely typed as gin binds them), paging, and whether a file's links need a sign.
 */
import type { FastifyRequest } from 'fastify';
import type { Core } from '../../src/core.js';
import type { StorageInfo } from '../../src/vfs/types.js';
import { signPath } from '../../src/sign.js';
import { isVfsError } from '../../src/errors.js';
import { ApiError } from './envelope.js';

export type Fields = Record<string, unknown>;

/** The request's fields: a JSON/form body object, else the query string (AList binds either). */
export function fields(req: FastifyRequest): Fields {
  const b = req.body;
  if (b && typeof b === 'object' && !Array.isArray(b)) return b as Fields;
  const q = req.query;
  return q && typeof q === 'object' ? (q as Fields) : {};
}

export function str(v: unknown): string {
  if (typeof v === 'string') return v;
  if (typeof v === 'number' || typeof v === 'boolean') return String(v);
  return '';
}

export function int(v: unknown): number {
  const n = typeof v === 'number' ? v : typeof v === 'string' && v.trim() !== '' ? Number(v) : 0;
  return Number.isFinite(n) ? Math.trunc(n) : 0;
}

export function bool(v: unknown): boolean {
  return v === true || v === 'true' || v === 1 || v === '1';
}

/** A string array field; a non-array is a 400 like gin's binding error. */
export function strArray(v: unknown, field: string): string[] {
  if (v === undefined || v === null) return [];
  if (!Array.isArray(v)) throw new ApiError(400, `invalid request: ${field} must be an array of strings`);
  return v.map((x) => str(x));
}

/** AList paging: page<1 → 1, per_page<1 → everything. */
export function paginate<T>(items: T[], page: number, perPage: number): T[] {
  if (perPage < 1) return items;
  const p = page < 1 ? 1 : page;
  return items.slice((p - 1) * perPage, p * perPage);
}

/** Must links to files of this folder carry a sign: sign_all, the storage's enable_sign, or a path password. */
export function signRequired(core: Core, storage: StorageInfo | undefined, passwordProtected: boolean): boolean {
  return core.settings.bool('sign_all') || !!storage?.enableSign || passwordProtected;
}

/** The sign for an absolute virtual path, or '' when none is required. */
export function signIf(core: Core, required: boolean, vpath: string): string {
  return required ? signPath(core.settings, vpath) : '';
}

/** Does the storage serve files through this server (AList: only_local, only_proxy or web_proxy). */
export function mustProxy(s: StorageInfo | undefined): boolean {
  return !!s && (s.config.only_local || s.config.only_proxy || s.webProxy);
}

/** First line of down_proxy_url without a trailing slash ('' when unset). */
export function downProxy(s: StorageInfo | undefined): string {
  return (s?.downProxyUrl ?? '').split('\n')[0]!.trim().replace(/\/+$/, '');
}

/** Run `fn`; a VfsError of `code` becomes the given envelope answer instead. */
export async function mapCode<T>(fn: () => Promise<T>, code: Parameters<typeof isVfsError>[1], answer: (e: Error) => ApiError): Promise<T> {
  try {
    return await fn();
  } catch (e) {
    if (isVfsError(e, code)) throw answer(e);
    throw e;
  }
}
