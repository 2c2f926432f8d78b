/**
 * POST /api/fs/search (alist-compat §9; any method, like AList): names under `parent` holding every
 * keyword, paged, as the caller may see them. The search service applies base path, hide rules and
 * path passwords through the VFS's rules; this file only checks AList's paging rules and shapes
 * the answer (`parent` absolute, base path included; `type` 1 for folders, else from the name).
 */
import type { RoutePlugin } from '../route-types.js';
import { accessContext } from '../app.js';
import { ApiError, ok } from '../envelope.js';
import { OBJ_TYPE, typeOfName } from '../entry.js';
import { fields, int, str } from '../fs-common.js';
import { NOT_AVAILABLE } from '../../../src/search/service.js';

const routes: RoutePlugin = async (app, { core }) => {
  app.route({
    method: ['GET', 'POST'],
    url: '/api/fs/search',
    handler: async (req) => {
      // AList's middleware refuses before the request is even read.
      if (!core.search.enabled) throw new ApiError(500, NOT_AVAILABLE);
      const f = fields(req);
      const page = int(f, 'page');
      const perPage = int(f, 'per_page');
      if (page < 1) throw new ApiError(400, "page can't < 1");
      if (perPage < 1) throw new ApiError(400, "per_page can't < 1");
      const ctx = accessContext(req, str(f, 'password'));
      const r = await core.search.search(ctx, { parent: str(f, 'parent') || '/', keywords: str(f, 'keywords'), scope: int(f, 'scope'), page, perPage });
      return ok({
        content: r.hits.map((h) => ({
          parent: h.parent, name: h.name, is_dir: h.isDir, size: h.size, type: h.isDir ? OBJ_TYPE.FOLDER : typeOfName(core.settings, h.name),
        })),
        total: r.total,
      });
    },
  });
};

export default routes;
