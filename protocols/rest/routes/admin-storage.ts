/**
 * Storage admin (alist-compat §7), delegating to core.storages. AList answers every failure of
 * these endpoints with code 500 (create also with data `{id}`), except a bad `id` query (400) and a
 * missing mount_path (400, gin's binding text).
 */
import type { Core } from '../../../src/core.js';
import { VfsError } from '../../../src/errors.js';
import type { StorageRecord } from '../../../src/store/types.js';
import type { StorageInput } from '../../../src/vfs/storages.js';
import type { RoutePlugin } from '../route-types.js';
import { requireAdmin } from '../auth.js';
import { ApiError, ok } from '../envelope.js';
import { formatTime } from '../entry.js';
import { flag, givenId, page, queryId } from '../admin-common.js';
import { int, str, type Fields } from '../fs-common.js';
import { bodyOf } from '../input.js';

/** Service errors → 500 with the service's message (AList's code for all of them). */
async function as500<T>(fn: () => Promise<T>, data: unknown = null): Promise<T> {
  try {
    return await fn();
  } catch (e) {
    if (e instanceof VfsError) throw new ApiError(500, e.message, data);
    throw e;
  }
}

const view = (r: StorageRecord) => ({ ...r, modified: formatTime(new Date(r.modified)) });

const STRINGS = ['remark', 'order_by', 'order_direction', 'extract_folder', 'webdav_policy', 'down_proxy_url'] as const;
const BOOLS = ['disabled', 'disable_index', 'enable_sign', 'web_proxy', 'proxy_range'] as const;

/**
 * `addition` as JSON text. AList takes only text; an object is accepted for scripts' convenience,
 * but one nested too deeply for JSON.stringify (a RangeError) is the client's fault: 400, not 500.
 */
function additionText(v: unknown): string {
  if (typeof v === 'string') return v;
  try {
    return JSON.stringify(v);
  } catch {
    throw new ApiError(400, 'invalid request: addition is nested too deeply');
  }
}

/** The body as the service's typed input (only known fields; AList's JSON types, loosely coerced). */
function storageInput(b: Fields): StorageInput & { id: number } {
  if (str(b, 'mount_path').trim() === '') {
    throw new ApiError(400, "Key: 'Storage.MountPath' Error:Field validation for 'MountPath' failed on the 'required' tag");
  }
  const input: StorageInput & { id: number } = { id: int(b, 'id'), mount_path: str(b, 'mount_path'), driver: str(b, 'driver') };
  if (b.order !== undefined) input.order = int(b, 'order');
  if (b.cache_expiration !== undefined) input.cache_expiration = int(b, 'cache_expiration');
  if (b.addition !== undefined) input.addition = additionText(b.addition);
  for (const k of STRINGS) if (b[k] !== undefined) input[k] = str(b, k);
  for (const k of BOOLS) if (b[k] !== undefined) input[k] = flag(b, k);
  return input;
}

function body(v: unknown): Fields {
  if (!v || typeof v !== 'object' || Array.isArray(v)) throw new ApiError(400, 'invalid request: a JSON object body is required');
  return v as Fields;
}

const routes: RoutePlugin = async (app, { core }) => {
  const s: Core['storages'] = core.storages;
  app.addHook('preHandler', requireAdmin);

  app.get('/api/admin/storage/list', async (req) => ok(page((await s.list()).map(view), req.query as Fields)));

  app.get('/api/admin/storage/get', async (req) => {
    const id = queryId(req.query as Fields);
    return ok(view(await as500(() => s.get(id))));
  });

  app.post('/api/admin/storage/create', async (req) => {
    const { id: _ignored, ...input } = storageInput(body(bodyOf(req)));
    const given = givenId(req.body as Fields);
    const change = await as500(() => s.create(given > 0 ? { ...input, id: given } : input), { id: 0 });
    if (change.error) throw new ApiError(500, change.error.message, { id: change.record.id });
    return ok({ id: change.record.id });
  });

  app.post('/api/admin/storage/update', async (req) => {
    const input = storageInput(body(bodyOf(req)));
    const change = await as500(() => s.update(input));
    if (change.error) throw new ApiError(500, change.error.message);
    return ok();
  });

  app.post('/api/admin/storage/delete', async (req) => {
    const id = queryId(req.query as Fields);
    await as500(() => s.delete(id));
    return ok();
  });

  app.post('/api/admin/storage/enable', async (req) => {
    const id = queryId(req.query as Fields);
    const change = await as500(() => s.enable(id));
    if (change.error) throw new ApiError(500, change.error.message);
    return ok();
  });

  app.post('/api/admin/storage/disable', async (req) => {
    const id = queryId(req.query as Fields);
    await as500(() => s.disable(id));
    return ok();
  });

  // AList answers at once and reloads in the background.
  app.post('/api/admin/storage/load_all', async (req) => {
    void s.loadAll().catch((err: unknown) => req.log.error({ err }, 'load_all failed'));
    return ok();
  });
};

export default routes;
