/**
 * Builds the VFS half of the Core: one registry, mount table, listing cache, meta rules and storage
 * service, wired together and returned (no module-level state). Storages are not loaded here: the
 * composition root calls `storages.loadAll()` (without awaiting it, so start-up never waits on a
 * slow backend) and `mounts.dropAll()` on shutdown, or simply `close()`.
 */
import { randomUUID } from 'node:crypto';
import type { Logger } from 'pino';
import type { Store } from '../store/store.js';
import { DriverRegistry } from '../../drivers/registry.js';
import type { DriverDefinition, TreeAccess } from '../../drivers/types.js';
import { ListingCache } from './cache.js';
import { MetaService } from './meta-service.js';
import type { MetaRules } from './meta.js';
import { MountTable } from './mounts.js';
import { StorageService } from './storages.js';
import { Vfs } from './vfs.js';
import { treeAccessOf } from './tree-access.js';

export interface VfsCoreOptions {
  store: Store;
  log: Logger;
  dataDir: string;
  /** Driver definitions to offer; the built-in list by default (tests add their own). */
  drivers?: readonly DriverDefinition[];
  /** Bound on one storage's init; 15 s by default. */
  initTimeoutMs?: number;
  /** This server process's id (DriverContext.instanceId); a fresh random one by default. */
  instanceId?: string;
}

export interface VfsCore {
  readonly registry: DriverRegistry;
  readonly mounts: MountTable;
  readonly cache: ListingCache;
  readonly storages: StorageService;
  /** Meta admin (REST CRUD); `metas.rules` is the evaluator the VFS uses. */
  readonly metas: MetaService;
  readonly rules: MetaRules;
  readonly vfs: Vfs;
  /**
   * Random per server process: drivers send it to remote treegates (WebDav), and /dav refuses a
   * request carrying it, so a storage mounting this server's own /dav fails init instead of looping.
   */
  readonly instanceId: string;
  /** Stop following store changes and drop every driver. */
  closeVfs(): Promise<void>;
}

export function createVfsCore(opts: VfsCoreOptions): VfsCore {
  const registry = new DriverRegistry(opts.drivers);
  const cache = new ListingCache();
  // Drivers that present other parts of the tree (Alias) get it at init, through the VFS again.
  const tree = (): TreeAccess => treeAccessOf(vfs);
  const instanceId = opts.instanceId ?? randomUUID();
  const mounts = new MountTable({ registry, log: opts.log, dataDir: opts.dataDir, cache, initTimeoutMs: opts.initTimeoutMs, tree, instanceId });
  const storages = new StorageService(opts.store, mounts, registry);
  const metas = new MetaService(opts.store.metas);
  const rules = metas.rules;
  // `treegate admin …` or another process may edit the store file: derived caches must follow.
  const unsubscribe = opts.store.onExternalChange(() => rules.invalidate());
  const vfs = new Vfs({ mounts, rules, cache });
  storages.changes = vfs.changes;
  return {
    registry, mounts, cache, storages, metas, rules, vfs, instanceId,
    closeVfs: async () => {
      unsubscribe();
      await mounts.dropAll();
    },
  };
}
