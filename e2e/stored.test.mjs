// Runs stored by an earlier version (the flat spec form, before the spec was nested by
// concern) load and display: the history lists them, a run's page shows its status, its
// updates and bottleneck rows, and launching from the form posts the nested form.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { copyFileSync, mkdirSync, mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, dirname, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { labAndBrowser, stopAll, openForm, TOKEN, ARTIFACTS } from './lab.mjs';

const fixture = resolve(dirname(fileURLToPath(import.meta.url)), '../tests/fixtures/flat-store/hotlab.sqlite');

let lab;
let browser;
before(async () => {
  const data = mkdtempSync(join(tmpdir(), 'hotlab-e2e-flat-'));
  mkdirSync(join(data, 'hotlab-data'));
  copyFileSync(fixture, join(data, 'hotlab-data', 'hotlab.sqlite'));
  ({ lab, browser } = await labAndBrowser({ data }));
});
after(() => stopAll(browser, lab));

test('runs stored in the flat form are listed and displayed', async () => {
  const runs = (await (await fetch(new URL('/api/runs', lab.url))).json()).reverse(); // listed newest first
  assert.deepEqual(runs.map((r) => [r.id, r.status, Object.keys(r.spec.workload)[0]]),
    [[1, 'finished', 'cartpole'], [2, 'finished', 'proof']]);
  assert.equal(runs[1].spec.workload.proof.kb, 'family:people=30,seed=3', 'the proof settings moved in');

  const context = await browser.newContext({ viewport: { width: 1280, height: 720 } });
  const page = await context.newPage();
  const errors = [];
  page.on('pageerror', (e) => errors.push(String(e)));
  await page.goto(new URL(`/?token=${TOKEN}#/`, lab.url).href);
  const row = (id) => page.locator(`[data-testid="history-row"][data-run="${id}"]`);
  await row(2).waitFor({ timeout: 20_000 });
  assert.match(await row(2).textContent(), /finished.*proof/);
  assert.match(await row(1).textContent(), /finished.*cartpole/);
  await page.goto(new URL('/#/run/1', lab.url).href);
  await page.getByTestId('run-status').filter({ hasText: 'finished' }).waitFor({ timeout: 20_000 });
  await page.getByTestId('progress').filter({ hasText: '4 / 4' }).waitFor({ timeout: 20_000 });
  await page.getByTestId('bottleneck-row').first().waitFor({ timeout: 20_000 });
  await page.screenshot({ path: join(ARTIFACTS, 'stored-flat-run.png'), fullPage: true });
  assert.deepEqual(errors, []);
  await context.close();
});

test('the form shows the chosen workload\'s fields only and launches the nested form', async () => {
  const context = await browser.newContext({ viewport: { width: 1280, height: 720 } });
  const page = await context.newPage();
  await page.goto(new URL(`/?token=${TOKEN}#/`, lab.url).href);
  await openForm(page);
  const form = page.getByTestId('launch-form');
  await form.locator('[name="envs"]').waitFor({ timeout: 20_000 });
  assert.equal(await form.locator('[name="kb"]').isVisible(), false, 'no proof field on a CartPole run');
  await form.locator('[name="env"]').selectOption('proof');
  await form.locator('[name="kb"]').waitFor({ state: 'visible' });
  await form.locator('[name="kb"]').fill('family:people=30,seed=3');
  await form.locator('[name="kb"]').dispatchEvent('change');
  for (const [name, value] of [['envs', '8'], ['steps', '16'], ['total_steps', '1024'], ['device', 'cpu']]) {
    await form.locator(`[name="${name}"]`).fill(value);
    await form.locator(`[name="${name}"]`).dispatchEvent('change');
  }
  await page.getByTestId('launch-button').click();
  await page.waitForURL(/#\/run\/3$/);
  const run = await lab.waitFor(3, ['finished']);
  assert.equal(run.spec.workload.proof.kb, 'family:people=30,seed=3');
  assert.equal(run.spec.workload.proof.depth, 10, 'the proof env\'s defaults');
  assert.equal(run.spec.envs, 8);
  await context.close();
});
