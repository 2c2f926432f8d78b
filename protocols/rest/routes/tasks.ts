/**
 * Task API (alist-compat §11): for each kind, /api/task/<kind>/… (any non-guest; the auth hook
 * refuses guests) and /api/admin/task/<kind>/… (admin; kept for old scripts). A non-admin sees and
 * acts on their own tasks only; anyone else's task is `task not found` (404), like a missing one.
 */
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { can } from '../../../src/auth/principal.js';
import type { TaskRecord } from '../../../src/store/types.js';
import { toInfo } from '../../../src/tasks/manager.js';
import { DONE_STATES, TASK_KINDS, TASK_STATE, type TaskInfo } from '../../../src/tasks/types.js';
import type { RoutePlugin } from '../route-types.js';
import { ApiError, ok } from '../envelope.js';
import { formatTime } from '../entry.js';
import { queryString } from '../input.js';

const NOT_FOUND = 'task not found';

/** TaskInfo as AList writes it: times in its RFC 3339 form with the local offset, or null. */
export function taskJson(t: TaskInfo): TaskInfo {
  const time = (v: string | null) => (v ? formatTime(new Date(v)) : null);
  return { ...t, start_time: time(t.start_time), end_time: time(t.end_time) };
}

const routes: RoutePlugin = async (app, { core }) => {
  const m = core.tasks.manager;

  const visible = (req: FastifyRequest, kind: string) => (r: TaskRecord) =>
    r.kind === kind && (can.isAdmin(req.principal!) || r.creator_id === req.principal!.userId);

  const mine = (req: FastifyRequest, kind: string) => m.records(visible(req, kind));

  const target = (req: FastifyRequest, kind: string, id: string): TaskRecord => {
    const r = m.get(id);
    if (!r || !visible(req, kind)(r)) throw new ApiError(404, NOT_FOUND);
    return r;
  };

  const ids = (req: FastifyRequest): string[] => {
    // Not bodyOf: its `EOF` for an empty JSON body is a bind error like any other to AList here.
    const b: unknown = req.body;
    if (!Array.isArray(b) || !b.every((x) => typeof x === 'string')) throw new ApiError(400, 'invalid request format');
    return b as string[];
  };

  const register = (g: FastifyInstance, prefix: string, kind: string) => {
    const listed = (req: FastifyRequest, done: boolean) => {
      const shown = visible(req, kind);
      return m.infos((r) => shown(r) && DONE_STATES.has(r.state) === done).map(taskJson);
    };
    g.get(`${prefix}/undone`, async (req) => ok(listed(req, false)));
    g.get(`${prefix}/done`, async (req) => ok(listed(req, true)));
    g.post(`${prefix}/info`, async (req) => ok(taskJson(toInfo(target(req, kind, queryString(req, 'tid'))))));

    const one = (act: (id: string) => Promise<void>) => async (req: FastifyRequest) => {
      await act(target(req, kind, queryString(req, 'tid')).id);
      return ok();
    };
    g.post(`${prefix}/cancel`, one((id) => m.cancel(id)));
    g.post(`${prefix}/delete`, one((id) => m.remove(id)));
    g.post(`${prefix}/retry`, one((id) => m.retry(id)));

    const some = (act: (id: string) => Promise<void>) => async (req: FastifyRequest) => {
      // No prototype: an id such as `__proto__` is a key like any other, not a setter.
      const failed: Record<string, string> = Object.create(null);
      const found: string[] = [];
      for (const id of ids(req)) {
        const r = m.get(id);
        if (!r || !visible(req, kind)(r)) failed[id] = NOT_FOUND;
        else found.push(id);
      }
      // Together, so the store coalesces their writes (as clear_done's): awaited one by one, each id
      // cost a store write and fsync before the next, which made selecting thousands of tasks slow.
      await Promise.all(found.map(act));
      return ok(failed);
    };
    g.post(`${prefix}/cancel_some`, some((id) => m.cancel(id)));
    g.post(`${prefix}/delete_some`, some((id) => m.remove(id)));
    g.post(`${prefix}/retry_some`, some((id) => m.retry(id)));

    const each = (pick: (r: TaskRecord) => boolean, act: (id: string) => Promise<void>) => async (req: FastifyRequest) => {
      await Promise.all(mine(req, kind).filter(pick).map((r) => act(r.id))); // together, as *_some
      return ok();
    };
    // Removed together: the store writes once for the lot, not once (with an fsync) per task.
    const clear = (pick: (r: TaskRecord) => boolean) => async (req: FastifyRequest) => {
      await m.removeMany(mine(req, kind).filter(pick).map((r) => r.id), pick); // a task retried meanwhile stays
      return ok();
    };
    g.post(`${prefix}/clear_done`, clear((r) => DONE_STATES.has(r.state)));
    g.post(`${prefix}/clear_succeeded`, clear((r) => r.state === TASK_STATE.SUCCEEDED));
    g.post(`${prefix}/retry_failed`, each((r) => r.state === TASK_STATE.FAILED, (id) => m.retry(id)));
  };

  // The auth hook guards both trees: /api/task/* needs a non-guest, /api/admin/* the admin role.
  for (const kind of TASK_KINDS) {
    register(app, `/api/task/${kind}`, kind);
    register(app, `/api/admin/task/${kind}`, kind);
  }
};

export default routes;
