/**
 * A workaround for a leak in Node 20's http server (fixed upstream by nodejs/node#62534): see
 * closeQueuedOnHangUp.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Socket } from 'node:net';

/**
 * Node 20 never emits 'close' on a response still queued behind a
 * pipelined one (its request came on a keep-alive connection while an earlier answer was going out)
 * when the client hangs up: the response waits for a socket that never comes. Everything that stops
 * on its 'close' (a download's copy holding its file open, a WebDAV request's abort, `answering`)
 * waited for ever, keeping the connection's objects: one fd and ~15 KB per such request. Returns
 * what dispatch calls per request: when a connection closes, its responses still open get the
 * 'close' that newer Node gives them (on the next tick, after Node's own 'close' of the one on the
 * socket, which has left the set by then).
 */
export function closeQueuedOnHangUp(): (req: IncomingMessage, res: ServerResponse) => () => void {
  const open = new WeakMap<Socket, Set<ServerResponse>>();
  return (req, res) => {
    const socket = req.socket;
    let responses = open.get(socket);
    if (!responses) {
      const set = (responses = new Set());
      open.set(socket, set);
      socket.once('close', () =>
        process.nextTick(() => {
          for (const r of set) {
            r.destroy();
            r.emit('close');
          }
        }),
      );
    }
    const mine = responses;
    mine.add(res);
    return () => mine.delete(res); // called when `res` closes
  };
}
