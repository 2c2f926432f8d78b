/**
 * The root logger (pino, JSON lines on stdout). Secrets are redacted by key wherever they appear, so
 * a careless `log.info({ body })` still cannot print a password, token or key.
 */
import pino, { type Logger } from 'pino';

export const REDACT_PATHS = [
  'password', '*.password', 'token', '*.token', 'authorization', '*.authorization', 'headers.authorization',
  'req.headers.authorization', 'otp_code', '*.otp_code', 'secret', '*.secret', 'key', '*.key', 'private_key', '*.private_key',
  'jwt_secret', '*.jwt_secret',
];

export function createLogger(level: string, destination?: pino.DestinationStream): Logger {
  return pino({ level, redact: { paths: REDACT_PATHS, censor: '[redacted]' }, base: { app: 'treegate' } }, destination);
}

export type { Logger };
