/** Driver templates for the admin page (alist-compat §6), straight from the driver registry. */
import type { RoutePlugin } from '../route-types.js';
import { requireAdmin } from '../auth.js';
import { ApiError, ok } from '../envelope.js';
import { fields, str } from '../fs-common.js';

const routes: RoutePlugin = async (app, { core }) => {
  app.addHook('preHandler', requireAdmin);

  app.get('/api/admin/driver/list', async () => ok(core.registry.templates()));

  app.get('/api/admin/driver/names', async () => ok(core.registry.names()));

  app.get('/api/admin/driver/info', async (req) => {
    const name = str(fields(req), 'driver');
    const t = core.registry.template(name);
    if (!t) throw new ApiError(404, `driver [${name}] not found`);
    return ok(t);
  });
};

export default routes;
