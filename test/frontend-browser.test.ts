/**
 * The fake front end (test/frontend-fixture.ts) loaded by headless Chromium from treegate on
 * loopback: the page's script must run, call /api/public/settings and render site_title, with the
 * stylesheet applied; once at the root and once under a base_path. Takes one screenshot to a temp
 * file (set TREEGATE_KEEP_SCREENSHOT=/path.png to keep it and look at it). Needs /usr/bin/chromium
 * (Debian package `chromium`, installed by `npm test`'s tool check and by CI); fails without it.
 */
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import puppeteer, { type Browser } from 'puppeteer-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestServer, type TestServer } from './harness.js';
import { makeFakeFrontend, type FakeFrontend } from './frontend-fixture.js';

const CHROMIUM = '/usr/bin/chromium';
const ARGS = [
  '--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
  '--disable-background-networking', '--disable-component-update', '--disable-sync',
];

let fe: FakeFrontend;
let profile: string;
let browser: Browser;

interface Rendered {
  title: string;
  heading: string;
  color: string;
  fontSize: string;
  /** Same-origin requests the page made, with their status. */
  requests: Array<[string, number]>;
}

/** Load `url` and wait for the script-rendered heading. */
async function render(url: string, screenshot?: string): Promise<Rendered> {
  // Its own context, closed afterwards: that drops Chromium's keep-alive sockets, so the server's
  // graceful stop need not wait for them.
  const context = await browser.createBrowserContext();
  const page = await context.newPage();
  const origin = new URL(url).origin;
  const requests: Array<[string, number]> = [];
  // Loopback only: anything else (the default favicon/logo CDN) is refused at once, never waited for.
  await page.setRequestInterception(true);
  page.on('request', (req) => void (req.url().startsWith(origin) ? req.continue() : req.abort()));
  page.on('response', (r) => {
    if (r.url().startsWith(origin)) requests.push([new URL(r.url()).pathname, r.status()]);
  });
  try {
    await page.goto(url, { waitUntil: 'load', timeout: 30_000 });
    await page.waitForSelector('#root[data-ready="yes"] #title', { timeout: 15_000 });
    // A string, so this Node-typed project needs no DOM lib.
    const out = (await page.evaluate(`(() => {
      const h = document.getElementById('title');
      const cs = getComputedStyle(h);
      return { title: document.title, heading: h.textContent, color: cs.color, fontSize: cs.fontSize };
    })()`)) as Omit<Rendered, 'requests'>;
    if (screenshot) await page.screenshot({ path: screenshot as `${string}.png` });
    return { ...out, requests };
  } finally {
    await context.close();
  }
}

describe('front end in headless Chromium', () => {
  beforeAll(async () => {
    fe = await makeFakeFrontend();
    profile = await mkdtemp(join(tmpdir(), 'treegate-chromium-'));
    browser = await puppeteer.launch({ executablePath: CHROMIUM, args: [...ARGS, `--user-data-dir=${profile}`], headless: true });
  });

  afterAll(async () => {
    await browser?.close();
    if (profile) await rm(profile, { recursive: true, force: true });
    if (fe) await rm(fe.dir, { recursive: true, force: true });
  });

  it('renders site_title from /api/public/settings at the root', async () => {
    const srv: TestServer = await startTestServer({ env: { TREEGATE_DIST_DIR: fe.dist, TREEGATE_SFTP_ENABLE: 'false' } });
    const shot = process.env.TREEGATE_KEEP_SCREENSHOT ?? join(fe.dir, 'screenshot.png');
    try {
      await srv.running.core.settings.save({ site_title: 'Treegate In A Browser', main_color: '#123456' });
      const r = await render(`${srv.url}/@login?redirect=%2F`, shot);
      expect(r.heading).toBe('Treegate In A Browser');
      expect(r.title).toBe('Treegate In A Browser'); // filled into <title> by the server
      expect(r.color).toBe('rgb(18, 52, 86)'); // main_color placeholder
      expect(r.fontSize).toBe('40px'); // /assets/index.css applied
      expect(r.requests).toEqual(
        expect.arrayContaining([['/@login', 200], ['/assets/index.css', 200], ['/assets/index.js', 200], ['/api/public/settings', 200]]),
      );
      expect(r.requests.filter(([, s]) => s >= 400)).toEqual([]);
      const png = await readFile(shot);
      expect(png.subarray(0, 8).toString('hex')).toBe('89504e470d0a1a0a');
      expect(png.length).toBeGreaterThan(1000);
    } finally {
      await srv.close();
    }
  });

  it('works under a base_path', async () => {
    const srv = await startTestServer({ env: { TREEGATE_DIST_DIR: fe.dist, TREEGATE_SITE_URL: '/tg', TREEGATE_SFTP_ENABLE: 'false' } });
    try {
      await srv.running.core.settings.save({ site_title: 'Under A Prefix' });
      const r = await render(`${srv.url}/tg/some/folder`);
      expect(r.heading).toBe('Under A Prefix');
      expect(r.requests).toEqual(
        expect.arrayContaining([['/tg/some/folder', 200], ['/tg/assets/index.js', 200], ['/tg/api/public/settings', 200]]),
      );
      expect(r.requests.filter(([, s]) => s >= 400)).toEqual([]);
    } finally {
      await srv.close();
    }
  });
});
