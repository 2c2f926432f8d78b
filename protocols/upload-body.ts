/**
 * The body of an upload (REST PUT, WebDAV PUT) as the VFS should read it: the request's bytes
 * through a PassThrough. A client
 * that goes away mid-body fails the stream, so the VFS removes its temp file and nothing appears
 * under the final name. The VFS and its drivers may destroy the stream they were given when the
 * storage fails (pipeline() destroys its source): on the request itself that would destroy the
 * socket, and the client would see a reset instead of an error status. So they get the PassThrough,
 * which is unpiped when it closes. A caller whose upload failed destroys the body (if nothing did
yet: a refusal before the first byte was read), then drains the request or closes after answering.
 *
 * The socket's chunks (up to 64 KiB) are not coalesced into bigger buffers here: the Local driver's
 * write stream already hands what queues up to one writev, and copying into new 1 MiB buffers cost
 * a quarter of the server's CPU on a 1 GiB PUT (mostly GC of those buffers).
 */
import type { IncomingMessage } from 'node:http';
import { PassThrough } from 'node:stream';

export function uploadBody(req: IncomingMessage): PassThrough {
  const body = new PassThrough();
  req.on('close', () => {
    if (!req.complete) body.destroy(new Error('client aborted the upload'));
  });
  req.on('error', (e) => body.destroy(e));
  body.once('close', () => req.unpipe(body));
  req.pipe(body);
  return body;
}
