/**
 * ssh2 takes the buffers it fills from Buffer.allocUnsafe and offers no hook to supply them. The
 * packet arena and the WRITE pool lend their memory by answering that call for the length of one
 * synchronous ssh2 call.
 */

/** Run `fn` with Buffer.allocUnsafe answered by `take` where it returns a buffer. */
export function allocatingFrom<T>(take: (size: number) => Buffer | undefined, fn: () => T): T {
  const plain = Buffer.allocUnsafe;
  Buffer.allocUnsafe = ((size: number) => take(size) ?? plain(size)) as typeof Buffer.allocUnsafe;
  try {
    return fn();
  } finally {
    Buffer.allocUnsafe = plain;
  }
}
