/**
 * Which finished tasks a TaskManager forgets (keepFinished): every task is a record kept on disk,
 * and a server copying for years kept every finished one (1,137 after a 25-minute soak). The
 * oldest finished tasks past `keep` go, once they are a tenth over it (so one clean-up covers many
 * finishes), except those whose tree is still at work:
 * - a finished task with unfinished descendants: cancel follows the tree through it;
 * - a finished task with an unfinished ancestor: a folder copy still making children (or resumed
 *   after a crash) skips the entries whose child task exists, and a child forgotten before then was
 *   copied again (199 of 1,390 files, in a 30,000-file folder killed mid-copy).
 */
import { ROLE } from '../auth/principal.js';
import { VfsError } from '../errors.js';
import type { TaskRecord } from '../store/types.js';
import { DONE_STATES } from './types.js';

/** Finished tasks kept by default (TaskManagerOptions.keepFinished). */
export const KEEP_FINISHED = 1000;

/** The ids to forget now among `tasks`; `childrenOf` gives a task's direct children. */
export function forgettable(tasks: ReadonlyMap<string, TaskRecord>, childrenOf: (id: string) => TaskRecord[], keep: number): string[] {
  const done = [...tasks.values()].filter((r) => DONE_STATES.has(r.state));
  if (done.length <= keep + Math.ceil(keep / 10)) return [];
  done.sort((a, b) => (a.end_time ?? '').localeCompare(b.end_time ?? ''));
  const settledBelow = (id: string): boolean => childrenOf(id).every((c) => DONE_STATES.has(c.state) && settledBelow(c.id));
  const settledAbove = (rec: TaskRecord): boolean => {
    for (let id = rec.args.parent; typeof id === 'string'; ) {
      const up = tasks.get(id);
      if (!up) return true;
      if (!DONE_STATES.has(up.state)) return false;
      id = up.args.parent;
    }
    return true;
  };
  return done.slice(0, done.length - keep).filter((r) => settledBelow(r.id) && settledAbove(r)).map((r) => r.id);
}

/**
 * Unfinished tasks one user (not the admin) may have created directly. Each is a record in memory
 * and in tasks.jsonl waiting for a worker, and a user adds them faster than workers finish them
 * (downloads of URLs that never answer, As-Task uploads, copies to a slow storage): two requests of
 * 6,000 URLs made 12,000 pending downloads, and nothing bounded more. Children a task spawns (a
 * folder copy's entries) are not counted: they come from one task the user created.
 */
export const MAX_UNDONE_PER_USER = 10_000;

/** True for an unfinished task user `creatorId` created directly (see MAX_UNDONE_PER_USER). */
export const ownUndone = (creatorId: number) => (r: Readonly<TaskRecord>) =>
  r.creator_id === creatorId && typeof r.args.parent !== 'string' && !DONE_STATES.has(r.state);

/** How many of `tasks` are ownUndone of `creatorId`. */
export function countUndone(tasks: Iterable<Readonly<TaskRecord>>, creatorId: number): number {
  const mine = ownUndone(creatorId);
  let n = 0;
  for (const r of tasks) if (mine(r)) n++;
  return n;
}

/**
 * Refuse (INVALID: REST 400) `adding` more tasks of `creator` when, with the `undone` ones they have
 * (asked only for a non-admin), they would pass MAX_UNDONE_PER_USER.
 */
export function checkRoom(creator: { role: number }, undone: () => number, adding = 1): void {
  if (creator.role === ROLE.ADMIN || undone() + adding <= MAX_UNDONE_PER_USER) return;
  throw new VfsError('INVALID', `at most ${MAX_UNDONE_PER_USER} unfinished tasks per user: wait for some to finish, or cancel some`);
}
