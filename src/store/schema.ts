/**
 * The JSON store's document shape and its migrations. Bump SCHEMA_VERSION and append a migration
 * whenever a stored shape changes; migrations run in order on open and are saved at once.
 */
import type { MetaRecord, RevokedToken, SshKeyRecord, StorageRecord, TaskRecord, UserRecord } from './types.js';

export const SCHEMA_VERSION = 1;

export interface StoreData {
  schema_version: number;
  /** Id of the process instance that wrote this version of the document. */
  writer?: string;
  /** Highest id ever handed out per collection, so ids are never reused after a delete. */
  counters: Record<string, number>;
  users: UserRecord[];
  sshKeys: SshKeyRecord[];
  metas: MetaRecord[];
  storages: StorageRecord[];
  tasks: TaskRecord[];
  settings: Record<string, string>;
  revokedTokens: RevokedToken[];
  kv: Record<string, Record<string, unknown>>;
}

export function emptyData(): StoreData {
  return {
    schema_version: SCHEMA_VERSION,
    counters: {},
    users: [],
    sshKeys: [],
    metas: [],
    storages: [],
    tasks: [],
    settings: {},
    revokedTokens: [],
    kv: {},
  };
}

/** Each entry turns version N-1 into N (index 0 is the step to version 1). */
const MIGRATIONS: Array<(d: Record<string, unknown>) => void> = [
  (d) => {
    // v0 -> v1: fill every collection that an older or hand-written file lacks.
    const base = emptyData() as unknown as Record<string, unknown>;
    for (const [k, v] of Object.entries(base)) if (d[k] === undefined) d[k] = v;
  },
];

export function migrate(data: StoreData): StoreData {
  const d = data as unknown as Record<string, unknown>;
  let v = typeof d.schema_version === 'number' ? d.schema_version : 0;
  if (v > SCHEMA_VERSION) {
    throw new Error(`store schema version ${v} is newer than this treegate (${SCHEMA_VERSION}); upgrade treegate`);
  }
  while (v < SCHEMA_VERSION) MIGRATIONS[v++]!(d);
  d.schema_version = SCHEMA_VERSION;
  return d as unknown as StoreData;
}
