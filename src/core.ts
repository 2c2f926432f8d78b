/**
 * The Core: every long-lived service of one treegate instance, built once in server.ts and passed
 * down explicitly (no module-level state). Protocol adapters receive it and use `vfs` for all file
 * access, `accounts`/`tokens` for identity and `settings` for site options.
 */
import type { Logger } from 'pino';
import type { Config } from './config.js';
import type { Store } from './store/store.js';
import type { Accounts } from './auth/accounts.js';
import type { Tokens } from './auth/tokens.js';
import type { Settings } from './settings/settings.js';
import type { VfsCore } from './vfs/create.js';
import type { Tasks } from './tasks/tasks.js';
import type { SearchService } from './search/service.js';

export interface Core extends VfsCore {
  readonly version: string;
  readonly config: Config;
  readonly log: Logger;
  readonly store: Store;
  readonly accounts: Accounts;
  readonly tokens: Tokens;
  readonly settings: Settings;
  /** Background tasks (copy across storages, As-Task uploads, offline downloads). */
  readonly tasks: Tasks;
  /** The name index behind fs/search and the index admin API. */
  readonly search: SearchService;
}
