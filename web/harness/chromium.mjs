// Launches Debian's Chromium headless through playwright-core, the way every browser test of
// this repository does (the web central's tests, and the device gateway's dashboard test):
// /usr/bin/chromium, never a downloaded browser; a fresh, empty user-data dir (Playwright
// makes one per launch); background networking off (this machine has no network beyond
// loopback, and Chromium's background requests would only be refused).
//
//   import { launchChromium } from '../harness/chromium.mjs';
//   const chromium = await launchChromium();              // { browser, page, newPage, close }
//   await chromium.page.goto(url);
//   ...
//   await chromium.close();
//
// Options: { bluetooth: true } adds --enable-blink-features=WebBluetooth (without it
// navigator.bluetooth is undefined on Linux); { args: [...] } appends flags;
// { executablePath } overrides /usr/bin/chromium (or $CHROMIUM); { viewport } sizes pages.

import { chromium } from 'playwright-core';

/** The flags every test launch uses. */
export const BASE_ARGS = [
  '--headless',
  '--no-sandbox',
  '--disable-gpu',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
  '--no-first-run',
];

/** Launches Chromium and opens one page; `close()` ends both. */
export async function launchChromium(options = {}) {
  const executablePath = options.executablePath ?? process.env.CHROMIUM ?? '/usr/bin/chromium';
  const args = [...BASE_ARGS];
  if (options.bluetooth) args.push('--enable-blink-features=WebBluetooth');
  args.push(...(options.args ?? []));
  const browser = await chromium.launch({
    executablePath,
    args,
    headless: true,
    timeout: 30_000,
  });
  const context = await browser.newContext({ viewport: options.viewport ?? { width: 1280, height: 900 } });
  const newPage = async () => {
    const page = await context.newPage();
    // Page errors and console errors go to the test's output (a failing test then says why).
    page.on('pageerror', (e) => process.stderr.write(`[page error] ${e.message}\n`));
    page.on('console', (m) => {
      if (m.type() === 'error' || process.env.BLERPC_WEB_VERBOSE) {
        process.stderr.write(`[page console.${m.type()}] ${m.text()}\n`);
      }
    });
    return page;
  };
  const page = await newPage();
  return {
    browser,
    context,
    page,
    newPage,
    version: browser.version(),
    close: async () => {
      await context.close().catch(() => {});
      await browser.close().catch(() => {});
    },
  };
}
