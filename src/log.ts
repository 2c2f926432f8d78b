/**
 * The root logger (pino, JSON lines on stdout). Secrets are redacted by key wherever they appear, so
 * a careless `log.info({ body })` still cannot print a password, token or key.
 *
 * Lines go out in batches: once 4 KiB are waiting, every FLUSH_MS, on `log.flush()` and at exit
 * (pino flushes its destination synchronously then). Writing each line on its own cost a thread-pool
 * write per line: with one access-log line per WebDAV request, about 40 µs of CPU per small PUT.
 */
import pino, { type Logger } from 'pino';

export const REDACT_PATHS = [
  'password', '*.password', 'token', '*.token', 'authorization', '*.authorization', 'headers.authorization',
  'req.headers.authorization', 'otp_code', '*.otp_code', 'secret', '*.secret', 'key', '*.key', 'private_key', '*.private_key',
  'jwt_secret', '*.jwt_secret',
];

/** The longest a logged line waits in the buffer (a crash loses at most this much; exits lose none). */
const FLUSH_MS = 250;

/**
 * stdout, batched. Once it cannot be written (EIO: the terminal that ran us closed; EPIPE: the reader
 * of the pipe went away), logging stops. Left to itself, a failed batched write was an unhandled
 * 'error' (pino only swallows EPIPE), and the synchronous flush pino does at exit retries any error
 * but EAGAIN forever, every 100 ms: a server whose terminal closed took the SIGHUP, closed its
 * listeners and never exited, its DATA still marked in use, deaf to SIGTERM.
 */
function stdoutDestination(): ReturnType<typeof pino.destination> {
  const dest = pino.destination({ dest: 1, minLength: 4096, periodicFlush: FLUSH_MS });
  dest.on('error', () => {
    dest.write = () => true;
    dest.flushSync = () => undefined;
    dest.flush = (cb?: (err?: Error) => void) => cb?.();
  });
  return dest;
}

export function createLogger(level: string, destination?: pino.DestinationStream): Logger {
  const dest = destination ?? stdoutDestination();
  return pino({ level, redact: { paths: REDACT_PATHS, censor: '[redacted]' }, base: { app: 'treegate' } }, dest);
}

/**
 * A child of `parent` for access lines, one per request, that skips the redaction walk. Only for
 * lines whose fields are fixed and never secret (method, path, status, time, user, ids): with the
 * wildcard paths above, redaction costs about 10 µs a line, several times the rest of the line.
 */
export function accessLogger(parent: Logger): Logger {
  return parent.child({}, { redact: [] });
}

export type { Logger };
