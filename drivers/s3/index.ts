/**
 * "S3": a bucket (or a prefix of it) on AWS S3 or any S3-compatible service. Options, defaults and
 * help texts are AList 3.45's (alist-compat §6). Folders are key prefixes; an empty folder is kept by
 * a zero-byte placeholder object (`<dir>/`, or `<dir>/<placeholder>` when that option is set).
 * Links are presigned GET URLs valid for sign_url_expire hours, so clients can be redirected.
 */
import type { DriverDefinition, OptionSpec } from '../types.js';
import { configFlags } from '../options.js';

const options = [
  { name: 'root_folder_path', type: 'string' },
  { name: 'bucket', type: 'string', required: true },
  { name: 'endpoint', type: 'string', required: true },
  { name: 'region', type: 'string' },
  { name: 'access_key_id', type: 'string', required: true },
  { name: 'secret_access_key', type: 'string', required: true, secret: true },
  { name: 'session_token', type: 'string', secret: true },
  { name: 'custom_host', type: 'string' },
  { name: 'enable_custom_host_presign', type: 'bool' },
  { name: 'sign_url_expire', type: 'number', default: '4' },
  { name: 'placeholder', type: 'string' },
  { name: 'force_path_style', type: 'bool' },
  { name: 'list_object_version', type: 'select', default: 'v1', options: 'v1,v2' },
  { name: 'remove_bucket', type: 'bool', help: 'Remove bucket name from path when using custom host.' },
  { name: 'add_filename_to_disposition', type: 'bool', help: 'Add filename to Content-Disposition header.' },
] as const satisfies readonly OptionSpec[];

export const s3Definition: DriverDefinition<typeof options> = {
  config: configFlags('S3', { local_sort: true }),
  options,
  // S3 sets LastModified itself on every write; it cannot take a client's mtime.
  conformance: { noMtime: true },
  // The AWS SDK is ~25 MB of resident memory once loaded: only servers with an S3 storage pay it.
  create: async (opts, ctx) => new (await import('./s3.js')).S3Driver(opts, ctx),
};

export type S3Options = Parameters<typeof s3Definition.create>[0];
