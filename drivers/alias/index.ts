/**
 * "Alias": folders of the virtual tree shown again at another mount point, several merged into one.
 * Options, defaults and help texts are AList 3.45's (alist-compat §6). Targets are read through
 * DriverContext.tree, so meta hide and path passwords of the targets still apply. Write methods
 * exist only when `writable` is on (so read-only aliases report no write capabilities).
 * download_concurrency / download_part_size are accepted for compatibility and not used.
 * Like AList it offers the `proxy_range` common item (proxyRangeOption); treegate stores it only.
 */
import type { DriverDefinition, OptionSpec } from '../types.js';
import { configFlags } from '../options.js';
import { AliasDriver, WritableAliasDriver } from './alias.js';

const options = [
  { name: 'paths', type: 'text', required: true },
  { name: 'protect_same_name', type: 'bool', default: 'true', help: 'Protects same-name files from Delete or Rename' },
  { name: 'download_concurrency', type: 'number', default: '0', help: 'Need to enable proxy' },
  { name: 'download_part_size', type: 'number', default: '0', help: 'Need to enable proxy. Unit: KB' },
  { name: 'writable', type: 'bool', default: 'false' },
] as const satisfies readonly OptionSpec[];

export const aliasDefinition: DriverDefinition<typeof options> = {
  config: configFlags('Alias', { local_sort: true, no_cache: true }),
  options,
  proxyRangeOption: true,
  create: (opts, ctx) => (opts.writable ? new WritableAliasDriver(opts, ctx) : new AliasDriver(opts, ctx)),
};

export type AliasOptions = Parameters<typeof aliasDefinition.create>[0];
