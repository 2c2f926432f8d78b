/**
 * Offline download over REST (alist-compat §12, §8): POST /api/fs/add_offline_download and the tool
 * settings endpoints set_aria2 / set_qbit. Checks (bit2, target, tool, SSRF) are the task
 * service's; this file reads the request and shapes AList's answers.
 */
import { isVfsError } from '../../../src/errors.js';
import type { RoutePlugin } from '../route-types.js';
import { accessContext } from '../app.js';
import { ApiError, ok } from '../envelope.js';
import { fields, str, strArray } from '../fs-common.js';
import { taskJson } from './tasks.js';

const routes: RoutePlugin = async (app, { core }) => {
  const offline = core.tasks.offline;

  app.post('/api/fs/add_offline_download', async (req) => {
    const f = fields(req);
    const ctx = accessContext(req);
    const tasks = await offline.add(ctx, {
      urls: strArray(f, 'urls').filter((u) => u.trim() !== ''),
      path: str(f, 'path'),
      tool: str(f, 'tool'),
      delete_policy: str(f, 'delete_policy'),
    });
    return ok({ tasks: tasks.map(taskJson) });
  });

  app.post('/api/admin/setting/set_aria2', async (req) => {
    const f = fields(req);
    // read outside the try: a field of the wrong type is a 400, not a failed aria2; and a missing
    // address is a 400 before anything is saved (it erased the configured one and the secret)
    const uri = str(f, 'uri');
    if (uri === '') throw new ApiError(400, 'invalid request: uri is required');
    const secret = str(f, 'secret');
    try {
      return ok(`aria2 version: ${await offline.setAria2(uri, secret)}`);
    } catch (e) {
      if (isVfsError(e, 'INVALID')) throw new ApiError(400, e.message);
      throw new ApiError(500, `failed get aria2 version: ${(e as Error).message}`);
    }
  });

  app.post('/api/admin/setting/set_qbit', async (req) => {
    const f = fields(req);
    const url = str(f, 'url');
    if (url === '') throw new ApiError(400, 'invalid request: url is required');
    try {
      await offline.setQbit(url, str(f, 'seedtime') || '0');
    } catch (e) {
      if (isVfsError(e, 'INVALID')) throw new ApiError(400, e.message);
      // saved, but qBittorrent refused or could not be reached: AList answers the reason with 500
      throw new ApiError(500, (e as Error).message);
    }
    return ok('ok');
  });
};

export default routes;
