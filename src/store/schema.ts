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

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);
const kind = (v: unknown) => (v === null ? 'null' : Array.isArray(v) ? 'an array' : typeof v);

/** Record fields the code relies on, by collection: [field, typeof]. */
const RECORD_FIELDS: Record<string, Array<[string, string]>> = {
  users: [['id', 'number'], ['username', 'string'], ['salt', 'string'], ['pwd_hash', 'string'], ['pwd_ts', 'number'], ['role', 'number'], ['permission', 'number']],
  sshKeys: [['id', 'number'], ['user_id', 'number']],
  metas: [['id', 'number'], ['path', 'string']],
  storages: [['id', 'number'], ['mount_path', 'string'], ['driver', 'string']],
  tasks: [['id', 'string']],
  revokedTokens: [['id', 'string'], ['exp', 'number']],
};

/**
 * Check a parsed store document's shape before it is migrated or used, so a hand-edited or foreign
 * file is refused with the field at fault instead of resetting the store or failing at every request.
 * Fields missing from an old (version 0) document are fine: the migration fills them. `file` names
 * the document in the message.
 */
export function validate(data: unknown, file: string): StoreData {
  const bad = (what: string) => new Error(`${file}: ${what}; fix or restore the file`);
  if (!isObject(data)) throw bad(`the store must be a JSON object, found ${kind(data)}`);
  const v = data.schema_version;
  if (v !== undefined && (typeof v !== 'number' || !Number.isInteger(v) || v < 0)) throw bad('"schema_version" must be a whole number');
  if (typeof v === 'number' && v > SCHEMA_VERSION) {
    throw new Error(`${file}: store schema version ${v} is newer than this treegate (${SCHEMA_VERSION}); upgrade treegate`);
  }
  if (data.writer !== undefined && typeof data.writer !== 'string') throw bad('"writer" must be a string');
  for (const [name, fields] of Object.entries(RECORD_FIELDS)) {
    const rows = data[name];
    if (rows === undefined) continue;
    if (!Array.isArray(rows)) throw bad(`"${name}" must be an array, found ${kind(rows)}`);
    rows.forEach((r, i) => {
      if (!isObject(r)) throw bad(`"${name}[${i}]" must be an object, found ${kind(r)}`);
      for (const [f, t] of fields) if (typeof r[f] !== t) throw bad(`"${name}[${i}].${f}" must be a ${t}, found ${kind(r[f])}`);
    });
  }
  const maps: Array<[string, string]> = [['counters', 'number'], ['settings', 'string'], ['kv', 'object']];
  for (const [name, t] of maps) {
    const m = data[name];
    if (m === undefined) continue;
    if (!isObject(m)) throw bad(`"${name}" must be an object, found ${kind(m)}`);
    for (const [k, x] of Object.entries(m)) {
      if (t === 'object' ? !isObject(x) : typeof x !== t) throw bad(`"${name}.${k}" must be ${t === 'object' ? 'an object' : 'a ' + t}, found ${kind(x)}`);
    }
  }
  return data as unknown as StoreData;
}

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
