/**
 * "FTP": a folder on an FTP server. Options, defaults and help texts are AList 3.45's
 * (alist-compat §6). FTP runs one command at a time per connection, so commands and uploads run on
 * a small pool of connections (a slow upload holds only one of them); each download gets a
 * connection of its own so a slow reader never blocks the storage. Uploads go to a temporary name
 * and are renamed into place.
 */
import type { DriverDefinition, OptionSpec } from '../types.js';
import { configFlags } from '../options.js';
import { FtpDriver } from './ftp.js';

const options = [
  { name: 'address', type: 'string', required: true },
  { name: 'encoding', type: 'string', required: true },
  { name: 'username', type: 'string', required: true },
  { name: 'password', type: 'string', required: true, secret: true },
  { name: 'root_folder_path', type: 'string' },
] as const satisfies readonly OptionSpec[];

export const ftpDefinition: DriverDefinition<typeof options> = {
  config: configFlags('FTP', { local_sort: true, only_local: true }),
  options,
  create: (opts, ctx) => new FtpDriver(opts, ctx),
};

export type FtpOptions = Parameters<typeof ftpDefinition.create>[0];
