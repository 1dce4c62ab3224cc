// The playground (issue 8): CartPole stepped in the page, on WebGPU (headless Chromium's
// SwiftShader) or in wasm on the CPU, under a random policy or a run's trained actor.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { startLab, launchBrowser, ARTIFACTS } from './lab.mjs';

let lab;
let gpuBrowser;
let cpuBrowser;
before(async () => {
  mkdirSync(ARTIFACTS, { recursive: true });
  lab = await startLab();
  gpuBrowser = await launchBrowser([], { webgpu: true });
  cpuBrowser = await launchBrowser();
});
after(async () => {
  await gpuBrowser?.close();
  await cpuBrowser?.close();
  lab?.stop();
});

/** A page on /playground that fails the test on any page error. */
async function openPlayground(browser, errors) {
  const page = await browser.newPage({ viewport: { width: 1280, height: 900 } });
  page.on('pageerror', (e) => errors.push(String(e)));
  await page.goto(new URL('/playground', lab.url).href);
  await page.getByTestId('playground').waitFor();
  return page;
}

const number = (text) => {
  const m = text.trim().match(/^([0-9.]+)\s*([kMG]?)$/);
  if (!m) return NaN;
  return Number(m[1]) * { '': 1, k: 1e3, M: 1e6, G: 1e9 }[m[2]];
};

/** Waits until the tile's number satisfies `ok`; returns it. */
async function waitNumber(page, testid, ok, timeout = 60_000) {
  const start = Date.now();
  for (;;) {
    const v = number(await page.getByTestId(testid).textContent());
    if (ok(v)) return v;
    if (Date.now() - start > timeout) throw new Error(`${testid} is still ${v}`);
    await page.waitForTimeout(100);
  }
}

/** Sets the envs field (as a user types it and presses Enter). */
async function setEnvs(page, n) {
  await page.getByTestId('pg-envs').fill(String(n));
  await page.getByTestId('pg-envs').press('Enter');
}

/** Mean episode length once `episodes` episodes have ended under the current settings. */
async function meanLength(page, episodes) {
  await waitNumber(page, 'pg-episodes', (v) => v >= episodes, 120_000);
  return number(await page.getByTestId('pg-mean-length').textContent());
}

/**
 * Mean length of random episodes, measured on a small batch. All envs start together, so
 * the first episodes to end are the short ones: 2,000 ended of 4,096 envs read 14 where
 * the mean is 22, depending on when the page was read. On 256 envs, 4,000 episodes are
 * about 15 rounds, and the episodes still running when it is read weigh little.
 */
async function randomMeanLength(page) {
  await setEnvs(page, 256);
  await page.waitForFunction(() => /\b256 envs/.test(document.body.textContent), null, { timeout: 30_000 });
  return meanLength(page, 4000);
}

test('the WebGPU path runs, reports steps/s, rejects bad sizes and measures steps/s against N', async () => {
  const errors = [];
  const page = await openPlayground(gpuBrowser, errors);
  await page.waitForFunction(() => document.querySelector('[data-testid=pg-backend]')?.textContent === 'webgpu', null, { timeout: 60_000 });
  assert.match(await page.getByTestId('pg-adapter').textContent(), /WebGPU adapter: .+/);
  const sps = await waitNumber(page, 'pg-sps', (v) => v > 0);
  const mean = await randomMeanLength(page);
  assert.ok(mean > 15 && mean < 30, `random CartPole episodes last about 22 steps, got ${mean}`);

  await setEnvs(page, 65536);
  await page.waitForFunction(() => /65536 envs/.test(document.body.textContent), null, { timeout: 30_000 });
  await waitNumber(page, 'pg-episodes', (v) => v > 1000);
  assert.equal(await page.getByTestId('pg-backend').textContent(), 'webgpu');

  await setEnvs(page, 0);
  assert.match(await page.getByTestId('pg-envs-error').textContent(), /envs: a whole number from 1 to 1048576/);
  await setEnvs(page, 'lots');
  assert.match(await page.getByTestId('pg-envs-error').textContent(), /got 'lots'/);
  assert.match(await page.textContent('body'), /65536 envs/, 'a refused size keeps the running one');

  await page.getByTestId('pg-sweep').click();
  await page.waitForFunction(() => Number(document.querySelector('[data-testid=pg-chart-wrap]')?.dataset.points) >= 12,
    null, { timeout: 240_000, polling: 500 });
  assert.equal(await page.getByTestId('pg-sweep-status').textContent(), '');
  await page.screenshot({ path: join(ARTIFACTS, 'playground-webgpu.png'), fullPage: true });
  console.log(`webgpu: ${sps} steps/s at 4096 envs`);
  assert.deepEqual(errors, []);
  await page.close();
});

