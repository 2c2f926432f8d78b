/**
 * "Local": a folder of the host's file system. Options, defaults and help texts are AList 3.45's
 * (alist-compat §6), so AList's admin page renders the same form. Thumbnails (`thumbnail` and the
 * thumb_* options) are made with ffmpeg: ./thumbs.ts.
 */
import type { DriverDefinition, OptionSpec } from '../types.js';
import { configFlags } from '../options.js';
import { LocalDriver } from './local.js';

const options = [
  // Never defaulted to the form's `/` (the host's root): missing or empty fails init instead.
  { name: 'root_folder_path', type: 'string', formDefaultOnly: true },
  { name: 'thumbnail', type: 'bool', required: true, help: 'enable thumbnail' },
  { name: 'thumb_cache_folder', type: 'string' },
  {
    name: 'thumb_concurrency', type: 'string', default: '16',
    help: 'Number of concurrent thumbnail generation goroutines. This controls how many thumbnails can be generated in parallel.',
  },
  {
    name: 'video_thumb_pos', type: 'string', default: '20%',
    help: "The position of the video thumbnail. If the value is a number (integer ot floating point), it represents the time in seconds. If the value ends with '%', it represents the percentage of the video duration.",
  },
  { name: 'show_hidden', type: 'bool', default: 'true', help: 'show hidden directories and files' },
  { name: 'mkdir_perm', type: 'string', default: '777' },
  {
    name: 'recycle_bin_path', type: 'string', default: 'delete permanently',
    help: "path to recycle bin, delete permanently if empty or keep 'delete permanently'",
  },
] as const satisfies readonly OptionSpec[];

export const localDefinition: DriverDefinition<typeof options> = {
  config: configFlags('Local', { local_sort: true, only_local: true, no_cache: true }),
  options,
  create: (opts, ctx) => new LocalDriver(opts, ctx),
};

export type LocalOptions = Parameters<typeof localDefinition.create>[0];
