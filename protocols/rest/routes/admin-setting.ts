/**
 * Setting administration (alist-compat §8). Admin only (enforced by the auth hook for /api/admin/*).
 * set_aria2 / set_qbit arrive with the tasks work.
 */
import type { RoutePlugin } from '../route-types.js';
import { ApiError, ok } from '../envelope.js';
import { bodyOf, queryString } from '../input.js';
import { FLAG } from '../../../src/settings/catalog.js';
import { validateSetting, type SettingItem } from '../../../src/settings/settings.js';
import { isVfsError } from '../../../src/errors.js';

/** `1,2` → [1, 2]; Go's strconv error text for anything else (what AList answers). */
function parseGroups(text: string): number[] {
  return text.split(',').map((s) => {
    if (!/^[+-]?\d{1,9}$/.test(s)) throw new ApiError(400, `strconv.Atoi: parsing ${JSON.stringify(s)}: invalid syntax`);
    return Number(s);
  });
}

const routes: RoutePlugin = async (app, { core }) => {
  const { settings } = core;

  app.get('/api/admin/setting/list', async (req) => {
    const group = queryString(req, 'group');
    const groups = queryString(req, 'groups');
    // `groups` wins when both are given (AList's ListSettings reads `group` only without `groups`).
    const wanted = groups !== '' ? parseGroups(groups) : group !== '' ? parseGroups(group) : undefined;
    const items = settings.items().filter((i) => !wanted || wanted.includes(i.group));
    return ok(items.sort((a, b) => a.index - b.index));
  });

  app.get('/api/admin/setting/get', async (req) => {
    const key = queryString(req, 'key');
    const keys = queryString(req, 'keys');
    if (key === '' && keys !== '') {
      return ok(keys.split(',').map((k) => settings.item(k)).filter((i): i is SettingItem => i !== undefined));
    }
    const item = settings.item(key);
    if (!item) throw new ApiError(400, 'record not found');
    return ok(item);
  });

  app.post('/api/admin/setting/save', async (req) => {
    const body = bodyOf(req);
    if (!Array.isArray(body)) throw new ApiError(400, 'invalid request: body must be a JSON array of setting items');
    const values: Record<string, string> = {};
    for (const [i, raw] of body.entries()) {
      if (typeof raw !== 'object' || raw === null || Array.isArray(raw)) throw new ApiError(400, `invalid request: item ${i} must be an object`);
      const { key, value } = raw as { key?: unknown; value?: unknown };
      if (typeof key !== 'string' || key === '') throw new ApiError(400, `invalid request: item ${i}: key must be a non-empty string`);
      if (typeof value !== 'string') throw new ApiError(400, `invalid request: setting ${key}: value must be a string`);
      const def = settings.def(key);
      // The front end saves whole groups, read-only items included: unchanged ones are skipped.
      if (def?.flag === FLAG.READONLY && value === settings.get(key)) continue;
      try {
        validateSetting(key, value, def);
      } catch (e) {
        if (isVfsError(e, 'INVALID')) throw new ApiError(400, e.message);
        throw e;
      }
      values[key] = value;
    }
    if (Object.keys(values).length) await settings.save(values);
    return ok();
  });

  app.post('/api/admin/setting/delete', async (req) => {
    const key = queryString(req, 'key');
    if (!settings.has(key)) throw new ApiError(500, 'record not found');
    if (!(await settings.deleteDeprecated(key))) throw new ApiError(500, `setting [${key}] is not deprecated`);
    return ok();
  });

  app.post('/api/admin/setting/reset_token', async () => ok(await settings.resetToken()));
};

export default routes;
