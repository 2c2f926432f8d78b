/** Helpers shared by the admin CRUD routes: AList's query id parsing and list paging. */
import { ApiError } from './envelope.js';
import { int, paginate, type Fields } from './fs-common.js';

/** Go's strconv.Atoi on the `id` query value; failure is a 400 with Go's text. */
export function queryId(q: Fields): number {
  const raw = typeof q.id === 'string' ? q.id : q.id === undefined ? '' : String(q.id);
  if (!/^[+-]?\d+$/.test(raw) || !Number.isSafeInteger(Number(raw))) {
    throw new ApiError(400, `strconv.Atoi: parsing ${JSON.stringify(raw)}: invalid syntax`);
  }
  return Number(raw);
}

/** `{content, total}` of one page (page<1 → 1, per_page<1 → all). */
export function page<T>(items: T[], q: Fields): { content: T[]; total: number } {
  return { content: paginate(items, int(q, 'page'), int(q, 'per_page')), total: items.length };
}