test('without WebGPU the CPU path runs', async () => {
  const errors = [];
  const page = await openPlayground(cpuBrowser, errors);
  await page.waitForFunction(() => document.querySelector('[data-testid=pg-backend]')?.textContent === 'cpu', null, { timeout: 60_000 });
  assert.match(await page.getByTestId('pg-adapter').textContent(), /No WebGPU/);
  await waitNumber(page, 'pg-sps', (v) => v > 0);
  const mean = await randomMeanLength(page);
  assert.ok(mean > 15 && mean < 30, `random episodes: ${mean}`);
  await page.screenshot({ path: join(ARTIFACTS, 'playground-cpu.png'), fullPage: true });
  assert.deepEqual(errors, []);
  await page.close();
});

test('a policy trained on the worker keeps the poles up over 10x longer than random, on both paths', async () => {
  const id = await lab.launch({ env: 'cartpole', device: 'cpu', seed: 1 });
  await lab.waitFor(id, ['finished'], 300_000);

  const errors = [];
  const page = await openPlayground(gpuBrowser, errors);
  await page.waitForFunction(() => document.querySelector('[data-testid=pg-backend]')?.textContent === 'webgpu', null, { timeout: 60_000 });
  await setEnvs(page, 1024);
  await page.waitForFunction(() => /1024 envs/.test(document.body.textContent));
  const random = await meanLength(page, 3000);

  await page.getByTestId('pg-policy').selectOption(String(id));
  await page.waitForFunction(() => document.querySelector('[data-testid=pg-episodes]')?.textContent === '0');
  const trained = await meanLength(page, 1024);
  console.log(`webgpu, 1024 envs: mean length ${random} random, ${trained} with run ${id}'s actor`);
  assert.ok(trained >= 10 * random, `trained ${trained} vs random ${random}`);
  assert.equal(await page.getByTestId('pg-error').textContent(), '');

  // The same actor evaluated in wasm on the CPU path.
  await page.getByTestId('pg-path').selectOption('cpu');
  await page.waitForFunction(() => document.querySelector('[data-testid=pg-backend]')?.textContent === 'cpu');
  await setEnvs(page, 256);
  await page.waitForFunction(() => /256 envs/.test(document.body.textContent));
  const cpuTrained = await meanLength(page, 256);
  console.log(`cpu, 256 envs: mean length ${cpuTrained} with run ${id}'s actor`);
  assert.ok(cpuTrained >= 10 * random, `cpu trained ${cpuTrained} vs random ${random}`);
  await page.screenshot({ path: join(ARTIFACTS, 'playground-trained.png'), fullPage: true });
  assert.deepEqual(errors, []);
  await page.close();
});

test('the two playground lessons measure each setting side by side on WebGPU', async () => {
  const errors = [];
  const page = await openPlayground(gpuBrowser, errors);
  await page.getByTestId('pg-backend').filter({ hasText: 'webgpu' }).waitFor({ timeout: 60_000 });
  await setEnvs(page, 256);
  // The knobs drive the live loop too.
  await page.getByTestId('pg-steps-per-dispatch').selectOption('16');
  await page.getByTestId('pg-read-back').selectOption('every');
  await waitNumber(page, 'pg-sps', (v) => v > 0);

  const rows = page.getByTestId('pg-lesson-row');
  await page.getByTestId('pg-lesson-read-back-run').click();
  const readBack = page.getByTestId('pg-lesson-read-back');
  await readBack.locator('[data-testid="pg-lesson-row"]:not([data-sps="0"])').nth(1).waitFor({ timeout: 120_000 });
  // Both rounds done: the status line empties.
  await page.waitForFunction(() => document.querySelector('[data-testid="pg-sweep-status"]').textContent === '',
    null, { timeout: 120_000 });
  const settings = await readBack.getByTestId('pg-lesson-row').evaluateAll((rs) => rs.map((r) => [r.dataset.setting, Number(r.dataset.sps)]));
  assert.deepEqual(settings.map((s) => s[0]), ['read back every dispatch', 'read back once per frame']);
  assert.ok(settings.every((s) => s[1] > 0), JSON.stringify(settings));

  await page.getByTestId('pg-lesson-steps-per-dispatch-run').click();
  const perDispatch = page.getByTestId('pg-lesson-steps-per-dispatch');
  await perDispatch.locator('[data-testid="pg-lesson-row"]:not([data-sps="0"])').nth(5).waitFor({ timeout: 240_000 });
  const sps = await perDispatch.getByTestId('pg-lesson-row').evaluateAll((rs) => rs.map((r) => Number(r.dataset.sps)));
  // Each setting measured (how much faster is this machine's to say, not the test's).
  assert.equal(sps.length, 6);
  assert.ok(sps.every((x) => x > 0), JSON.stringify(sps));
  assert.equal(await rows.count(), 8);
  await page.screenshot({ path: join(ARTIFACTS, 'playground-lessons.png'), fullPage: true });
  assert.deepEqual(errors, []);
});
