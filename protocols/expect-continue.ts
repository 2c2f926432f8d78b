/**
 * `Expect: 100-continue` (curl sends it for bodies over 1 MiB, as do .NET and Java clients) is
 * answered with 100 only once the handler starts reading the body. Node answers 100 at once unless
 * the server has a checkContinue listener, so a client whose upload is refused anyway (wrong
 * password, no write permission, a missing folder) would first send its whole body for nothing.
 * Refused before the body is read, it gets the final status instead and sends nothing; Node then
 * ends the connection after that answer, as the body it never asked for cannot be told apart from
 * a next request.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';

/** Arrange for `100 Continue` to go out when `req`'s body is first read (unless answered by then). */
export function continueOnRead(req: IncomingMessage, res: ServerResponse): void {
  const read = req._read;
  req._read = function (this: IncomingMessage, size: number) {
    req._read = read;
    if (!res.headersSent) res.writeContinue();
    return read.call(this, size);
  };
}
