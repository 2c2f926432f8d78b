/**
 * Test support for the VFS tests (imported only by *.test.ts): a real JsonStore in a temp dir, a
 * real VFS core, principals with chosen permission bits, and access contexts.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import pino from 'pino';
import { ROLE, type AccessContext, type Principal, type Protocol } from '../auth/principal.js';
import { JsonStore } from '../store/json-store.js';
import type { StorageRecord } from '../store/types.js';
import type { DriverDefinition } from '../../drivers/types.js';
import { BUILTIN_DRIVERS } from '../../drivers/registry.js';
import { createVfsCore, type VfsCore } from './create.js';

export interface TestCore extends VfsCore {
  store: JsonStore;
  dir: string;
  cleanup(): Promise<void>;
}

export async function makeCore(extra: readonly DriverDefinition[] = [], initTimeoutMs = 2000): Promise<TestCore> {
  const dir = await mkdtemp(join(tmpdir(), 'tg-vfs-'));
  const store = await JsonStore.open(join(dir, 'store.json'));
  // A definition in `extra` replaces the built-in one of the same name (the conformance suite's).
  const builtin = BUILTIN_DRIVERS.filter((b) => !extra.some((e) => e.config.name === b.config.name));
  const core = createVfsCore({ store, log: pino({ level: 'silent' }), dataDir: dir, drivers: [...builtin, ...extra], initTimeoutMs });
  return {
    ...core, store, dir,
    cleanup: async () => {
      await core.closeVfs();
      await store.close();
      await rm(dir, { recursive: true, force: true });
    },
  };
}

export function storage(mount_path: string, driver = 'Memory', extra: Partial<StorageRecord> = {}): Omit<StorageRecord, 'id'> {
  return {
    mount_path, order: 0, driver, cache_expiration: 0, status: 'work', addition: '{}', remark: '', modified: '2024-01-02T03:04:05Z',
    disabled: false, disable_index: false, enable_sign: false, order_by: '', order_direction: '', extract_folder: '',
    web_proxy: false, webdav_policy: 'native_proxy', proxy_range: false, down_proxy_url: '', ...extra,
  };
}

export function principal(permission: number, basePath = '/'): Principal {
  return { userId: 7, username: 'u', role: ROLE.GENERAL, basePath, permission, disabled: false, otp: false, pwdTs: 0 };
}

export function ctx(p: Principal, protocol: Protocol = 'rest', password?: string): AccessContext {
  return { principal: p, protocol, ip: '127.0.0.1', password };
}

export const body = (s: string) => Readable.from([Buffer.from(s)]);
