/**
 * "SFTP": a folder on an SSH server. Options, defaults and help texts are AList 3.45's
 * (alist-compat §6; `ignore_symlink_error` has no help there). One SSH connection per storage,
 * re-established on the next call after it drops. Uploads go to a temporary name and are renamed
 * into place, so readers never see half a file.
 */
import type { DriverDefinition, OptionSpec } from '../types.js';
import { configFlags } from '../options.js';
import { SftpDriver } from './sftp.js';

const options = [
  { name: 'address', type: 'string', required: true },
  { name: 'username', type: 'string', required: true },
  { name: 'private_key', type: 'text', secret: true },
  { name: 'password', type: 'string', secret: true },
  { name: 'passphrase', type: 'string', secret: true },
  { name: 'root_folder_path', type: 'string' },
  { name: 'ignore_symlink_error', type: 'bool', default: 'false' },
] as const satisfies readonly OptionSpec[];

export const sftpDefinition: DriverDefinition<typeof options> = {
  config: configFlags('SFTP', { local_sort: true, only_local: true }),
  options,
  create: (opts, ctx) => new SftpDriver(opts, ctx),
};

export type SftpOptions = Parameters<typeof sftpDefinition.create>[0];
