/**
 * The skeleton for a new driver. Copy this folder to drivers/<name>/, then:
 *  1. set `config` (AList's flags: they decide the `common` items of driver/info) and `options`
 *     (AList's `additional` items). Declare only options your driver reads: each is a field of the
 *     admin form. A backend with folders declares `root_folder_path` (without a default it takes
 *     config.default_root) and serves every driver path below it; this one keeps its files in
 *     memory, with no folder to start from, so it has none;
 *  2. implement the required methods in template.ts, and only the optional ones your backend really
 *     has (a missing method is a missing capability; never add a method that only throws);
 *  3. map backend errors to VfsError codes as drivers/types.ts documents;
 *  4. declare backend limits in `conformance` (data, not test code), run the suite from the test;
 *  5. add the definition to BUILTIN_DRIVERS in drivers/registry.ts.
 * It is not registered itself. This one keeps files in memory and has no rename/move/copy, so its
 * conformance run also shows capability gating at work.
 */
import type { DriverDefinition, OptionSpec } from '../types.js';
import { configFlags } from '../options.js';
import { TemplateDriver } from './template.js';

const options = [
  { name: 'max_file_size', type: 'number', default: '1048576', help: 'largest file accepted, in bytes' },
] as const satisfies readonly OptionSpec[];

export const templateDefinition: DriverDefinition<typeof options> = {
  config: configFlags('Template', { only_proxy: true }),
  options,
  conformance: {},
  create: (opts) => new TemplateDriver(opts),
};
