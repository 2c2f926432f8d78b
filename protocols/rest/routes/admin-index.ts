/**
 * The search index admin API (alist-compat §8): build, update, stop, clear, progress. Admin only
 * (the auth hook guards /api/admin/*); every call answers 500 `search not available` while
 * search_index is `none`, 400 `index is running` / `index is not running` as AList does.
 */
import type { RoutePlugin } from '../route-types.js';
import { ok } from '../envelope.js';
import { formatTime } from '../entry.js';
import { fields, int, strArray, type Fields } from '../fs-common.js';

/** An optional list of paths (empty ones dropped); undefined when absent. */
function paths(o: Fields, field: string): string[] | undefined {
  if (o[field] === undefined || o[field] === null) return undefined;
  return strArray(o, field).filter((p) => p !== '');
}

const routes: RoutePlugin = async (app, { core }) => {
  const s = core.search;

  app.post('/api/admin/index/build', async (req) => {
    const f = fields(req);
    s.build({
      paths: paths(f, 'paths'),
      maxDepth: f.max_depth === undefined ? undefined : int(f, 'max_depth'),
      ignorePaths: paths(f, 'ignore_paths'),
      clear: f.clear === undefined ? undefined : f.clear === true || f.clear === 'true',
    });
    return ok();
  });

  app.post('/api/admin/index/update', async (req) => {
    const f = fields(req);
    s.update(paths(f, 'paths') ?? [], f.max_depth === undefined ? undefined : int(f, 'max_depth'));
    return ok();
  });

  app.post('/api/admin/index/stop', async () => {
    await s.stop();
    return ok();
  });

  app.post('/api/admin/index/clear', async () => {
    s.clear();
    return ok();
  });

  app.route({
    method: ['GET', 'POST'],
    url: '/api/admin/index/progress',
    handler: async () => {
      const p = s.progress();
      return ok({
        obj_count: p.obj_count,
        is_done: p.is_done,
        last_done_time: p.last_done_time === null ? null : formatTime(new Date(p.last_done_time)),
        error: p.error,
      });
    },
  });
};

export default routes;
