/**
 * The store: every piece of persistent state lives behind this interface (users, SSH keys, meta
 * rules, storages, settings, tasks, token revocations, and namespaced key-value data for adapters
 * such as WebDAV locks and dead properties).
 *
 * Contract for implementations (the embedded JSON file store now, a shared SQL database later):
 * - every method is async; a resolved write is durable (survives kill -9 of the process);
 * - records are returned as copies: mutating a returned object changes nothing;
 * - unique constraints are enforced by the store and reported as VfsError('EXISTS', <message>);
 *   updating or deleting a missing id reports VfsError('NOT_FOUND', 'record not found');
 * - ids are positive integers allocated by the store when the insert gives none (or 0).
 */
import type { MetaRecord, RevokedToken, SshKeyRecord, StorageRecord, TaskRecord, UserRecord } from './types.js';

export interface Repo<T extends { id: number }> {
  /** All records ordered by id. */
  list(): Promise<T[]>;
  get(id: number): Promise<T | undefined>;
  /** Records whose `field` equals `value`, ordered by id. */
  findBy<K extends keyof T>(field: K, value: T[K]): Promise<T[]>;
  insert(rec: Omit<T, 'id'> & { id?: number }): Promise<T>;
  update(id: number, patch: Partial<Omit<T, 'id'>>): Promise<T>;
  delete(id: number): Promise<boolean>;
  /**
   * A number that changes whenever this collection may have changed (any write, and a reload after
   * another process's write). Caches derived from the records compare it instead of re-reading them.
   */
  revision(): number;
}

export interface TaskRepo {
  list(): Promise<TaskRecord[]>;
  get(id: string): Promise<TaskRecord | undefined>;
  /** Insert or replace by id. */
  put(rec: TaskRecord): Promise<void>;
  delete(id: string): Promise<boolean>;
}

export interface SettingRepo {
  /** Stored values only (defaults live in settings/catalog.ts). */
  all(): Promise<Record<string, string>>;
  setMany(values: Record<string, string>): Promise<void>;
  delete(key: string): Promise<boolean>;
}

export interface RevocationRepo {
  add(t: RevokedToken): Promise<void>;
  has(id: string): Promise<boolean>;
  /** Entries of tokens of user `uid`. */
  countOf(uid: number): Promise<number>;
  /** Drop entries whose exp is before `nowSec`. */
  purge(nowSec: number): Promise<void>;
  /** The ids (jti) of user `uid`'s entries. */
  idsOf(uid: number): Promise<string[]>;
  /** Drop the entries with these ids (tokens that have ended another way, e.g. by a new pwd_ts). */
  drop(ids: readonly string[]): Promise<void>;
}

/** Namespaced JSON values for adapter state (e.g. ns `webdav.locks`, `webdav.props`). */
export interface KvRepo {
  get<T>(ns: string, key: string): Promise<T | undefined>;
  set<T>(ns: string, key: string, value: T): Promise<void>;
  delete(ns: string, key: string): Promise<boolean>;
  entries<T>(ns: string): Promise<Array<[string, T]>>;
}

export interface Store {
  readonly users: Repo<UserRecord>;
  readonly sshKeys: Repo<SshKeyRecord>;
  readonly metas: Repo<MetaRecord>;
  readonly storages: Repo<StorageRecord>;
  readonly tasks: TaskRepo;
  readonly settings: SettingRepo;
  readonly revokedTokens: RevocationRepo;
  readonly kv: KvRepo;
  /**
   * Called after another process changed the store (e.g. `treegate admin set` while the server runs),
   * once the new state is loaded, and after a failed write put the state back to the file's. Caches
   * derived from the store must drop their entries. Returns an unsubscribe function.
   */
  onExternalChange(listener: () => void): () => void;
  /** Wait for pending writes and release files/watchers. */
  close(): Promise<void>;
}
