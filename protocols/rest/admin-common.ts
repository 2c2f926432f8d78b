/** Helpers shared by the admin CRUD routes: AList's query id parsing and list paging. */
import { ApiError } from './envelope.js';
import { int, paginate, type Fields } from './fs-common.js';
import { scalar } from './input.js';

/**
 * The largest `id` a create may choose (AList inserts a given id as is). New ids count up from
 * the highest one: past 2^53 they are no longer exact, so two records got the same id, one of
 * them vanished from the tree and neither could be fetched or deleted (`id` queries are exact).
 */
export const MAX_GIVEN_ID = 2 ** 31 - 1;

/** The `id` of a create body: 0 or absent picks the next free one; above MAX_GIVEN_ID is a 400. */
export function givenId(b: Fields): number {
  const id = int(b, 'id');
  if (id > MAX_GIVEN_ID) throw new ApiError(400, `invalid request: id must be at most ${MAX_GIVEN_ID}`);
  return id;
}

/** Go's strconv.Atoi on the `id` query value; failure is a 400 with Go's text. */
export function queryId(q: Fields): number {
  const raw = typeof q.id === 'string' ? q.id : q.id === undefined ? '' : String(q.id);
  if (!/^[+-]?\d+$/.test(raw) || !Number.isSafeInteger(Number(raw))) {
    throw new ApiError(400, `strconv.Atoi: parsing ${JSON.stringify(raw)}: invalid syntax`);
  }
  return Number(raw);
}

/**
 * A boolean field of an admin record: JSON true/false (or null, Go's zero value), and the texts
 * a form body carries. Anything else is a 400 as gin's binding refuses it: read loosely, a
 * `"p_sub": "yes"` or `"disabled": "yes"` would silently save the opposite of what was meant.
 */
export function flag(o: Fields, field: string): boolean {
  const v = scalar(o, field);
  if (v === true || v === 'true' || v === 1 || v === '1') return true;
  if (v === false || v === 'false' || v === 0 || v === '0' || v === null) return false;
  throw new ApiError(400, `invalid request: ${field} must be a boolean`);
}

/** `{content, total}` of one page (page<1 → 1, per_page<1 → all on page 1, later pages empty). */
export function page<T>(items: T[], q: Fields): { content: T[]; total: number } {
  return { content: paginate(items, int(q, 'page'), int(q, 'per_page')), total: items.length };
}
