/**
 * Time limits on the HTTP port: a client that holds a connection without doing its part is cut
 * off, an upload that is still making progress never is.
 *
 * Node's defaults, and what is changed:
 * - `headersTimeout` (60 s): a request's headers must be complete 60 s after its first byte, and a
 *   connection that sends nothing is closed then too (408). Kept: it stops header slowloris.
 * - `requestTimeout` (300 s) bounds the *whole* request, body included: every upload that took
 *   longer than 5 minutes (a few GB over Wi-Fi or the internet) was cut off with a 408, however
 *   steadily it was sending. Turned off.
 * - Instead, an idle limit (`http.idle_timeout`), like nginx's client_body_timeout: a request body
 *   the server is reading, from which nothing arrived for that long, is cut off. The upload then
 *   fails like any aborted one and leaves nothing under its name (upload-body.ts). Without it, a
 *   client that stops sending mid-body held its connection (and a temp file) until requestTimeout.
 *   A connection that waits on the server is left alone: a body not read yet (a slow storage pushing
 *   back, a handler still checking permissions or waiting for `100 Continue`), or a request that is
 *   complete and whose answer is being worked on or sent (a long COPY, a paused download).
 */
import type { IncomingMessage, Server } from 'node:http';
import type { Socket } from 'node:net';

/** The request whose answer is under way on each connection (set by `trackRequest`). */
const current = new WeakMap<Socket, IncomingMessage>();

/**
 * Call for every request before it is handled (the request and checkContinue paths alike); call
 * what it returns when the response closes. (The server's dispatch gathers its bookkeeping into one
 * 'close' listener: with a listener per module, a streamed download's pipeline went past Node's
 * 10-listener warning on every response.)
 */
export function trackRequest(req: IncomingMessage): () => void {
  const socket = req.socket;
  current.set(socket, req);
  return () => {
    if (current.get(socket) === req) current.delete(socket);
  };
}

/**
 * The body's sender has gone quiet: reading started (flowing, or async iteration), the request is not
 * complete, and nothing is buffered. Data we have not consumed yet (`readableLength > 0`) means the
 * socket is paused by backpressure, i.e. waiting on us.
 */
function bodyStalled(req: IncomingMessage): boolean {
  return !req.complete && req.readableFlowing !== null && req.readableLength === 0;
}

/**
 * Apply the limits above to `server`; `onStall` hears of each upload cut off (for the log).
 * Requests must be registered with `trackRequest`.
 */
export function limitIdleClients(server: Server, idleMs: number, onStall?: (req: IncomingMessage) => void): void {
  server.requestTimeout = 0;
  server.timeout = idleMs; // Node arms each connection's inactivity timer with this
  // With a listener here, Node leaves the decision to us (it would destroy every idle socket,
  // including ones waiting on the server). The same event also carries keepAliveTimeout expiries:
  // those connections have no request under way and are closed, as Node would.
  server.on('timeout', (socket: Socket) => {
    const req = current.get(socket);
    if (req && !bodyStalled(req)) {
      // Waiting on us. Re-arm: the timer only restarts on socket activity, and a body we resume
      // later may come from a client that is gone by then.
      socket.setTimeout(idleMs);
      return;
    }
    if (req) onStall?.(req);
    socket.destroy();
  });
}
