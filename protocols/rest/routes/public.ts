/**
 * Public endpoints: no identity needed (alist-compat §5). AList registers them for any method.
 */
import type { RoutePlugin } from '../route-types.js';
import { ok } from '../envelope.js';

/**
 * Archive extensions the server can browse and extract. treegate has no archive tools yet, and an
 * empty list makes the front end hide archive browsing instead of offering calls that would fail.
 */
const ARCHIVE_EXTENSIONS: string[] = [];

const METHODS = ['GET', 'POST'] as const;

const routes: RoutePlugin = async (app, { core }) => {
  const open = { config: { auth: false } };
  app.route({ method: [...METHODS], url: '/api/public/settings', ...open, handler: async () => ok(core.settings.publicValues()) });
  app.route({ method: [...METHODS], url: '/api/public/offline_download_tools', ...open, handler: async () => ok(core.tasks.offline.readyTools()) });
  app.route({ method: [...METHODS], url: '/api/public/archive_extensions', ...open, handler: async () => ok(ARCHIVE_EXTENSIONS) });
};

export default routes;
