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
