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
import { bodyObject, bodyOf, FORM, list, scalar, type Fields } from './input.js';

export type { Fields };

/**
 * The request's fields: the body when there is one, else the query string (AList binds either).
 * A body that is not a JSON object is a 400, never an empty object: with every field then at its
 * default (the root folder), a remove or a recursive move would act on `/`. Query parameters bind
 * as form values do (see FORM): a repeated one counts with its first value for a scalar field.
 */
export function fields(req: FastifyRequest): Fields {
  if (bodyOf(req) !== undefined && req.body !== null) return bodyObject(req);
  const q = req.query;
  if (!q || typeof q !== 'object') return {};
  return { ...(q as Fields), [FORM]: true };
}

const invalid = (field: string, what: string) => new ApiError(400, `invalid request: ${field} must be ${what}`);

/** A string field, '' when absent. Any other JSON type is a 400, as gin's binding error is. */
export function str(o: Fields, field: string): string {
  const v = scalar(o, field);
  if (v === undefined || v === null) return '';
  if (typeof v !== 'string') throw invalid(field, 'a string');
  return v;
}

/**
 * An integer field, 0 when absent: a JSON number, or digits (query strings are text). Fractions,
 * other types and numbers past 2^53 are a 400 (an id of 1e20 would collide with its neighbours).
 */
export function int(o: Fields, field: string): number {
  const v = scalar(o, field);
  if (v === undefined || v === null || v === '') return 0;
  const n = typeof v === 'number' ? v : typeof v === 'string' && /^\s*[+-]?\d{1,15}\s*$/.test(v) ? Number(v) : NaN;
  if (!Number.isSafeInteger(n)) throw invalid(field, 'an integer');
  return n;
}

export function bool(v: unknown): boolean {
  return v === true || v === 'true' || v === 1 || v === '1';
}

/** A string array field; anything else (a string, numbers inside) is a 400 like gin's binding error. */
export function strArray(o: Fields, field: string): string[] {
  const v = list(o, field);
  if (v === undefined || v === null) return [];
  if (!Array.isArray(v) || !v.every((x) => typeof x === 'string')) throw invalid(field, 'an array of strings');
  return v;
}

/**
 * AList paging: page<1 → 1, per_page<1 → everything on page 1. AList turns per_page<1 into MaxInt
 * (model.PageReq.Validate), so any later page starts past the end and is empty: a script walking
 * pages until `content` is empty stops instead of being handed everything again on every page.
 */
export function paginate<T>(items: T[], page: number, perPage: number): T[] {
  const p = page < 1 ? 1 : page;
  if (perPage < 1) return p === 1 ? items : [];
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
