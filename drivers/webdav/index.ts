/**
 * "WebDav": a folder on a WebDAV server. Options, defaults and help texts are AList 3.45's
 * (alist-compat §6). Plain HTTP methods over node:http(s) with Basic auth; TLS is verified unless
 * tls_insecure_skip_verify is set. Uploads are PUT to a temporary name and MOVEd into place.
 * vendor `sharepoint` (AList's SharePoint Online cookie login) is accepted but not implemented yet:
 * it behaves like `other`. Every request carries this server's DriverContext.instanceId, so a
 * treegate /dav that receives its own id (a storage mounting its own server) answers 508 and init
 * fails with a clear status instead of recursing.
 */
import type { DriverDefinition, OptionSpec } from '../types.js';
import { configFlags } from '../options.js';
import { WebDavDriver } from './webdav.js';

const options = [
  { name: 'vendor', type: 'select', default: 'other', options: 'sharepoint,other' },
  { name: 'address', type: 'string', required: true },
  { name: 'username', type: 'string', required: true },
  { name: 'password', type: 'string', required: true, secret: true },
  { name: 'root_folder_path', type: 'string' },
  { name: 'tls_insecure_skip_verify', type: 'bool', default: 'false' },
] as const satisfies readonly OptionSpec[];

export const webdavDefinition: DriverDefinition<typeof options> = {
  config: configFlags('WebDav', { local_sort: true, only_proxy: true }),
  options,
  // getlastmodified is a live property: plain WebDAV servers do not let a client set it.
  conformance: { noMtime: true },
  create: (opts, ctx) => new WebDavDriver(opts, ctx),
};

export type WebDavOptions = Parameters<typeof webdavDefinition.create>[0];
