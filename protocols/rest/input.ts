/**
 * Small, strict readers for request bodies and query strings. AList clients send JSON (or forms),
 * sometimes without a content type; app.ts parses both into a plain object. These helpers turn a
 * missing field, a wrong type or a non-object body into code 400 with a message naming the field,
 * instead of letting `undefined` or a number leak into the store.
 */
import type { FastifyRequest } from 'fastify';
import { ApiError } from './envelope.js';

export type Fields = Record<string, unknown>;

/**
 * Marks a body parsed from a form (app.ts). Form values are text, and repeated keys arrive as
 * arrays: gin binds a scalar field to the first value and a list field to all of them (`names=a`
 * is `["a"]`), while a JSON body keeps its types strictly.
 */
export const FORM = Symbol('form body');

/** A field's value as bound for a scalar: a form's repeated key counts with its first value. */
export function scalar(o: Fields, field: string): unknown {
  const v = o[field];
  return Array.isArray(v) && (o as { [FORM]?: boolean })[FORM] ? v[0] : v;
}

/** A field's value as bound for a list: a form's single value is a list of one. */
export function list(o: Fields, field: string): unknown {
  const v = o[field];
  return typeof v === 'string' && (o as { [FORM]?: boolean })[FORM] ? [v] : v;
}

const invalid = (msg: string) => new ApiError(400, `invalid request: ${msg}`);

/** Marks a request labelled JSON whose body was empty (app.ts). */
export const EMPTY_JSON = Symbol('empty JSON body');

/**
 * The parsed body of a route that reads one. A body labelled JSON but empty is AList's 400 `EOF`
 * (gin's JSON binding reads nothing); routes taking their input from the query never call this,
 * and accept such a request as AList does.
 */
export function bodyOf(req: FastifyRequest): unknown {
  if ((req as { [EMPTY_JSON]?: boolean })[EMPTY_JSON]) throw new ApiError(400, 'EOF');
  return req.body;
}

/** The body as an object; an empty body (but not one labelled JSON) is `{}`. Arrays and scalars are refused. */
export function bodyObject(req: FastifyRequest): Fields {
  const b = bodyOf(req);
  if (b === undefined || b === null) return {};
  if (typeof b !== 'object' || Array.isArray(b)) throw invalid('body must be a JSON object');
  return b as Fields;
}

/** An optional string field: absent or null → undefined; any other non-string → 400. */
export function optString(o: Fields, field: string): string | undefined {
  const v = scalar(o, field);
  if (v === undefined || v === null) return undefined;
  if (typeof v !== 'string') throw invalid(`${field} must be a string`);
  return v;
}

/** A required, non-empty string field. `message` replaces the default 400 text when given. */
export function reqString(o: Fields, field: string, message?: string): string {
  const v = optString(o, field);
  if (v === undefined || v === '') throw message ? new ApiError(400, message) : invalid(`${field} is required`);
  return v;
}

/** A required string field of at most `max` characters (UTF-16 units, as JavaScript counts). */
export function reqShortString(o: Fields, field: string, max: number): string {
  const v = reqString(o, field);
  if (v.length > max) throw invalid(`${field} must be at most ${max} characters`);
  return v;
}

/**
 * A username's length bound: it is kept in the store, sent in every token and every listing of
 * users, so a user renaming themself must not be able to make it a megabyte.
 */
export const MAX_USERNAME_CHARS = 255;

/**
 * An optional string field of at most `max` characters: for what a user may keep in the store about
 * themself (it is written whole on every change and sent in every listing of users).
 */
export function optShortString(o: Fields, field: string, max: number): string | undefined {
  const v = optString(o, field);
  if (v !== undefined && v.length > max) throw invalid(`${field} must be at most ${max} characters`);
  return v;
}

/** An SSO id's length bound (an OpenID Connect `sub` is at most 255 characters), as MAX_USERNAME_CHARS. */
export const MAX_SSO_ID_CHARS = 255;

/**
 * A scalar field as gin binds it from a form (app.ts marks form bodies): the text of an integer or
 * boolean stands for it, and an empty value counts as absent. A JSON body keeps its types strictly.
 */
function formScalar(o: Fields, field: string, parse: (text: string) => number | boolean | undefined): unknown {
  const v = scalar(o, field);
  if (typeof v !== 'string' || !(o as { [FORM]?: boolean })[FORM]) return v;
  return v === '' ? undefined : parse(v) ?? v;
}

/** An optional integer field (JSON number without fraction, or its digits in a form). */
export function optInt(o: Fields, field: string, min = Number.MIN_SAFE_INTEGER, max = Number.MAX_SAFE_INTEGER): number | undefined {
  const v = formScalar(o, field, (t) => (/^[+-]?\d{1,15}$/.test(t) ? Number(t) : undefined));
  if (v === undefined || v === null) return undefined;
  if (typeof v !== 'number' || !Number.isInteger(v)) throw invalid(`${field} must be an integer`);
  if (v < min || v > max) throw invalid(`${field} must be between ${min} and ${max}`);
  return v;
}

export function optBool(o: Fields, field: string): boolean | undefined {
  const v = formScalar(o, field, (t) => (t === 'true' || t === '1' ? true : t === 'false' || t === '0' ? false : undefined));
  if (v === undefined || v === null) return undefined;
  if (typeof v !== 'boolean') throw invalid(`${field} must be true or false`);
  return v;
}

/** A query parameter as a string ('' when absent; the first value when repeated). */
export function queryString(req: FastifyRequest, name: string): string {
  const v = (req.query as Record<string, unknown> | undefined)?.[name];
  if (Array.isArray(v)) return typeof v[0] === 'string' ? v[0] : '';
  return typeof v === 'string' ? v : '';
}

/** A required integer query parameter; anything else answers 400 with `message`. */
export function queryId(req: FastifyRequest, name: string, message: string): number {
  const s = queryString(req, name);
  if (!/^\d{1,15}$/.test(s)) throw new ApiError(400, message);
  return Number(s);
}

/** AList's paging: page < 1 → 1, per_page < 1 → everything (on page 1). Non-integers → 400. */
export function paging(req: FastifyRequest): { page: number; perPage: number } {
  const read = (name: string) => {
    const s = queryString(req, name);
    if (s === '') return 0;
    if (!/^-?\d{1,9}$/.test(s)) throw invalid(`${name} must be an integer`);
    return Number(s);
  };
  return { page: Math.max(read('page'), 1), perPage: read('per_page') };
}

/** One page of `items` per AList's paging rules (per_page<1: everything on page 1, later pages empty; see fs-common paginate). */
export function pageOf<T>(items: T[], p: { page: number; perPage: number }): T[] {
  if (p.perPage < 1) return p.page === 1 ? items : [];
  return items.slice((p.page - 1) * p.perPage, p.page * p.perPage);
}
