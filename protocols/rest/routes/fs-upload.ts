/**
 * Uploads (alist-compat §10): PUT /api/fs/put (raw body) and PUT /api/fs/form (multipart part `file`).
 * Bodies are never buffered: this plugin replaces the app's body parsers (in its own encapsulated
 * context) with one that leaves the request stream unread, and the stream goes straight to vfs.put,
 * which writes atomically (a failed or aborted upload leaves nothing under the final name).
 *
 * As-Task (`As-Task: true`): the body is spooled to a temp file by the task service, the reply
 * carries the upload task in its initial state (state 0, `uploading`, progress 0, spec §3) and a
 * worker puts the file; the task is listed under /api/task/upload.
 */
import { PassThrough, type Readable } from 'node:stream';
import type { FastifyReply, FastifyRequest } from 'fastify';
import Busboy from 'busboy';
import type { AccessContext } from '../../../src/auth/principal.js';
import type { Core } from '../../../src/core.js';
import { isVfsError } from '../../../src/errors.js';
import type { Entry } from '../../../src/vfs/types.js';
import type { TaskInfo } from '../../../src/tasks/types.js';
import type { RoutePlugin } from '../route-types.js';
import { accessContext } from '../app.js';
import { firstHeader, utf8Header } from '../../header-text.js';
import { uploadBody } from '../../upload-body.js';
import { ApiError, ok } from '../envelope.js';
import { taskJson } from './tasks.js';

interface UploadHeaders {
  path: string;
  overwrite: boolean;
  asTask: boolean;
  modified: Date;
  size?: number;
  hashes: Record<string, string>;
}

/**
 * A request header's first value (firstHeader): two File-Path headers joined by Node made one path
 * through a folder named `a, `, and two `Overwrite: false` read as "overwrite".
 */
function header(req: FastifyRequest, name: string): string {
  return firstHeader(req.raw, name) ?? '';
}

/** Go's url.PathUnescape: `+` stays, `%XY` must be valid hex; invalid → 400. */
function pathUnescape(raw: string): string {
  const bad = /%(?![0-9a-fA-F]{2})/.exec(raw);
  if (bad) throw new ApiError(400, `invalid URL escape "${raw.slice(bad.index, bad.index + 3)}"`);
  try {
    return decodeURIComponent(raw);
  } catch {
    throw new ApiError(400, 'invalid URL escape: not UTF-8');
  }
}

/**
 * Last-Modified in unix milliseconds, a sign and digits as Go's strconv.ParseInt reads them (`1e12`,
 * `0x10` are not numbers there; `-86400000` is, a date before 1970, which AList keeps: it was
 * replaced by the upload time). Missing, zero, invalid, or past what a Date can hold (±8.64e15;
 * such a time failed the whole upload) → now.
 */
function lastModified(text: string): Date {
  const ms = /^[+-]?\d{1,16}$/.test(text) ? Number(text) : 0;
  const d = new Date(ms);
  return ms !== 0 && !Number.isNaN(d.getTime()) ? d : new Date();
}

function uploadHeaders(req: FastifyRequest, needLength: boolean): UploadHeaders {
  const rawPath = header(req, 'file-path');
  if (rawPath === '') throw new ApiError(400, 'File-Path header is required');
  const lenText = header(req, 'content-length');
  let size: number | undefined;
  if (needLength && lenText !== '') {
    if (!/^\d+$/.test(lenText)) throw new ApiError(400, `strconv.ParseInt: parsing "${lenText}": invalid syntax`);
    size = Number(lenText);
  }
  const hashes: Record<string, string> = {};
  for (const [h, algo] of [['x-file-md5', 'md5'], ['x-file-sha1', 'sha1'], ['x-file-sha256', 'sha256']] as const) {
    const v = header(req, h).trim().toLowerCase();
    if (v) hashes[algo] = v;
  }
  return {
    path: pathUnescape(utf8Header(rawPath)),
    overwrite: header(req, 'overwrite') !== 'false',
    asTask: header(req, 'as-task') === 'true',
    modified: lastModified(header(req, 'last-modified')),
    size,
    hashes,
  };
}

/** An AccessContext whose signal aborts when the client goes away before we answered. */
function uploadContext(req: FastifyRequest, reply: FastifyReply): AccessContext {
  const ac = new AbortController();
  const onClose = () => {
    if (!reply.raw.writableFinished) ac.abort(new Error('client disconnected'));
  };
  req.raw.once('aborted', onClose);
  reply.raw.once('close', onClose);
  // Gone while the auth hook ran (it is async): those events are over, and the upload would wait
  // for ever for a body that never comes (holding its storage, a temp file and its fds).
  if (req.raw.destroyed) onClose();
  return { ...accessContext(req, utf8Header(header(req, 'password'))), signal: ac.signal };
}

/** Leave the connection usable after an early refusal: read and drop the rest of the body. */
function drain(req: FastifyRequest): void {
  if (!req.raw.readableEnded) req.raw.resume();
}

