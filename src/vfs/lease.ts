/**
 * Leases on more than one storage instance: a file read through an Alias comes from the Alias's
 * storage and from its target's (each withdrawn on its own), and work on it must stop at either.
 */
import type { StorageLease } from '../../drivers/types.js';

/** Both `a` and `b` (just `a` without `b`): checked, and told, at the first one withdrawn. */
export function joinLeases(a: StorageLease, b: StorageLease | undefined): StorageLease {
  if (!b) return a;
  return {
    check: () => {
      a.check();
      b.check();
    },
    onWithdrawn: (fn) => {
      let told = false;
      const once = (reason: unknown) => void (!told && ((told = true), fn(reason)));
      const offA = a.onWithdrawn(once);
      const offB = b.onWithdrawn(once);
      return () => {
        offA();
        offB();
      };
    },
  };
}
