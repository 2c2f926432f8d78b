/** The contract of an offline download tool (aria2, qBittorrent, SimpleHttp). */

export interface DownloadJob {
  /** The task id (tools tag their own jobs with it). */
  id: string;
  url: URL;
  /** Host folder the tool downloads into (DATA/temp/<tool>/<task id>). */
  dir: string;
  signal: AbortSignal;
  /** The task's args: a tool keeps its job handle here (gid, hash) through patch(). */
  args: Record<string, unknown>;
  patch(p: Record<string, unknown>): void;
  /** `status` is the tool's own state word; progress 0..100. */
  report(status: string, progress: number, totalBytes?: number): void;
}

export interface OfflineTool {
  readonly name: string;
  /** URL schemes the tool accepts (`http:`...). */
  readonly schemes: readonly string[];
  /** Last init succeeded (or the tool needs none). */
  ready(): boolean;
  /** Connect / check; resolves to a version text, throws with the reason otherwise. */
  init(): Promise<string>;
  /**
   * Download into job.dir; resolves when complete. Must stop promptly when the signal aborts. On
   * failure it removes its job from the tool itself (best effort).
   */
  download(job: DownloadJob): Promise<void>;
  /** After transfers were started: seeding wait and removal from the tool (qBittorrent). */
  afterComplete?(job: DownloadJob, setStatus: (s: string) => void): Promise<void>;
  /**
   * Adding the link again over the files an earlier run left resumes from them (qBittorrent checks
   * them first): a retry keeps the task folder and the earlier run's files.
   */
  readonly rechecks?: boolean;
  /** The tool follows http(s) redirects itself: the task resolves them first, through the SSRF guard. */
  readonly followsRedirects?: boolean;
  /**
   * Best effort: drop the task's job (and its files) from the tool: before every run (a handle in
   * args is stale) and when the task will not run again. keepFiles: the download had completed and
   * started transfers, which still read its files, or a tool that `rechecks` is about to run again.
   * dir: the task's temp folder; no file outside it is deleted.
   */
  forget?(taskId: string, args: Record<string, unknown>, keepFiles?: boolean, dir?: string): Promise<void>;
}

/** The longest delay setTimeout takes: a longer one (or 2^31 ms and up) fires at once, with a warning. */
const MAX_TIMER_MS = 2 ** 31 - 1;

/**
 * Sleep that ends early (rejecting) when the signal aborts. Waits longer than a timer can hold
 * (about 24.8 days: a qBittorrent seed time of 35,792 minutes and up) are slept in parts.
 */
export function sleep(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal.aborted) return reject(signal.reason);
    const until = performance.now() + ms;
    let t: NodeJS.Timeout;
    const wait = (left: number) => {
      t = setTimeout(() => {
        const rest = until - performance.now();
        if (rest > 0) return wait(rest);
        signal.removeEventListener('abort', onAbort);
        resolve();
      }, Math.min(left, MAX_TIMER_MS));
    };
    const onAbort = () => {
      clearTimeout(t);
      reject(signal.reason);
    };
    signal.addEventListener('abort', onAbort, { once: true });
    wait(ms);
  });
}
