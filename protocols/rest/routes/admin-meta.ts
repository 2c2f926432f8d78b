/**
 * Meta rule admin (alist-compat §13), delegating to core.metas (path cleaning, hide validation,
 * uniqueness, cache invalidation). Answers: bad id 400 (Go's strconv text), missing path or an
 * illegal hide line 400, unknown id 500 `failed get old meta: record not found`, duplicate path 500.
 */
import { isVfsError } from '../../../src/errors.js';
import type { MetaRecord } from '../../../src/store/types.js';
import type { MetaInput } from '../../../src/vfs/meta-service.js';
import type { RoutePlugin } from '../route-types.js';
import { requireAdmin } from '../auth.js';
import { ApiError, ok } from '../envelope.js';
import { flag, givenId, page, queryId } from '../admin-common.js';
import { int, str, type Fields } from '../fs-common.js';
import { bodyOf } from '../input.js';

const TEXT = ['password', 'hide', 'readme', 'header'] as const;
const FLAGS = ['p_sub', 'write', 'w_sub', 'h_sub', 'r_sub', 'header_sub'] as const;

function metaInput(v: unknown): MetaInput & { id: number } {
  if (!v || typeof v !== 'object' || Array.isArray(v)) throw new ApiError(400, 'invalid request: a JSON object body is required');
  const b = v as Fields;
  if (str(b, 'path').trim() === '') throw new ApiError(400, "Key: 'Meta.Path' Error:Field validation for 'Path' failed on the 'required' tag");
  const m: MetaInput & { id: number } = { id: int(b, 'id'), path: str(b, 'path') };
  for (const k of TEXT) if (b[k] !== undefined) m[k] = str(b, k);
  for (const k of FLAGS) if (b[k] !== undefined) m[k] = flag(b, k);
  return m;
}

/** A duplicate path is the store's EXISTS; AList answers DB errors with 500. */
async function saving(fn: () => Promise<MetaRecord>): Promise<void> {
  try {
    await fn();
  } catch (e) {
    if (isVfsError(e, 'EXISTS')) throw new ApiError(500, e.message);
    throw e;
  }
}

const routes: RoutePlugin = async (app, { core }) => {
  app.addHook('preHandler', requireAdmin);

  app.get('/api/admin/meta/list', async (req) => ok(page(await core.metas.list(), req.query as Fields)));

  app.get('/api/admin/meta/get', async (req) => ok(await core.metas.get(queryId(req.query as Fields))));

  app.post('/api/admin/meta/create', async (req) => {
    const { id, ...m } = metaInput(bodyOf(req));
    givenId({ id });
    await saving(() => core.metas.create(id > 0 ? { ...m, id } : m));
    return ok();
  });

  app.post('/api/admin/meta/update', async (req) => {
    const m = metaInput(bodyOf(req));
    await saving(() => core.metas.update(m));
    return ok();
  });

  app.post('/api/admin/meta/delete', async (req) => {
    await core.metas.delete(queryId(req.query as Fields));
    return ok();
  });
};

export default routes;
