// A lab that has run for months: the history shows a page of runs and reads older pages
// on request, and the system panel shows how big the run store has grown.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { copyFileSync, mkdirSync, mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, dirname, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { labAndBrowser, stopAll, TOKEN, ARTIFACTS } from './lab.mjs';

const fixture = resolve(dirname(fileURLToPath(import.meta.url)), '../tests/fixtures/flat-store/hotlab.sqlite');
const RUNS = 122;

let lab;
let browser;
before(async () => {
  const data = mkdtempSync(join(tmpdir(), 'hotlab-e2e-history-'));
  mkdirSync(join(data, 'hotlab-data'));
  const db = join(data, 'hotlab-data', 'hotlab.sqlite');
  copyFileSync(fixture, db);
  // Runs 3 to 122: copies of run 1 (a store with a long history, without running them).
  const python = process.env.HOTLAB_PYTHON ?? 'python3';
  const insert = `import sqlite3, sys
c = sqlite3.connect(sys.argv[1])
for i in range(3, ${RUNS + 1}):
    c.execute("INSERT INTO runs (id, created_ms, spec, status, message, events, sps) SELECT ?, created_ms, spec, status, message, events, sps FROM runs WHERE id = 1", (i,))
c.commit()`;
  const out = spawnSync(python, ['-c', insert, db], { encoding: 'utf8' });
  assert.equal(out.status, 0, out.stderr);
  ({ lab, browser } = await labAndBrowser({ data }));
});
after(() => stopAll(browser, lab));

test('the history pages through a long store and the system panel shows its size', async () => {
  const context = await browser.newContext({ viewport: { width: 1280, height: 720 } });
  const page = await context.newPage();
  const errors = [];
  page.on('pageerror', (e) => errors.push(String(e)));
  await page.goto(new URL(`/?token=${TOKEN}#/`, lab.url).href);
  const rows = page.getByTestId('history-row');
  await rows.first().waitFor({ timeout: 20_000 });
  assert.equal(await rows.count(), 50, 'one page');
  assert.equal(await rows.first().getAttribute('data-run'), String(RUNS), 'the newest first');
  const older = page.getByTestId('older-runs');
  await older.click();
  await page.locator(`[data-testid="history-row"][data-run="${RUNS - 99}"]`).waitFor({ timeout: 20_000 });
  assert.equal(await rows.count(), 100, 'two pages');
  await older.click();
  await page.locator('[data-testid="history-row"][data-run="1"]').waitFor({ timeout: 20_000 });
  assert.equal(await rows.count(), RUNS, 'every run, once');
  await older.waitFor({ state: 'detached', timeout: 20_000 });
  const size = await page.getByTestId('store-size').textContent();
  assert.match(size, /[0-9.]+ [KMG]i?B/, `the store's size: ${size}`);
  await page.screenshot({ path: join(ARTIFACTS, 'history-pages.png'), fullPage: true });
  assert.deepEqual(errors, []);
  await context.close();
});