async function putBody(core: Core, ctx: AccessContext, h: UploadHeaders, body: Readable, form: boolean): Promise<Entry | TaskInfo> {
  try {
    const opts = { size: h.size, modified: h.modified, overwrite: h.overwrite, hashes: Object.keys(h.hashes).length ? h.hashes : undefined };
    if (h.asTask) return await core.tasks.uploads.start(ctx, body, { path: h.path, ...opts });
    return await core.vfs.put(ctx, h.path, body, opts);
  } catch (e) {
    if (isVfsError(e, 'NOT_SUPPORTED')) {
      throw form ? new ApiError(405, "Current storage doesn't support upload") : new ApiError(500, 'upload not supported');
    }
    // AList refuses Overwrite: false when anything is at the path (fs.Get), a folder too; the VFS
    // says IS_A_DIR for a folder there, which answered 500 `not a file` (As-Task: 403 already).
    if (!h.overwrite && isVfsError(e, 'IS_A_DIR')) throw new ApiError(403, 'file exists');
    throw e;
  }
}

/**
 * The `file` part of a multipart body, streamed into vfs.put; other parts are discarded. Every part
 * stream gets an error listener the moment it appears: busboy errors a part whose body is cut short
 * ("Unexpected end of form"), and an unheard stream error would end the process.
 * The put reads the part through `body`, which ends only once the whole form has been read (busboy's
 * close): a form cut off after a whole `file` part (a later part cut, the client gone) was answered
 * 400 while the file was stored anyway, or its upload task made and run. AList parses the whole form
 * before it uploads.
 */
function formUpload(core: Core, req: FastifyRequest, ctx: AccessContext, h: UploadHeaders): Promise<Entry | TaskInfo> {
  return new Promise<Entry | TaskInfo>((resolve, reject) => {
    let bb: Busboy.Busboy;
    try {
      bb = Busboy({ headers: req.headers, limits: { fields: 50, parts: 100 } });
    } catch (e) {
      reject(new ApiError(400, `invalid multipart body: ${(e as Error).message}`));
      return;
    }
    let started: Promise<Entry | TaskInfo> | undefined;
    let part: Readable | undefined;
    let body: PassThrough | undefined;
    const malformed = (e: unknown) => new ApiError(400, `invalid multipart body: ${(e as Error).message}`);
    const fail = (e: unknown) => {
      req.raw.unpipe(bb);
      // Unpiped, busboy never ends or errors the part: the put reading it would wait for ever.
      const err = e instanceof Error ? e : new Error(String(e));
      if (part && !part.readableEnded) part.destroy(err);
      if (body && !body.writableEnded) body.destroy(err); // the put fails: nothing is stored
      reject(e); // only the first settlement counts
    };
    bb.on('file', (name, stream) => {
      stream.on('error', (e: unknown) => fail(malformed(e)));
      if (name !== 'file' || started) {
        stream.resume();
        return;
      }
      part = stream;
      body = new PassThrough();
      body.on('error', () => undefined); // destroyed by fail() before the put may listen
      stream.pipe(body, { end: false });
      started = putBody(core, ctx, h, body, true);
      started.catch((e: unknown) => {
        stream.resume();
        fail(e);
      });
    });
    bb.on('error', (e: unknown) => fail(malformed(e)));
    bb.on('close', () => {
      if (!started) return fail(new ApiError(400, 'http: no such file'));
      body?.end(); // the form is whole (busboy closes after every part ended)
      started.then(resolve, fail);
    });
    // A client gone before busboy saw the end: nothing else would settle this promise.
    const gone = () => fail(new ApiError(400, 'upload aborted: the client disconnected'));
    if (ctx.signal?.aborted) return gone();
    ctx.signal?.addEventListener('abort', gone, { once: true });
    req.raw.pipe(bb);
  });
}

const routes: RoutePlugin = async (app, { core }) => {
  // This plugin's own context: leave every body unread (no JSON, no buffering).
  app.removeAllContentTypeParsers();
  app.addContentTypeParser('*', (_req, _payload, done) => done(null, undefined));

  app.put('/api/fs/put', async (req, reply) => {
    let body: Readable | undefined;
    try {
      const h = uploadHeaders(req, true);
      const ctx = uploadContext(req, reply);
      body = uploadBody(req.raw);
      const done = await putBody(core, ctx, h, body, false);
      return h.asTask ? ok({ task: taskJson(done as TaskInfo) }) : ok();
    } catch (e) {
      body?.destroy(); // unpiped from the request (see upload-body.ts), which is then drained
      drain(req);
      throw e;
    }
  });

  app.put('/api/fs/form', async (req, reply) => {
    try {
      const h = uploadHeaders(req, false);
      const ctx = uploadContext(req, reply);
      const done = await formUpload(core, req, ctx, h);
      return h.asTask ? ok({ task: taskJson(done as TaskInfo) }) : ok();
    } catch (e) {
      drain(req);
      throw e;
    }
  });
};

export default routes;
