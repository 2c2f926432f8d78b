/**
 * Sending a span of an open host file as an HTTP response body with sendfile(2), through the small
 * native addon in native/sendfile (built by `npm run build`; see its source for why and how).
 *
 * A Node server otherwise copies every byte of a download into user space and back out; nginx does
 * not, and on a 1 GiB GET over loopback even a bare node:http server stays near 0.53x nginx. When
 * the addon is missing (not built, not Linux) or the response cannot take raw bytes on its socket
 * (TLS, chunked framing, a pipelined response still queued), callers copy through buffers instead
 * (file-copy.ts): `sendfileSocket` says which.
 *
 * TREEGATE_SENDFILE=0 turns it off (for measuring the buffered path, or if a kernel misbehaves).
 */
import { ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import type { Writable } from 'node:stream';
import { finished } from 'node:stream/promises';
import { getSystemErrorName } from 'node:util';
import { loadNativeAddon } from '../native-addon.js';

interface SendfileAddon {
  /** Calls `done(errno, bytesSent)` once; errno 0 on success. */
  start(socketFd: number, fileFd: number, offset: number, count: number, done: (errno: number, sent: number) => void): object;
  cancel(handle: object): void;
}

const ENODATA = 61;
/** The client hung up (EPIPE, ECONNRESET) or we stopped because the connection closed (ECANCELED). */
const CLIENT_GONE = new Set(['EPIPE', 'ECONNRESET', 'ECANCELED']);

// Without it (not built, not Linux) or with TREEGATE_SENDFILE=0, bodies are copied through buffers.
const addon = process.env.TREEGATE_SENDFILE === '0' ? undefined : loadNativeAddon<SendfileAddon>('sendfile');

/** Whether downloads can go out by sendfile in this process (for the startup log). */
export const sendfileAvailable = addon !== undefined;

interface ResponseInternals {
  _header?: string | null;
  chunkedEncoding?: boolean;
}
interface SocketInternals {
  _httpMessage?: unknown;
  encrypted?: boolean;
  _handle?: { fd?: number } | null;
}

/**
 * The socket `dest` writes to, when its body may be written there directly: an HTTP/1 response
 * whose head is set (writeHead) and not chunked, at the head of a plain TCP connection.
 */
export function sendfileSocket(dest: Writable): Socket | undefined {
  if (!addon || !(dest instanceof ServerResponse)) return undefined;
  const res = dest as ServerResponse & ResponseInternals;
  const socket = res.socket as (Socket & SocketInternals) | null;
  if (!res._header || res.chunkedEncoding !== false || !socket || socket.encrypted || socket._httpMessage !== res) return undefined;
  const fd = socket._handle?.fd;
  return typeof fd === 'number' && fd >= 0 && !socket.destroyed ? socket : undefined;
}

/** The error a stream gives when its other end went away (what callers log quietly). */
export const prematureClose = () => Object.assign(new Error('Premature close'), { code: 'ERR_STREAM_PREMATURE_CLOSE' });

/**
 * Send bytes [offset, offset + count) of the open file `fd` as the body of `res` on `socket` (from
 * `sendfileSocket(res)`), then end the response. The caller keeps `fd` open until this settles.
 */
export async function sendfileBody(res: ServerResponse, socket: Socket, fd: number, offset: number, count: number, signal?: AbortSignal): Promise<void> {
  res.flushHeaders();
  // The head must be on the wire before the body: wait until the socket has written everything
  // queued so far (writes complete in order, so an empty write's callback says so).
  if (socket.writableLength > 0) {
    await new Promise<void>((resolve, reject) => socket.write(Buffer.alloc(0), (err) => (err ? reject(err) : resolve())));
  }
  if (count > 0) await transfer(socket, fd, offset, count, signal);
  res.end();
  await finished(res);
}

function transfer(socket: Socket, fd: number, offset: number, count: number, signal?: AbortSignal): Promise<void> {
  if (socket.destroyed) return Promise.reject(prematureClose());
  signal?.throwIfAborted();
  return new Promise<void>((resolve, reject) => {
    const stop = () => addon!.cancel(handle);
    const handle = addon!.start((socket as SocketInternals)._handle!.fd!, fd, offset, count, (errno, sent) => {
      socket.off('close', stop);
      signal?.removeEventListener('abort', stop);
      if (errno === 0) return resolve();
      if (errno === ENODATA) return reject(new Error(`file shrank while being read (${sent} of ${count} bytes sent)`));
      const name = getSystemErrorName(-errno);
      if (CLIENT_GONE.has(name)) return reject(prematureClose());
      reject(Object.assign(new Error(`sendfile failed: ${name}`), { code: name }));
    });
    socket.once('close', stop);
    signal?.addEventListener('abort', stop, { once: true });
  });
}
