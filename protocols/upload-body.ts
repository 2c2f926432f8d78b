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
  const cut = () => body.destroy(new Error('client aborted the upload'));
  // Its consumer (the driver) may start listening only later: a body cut before then must not be an
  // uncaught 'error'. The consumer finds it destroyed and errored.
  body.on('error', () => undefined);
  req.on('close', () => {
    if (!req.complete) cut();
  });
  req.on('error', (e) => body.destroy(e));
  body.once('close', () => req.unpipe(body));
  req.pipe(body);
  // The client went while an async step ran before this (REST's auth hook, WebDAV's lookups): the
  // request is destroyed, its 'close' is over, and none of its bytes will come, even those that had
  // arrived. The upload would wait for them for ever.
  if (req.destroyed && !req.readableEnded) cut();
  return body;
}
