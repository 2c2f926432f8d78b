/** What a task list shows of a record, and a new or retried task's first status. */
import type { TaskRecord } from '../store/types.js';
import type { TaskInfo } from './types.js';

export function toInfo(r: TaskRecord): TaskInfo {
  return {
    id: r.id, name: r.name, creator: r.creator, creator_role: r.creator_role, state: r.state, status: r.status,
    progress: r.progress, start_time: r.start_time, end_time: r.end_time, total_bytes: r.total_bytes, error: r.error,
  };
}

export const initialStatus = (kind: string) => (kind === 'upload' ? 'uploading' : '');
