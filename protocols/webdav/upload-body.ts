/**
 * The body of a PUT as the VFS should read it: the request itself. A client that goes away mid-body
 * fails the stream, so the VFS removes its temp file and nothing appears under the final name.
 *
 * The socket's chunks (up to 64 KiB) are not coalesced into bigger buffers here: the Local driver's
 * write stream already hands what queues up to one writev, and copying into new 1 MiB buffers cost
 * a quarter of the server's CPU on a 1 GiB PUT (mostly GC of those buffers).
 */
import type { IncomingMessage } from 'node:http';

export function uploadBody(req: IncomingMessage): IncomingMessage {
  req.on('close', () => {
    if (!req.complete) req.destroy(new Error('client aborted the upload'));
  });
  return req;
}
