import { describe, expect, it } from 'vitest';
import { stateOutcome } from './qbittorrent.js';

describe('qBittorrent torrent states', () => {
  it('a finished torrent is complete whether 4.x says paused or 5.x says stopped', () => {
    for (const s of ['uploading', 'stalledUP', 'pausedUP', 'stoppedUP', 'queuedUP', 'checkingUP', 'forcedUP']) expect(stateOutcome(s), s).toBe('complete');
  });

  it('error, missing files and unknown fail (as AList); downloading and paused downloads wait', () => {
    for (const s of ['error', 'missingFiles', 'unknown']) expect(stateOutcome(s), s).toBe('failed');
    for (const s of ['downloading', 'metaDL', 'stalledDL', 'pausedDL', 'stoppedDL', 'queuedDL', 'checkingDL', 'allocating', 'moving']) expect(stateOutcome(s), s).toBe('waiting');
  });
});
