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
 *
 * A small body that has all arrived by then is handed over whole instead (arrivedWhole, below).
 */
import type { IncomingMessage } from 'node:http';
import { PassThrough, type Readable } from 'node:stream';
import { WholeBody } from '../src/whole-body.js';

/** Up to this size, a body that has all arrived is handed over whole (the Local driver's SMALL_BODY). */
const WHOLE_LIMIT = 64 * 1024;

export function uploadBody(req: IncomingMessage): Readable {
  const whole = arrivedWhole(req);
  if (whole) return whole;
  // Unpiped as it is destroyed, not on its 'close' (a tick later): unpipe pauses the request, and a
  // caller that destroys the body and then drains the request (resume) had its drain undone, so a
  // refused upload's connection hung with its body unread until the server reset it.
  const body = new PassThrough({
    destroy(err, cb) {
      req.unpipe(body);
      cb(err);
    },
  });
  const cut = () => body.destroy(new Error('client aborted the upload'));
  // Its consumer (the driver) may start listening only later: a body cut before then must not be an
  // uncaught 'error'. The consumer finds it destroyed and errored.
  body.on('error', () => undefined);
  req.on('close', () => {
    if (!req.complete) cut();
  });
  req.on('error', (e) => body.destroy(e));
  req.pipe(body);
  // The client went while an async step ran before this (REST's auth hook, WebDAV's lookups): the
  // request is destroyed, its 'close' is over, and none of its bytes will come, even those that had
  // arrived. The upload would wait for them for ever.
  if (req.destroyed && !req.readableEnded) cut();
  return body;
}

/**
 * The body, when every byte its Content-Length announces is already buffered in the request (a small
 * upload usually arrives with its headers): taken out now and handed over as a WholeBody. Nothing is
 * left for the client to cut short, so none of the abort handling above is needed.
 */
function arrivedWhole(req: IncomingMessage): WholeBody | undefined {
  const len = req.headers['content-length'];
  if (len === undefined || req.readableLength === 0 || req.readableLength > WHOLE_LIMIT) return undefined;
  const size = Number(len);
  if (req.readableLength !== size) return undefined;
  const chunks: Buffer[] = [];
  for (let c: Buffer | null; (c = req.read() as Buffer | null) !== null; ) chunks.push(c);
  req.resume(); // on to its end (nothing is left): the request counts as read
  return new WholeBody(chunks, size);
}
