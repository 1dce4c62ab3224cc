// The lab's machines in a browser: the Machines panel lists the local machine and a worker
// that connected (a real `hotlab worker` process), the launch form sends a run to the
// worker, the run's view and the history say where it ran, and a sweep on the workers
// fills its page's table.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { mkdirSync } from 'node:fs';
import { startLab, startWorker, launchBrowser, stopAll, openPage, openForm, screenshot, ARTIFACTS } from './lab.mjs';

let lab;
let worker;
let browser;
before(async () => {
  mkdirSync(ARTIFACTS, { recursive: true });
  lab = await startLab({ args: ['--local-name', 'lab-host'] });
  worker = startWorker(lab, 'gpu-box-e2e');
  browser = await launchBrowser();
});
after(() => stopAll(browser, worker, lab));

test('the Machines panel lists each machine and a run launched on the worker says so', async () => {
  const { page, errors } = await openPage(browser, lab, '#/');
  const panel = page.getByTestId('machines-panel');
  const row = (name) => panel.locator(`[data-testid="machine-row"][data-machine="${name}"]`);
  await row('lab-host').waitFor({ timeout: 20_000 });
  await row('gpu-box-e2e').waitFor({ timeout: 30_000 });
  assert.equal(await row('lab-host').getByTestId('machine-state').textContent(), 'local');
  assert.equal(await row('gpu-box-e2e').getByTestId('machine-state').textContent(), 'connected');
  assert.match(await row('gpu-box-e2e').getByTestId('machine-devices').textContent(), /cpu \(\d+ cores\)/);
  assert.match(await row('gpu-box-e2e').getByTestId('machine-load').textContent(), /0 of 1 runs/);
  await screenshot(page, 'machines');

  // The launch form sends the run to the machine chosen.
  await openForm(page);
  const form = page.getByTestId('launch-form');
  await form.getByTestId('machine-select').locator('option[value="gpu-box-e2e"]').waitFor({ state: 'attached' });
  await form.getByTestId('machine-select').selectOption('gpu-box-e2e');
  for (const [name, value] of [['total_steps', '8192'], ['envs', '8'], ['device', 'cpu']]) {
    const input = form.locator(`[name="${name}"]`);
    if ((await input.evaluate((e) => e.tagName)) === 'SELECT') await input.selectOption(value);
    else await input.fill(value);
    await input.dispatchEvent('change');
  }
  await page.getByTestId('launch-button').click();
  await page.waitForURL(/#\/run\/\d+/, { timeout: 20_000 });
  const id = Number(page.url().match(/#\/run\/(\d+)/)[1]);
  await page.getByTestId('run-machine').filter({ hasText: 'gpu-box-e2e' }).waitFor({ timeout: 20_000 });
  const run = await lab.waitFor(id, ['finished', 'failed']);
  assert.equal(run.status, 'finished', JSON.stringify(run));
  assert.equal(run.machine, 'gpu-box-e2e');
  await page.getByTestId('run-status').filter({ hasText: 'finished' }).waitFor({ timeout: 30_000 });
  await screenshot(page, 'run-on-worker');

  // A machine that is not there is refused at its field.
  await page.goto(new URL('/#/', lab.url).href);
  await page.getByTestId('history-row').first().waitFor({ timeout: 20_000 });
  await openForm(page);
  assert.equal(await page.locator(`[data-testid="history-row"][data-run="${id}"]`).getByTestId('history-machine').textContent(), 'gpu-box-e2e');

  // A sweep from the form, on the workers: its page fills its table and marks the best cell.
  await form.locator('[name="total_steps"]').fill('4096');
  await form.locator('[name="total_steps"]').dispatchEvent('change');
  await form.getByTestId('sweep-grid').fill('envs=4,8');
  await form.getByTestId('sweep-grid').dispatchEvent('change');
  await form.getByTestId('sweep-on').selectOption('workers');
  await form.getByTestId('sweep-button').click();
  await page.waitForURL(/#\/sweep\/\d+/, { timeout: 20_000 });
  await page.getByTestId('sweep-status').filter({ hasText: 'finished' }).waitFor({ timeout: 120_000 });
  assert.equal(await page.getByTestId('sweep-cell').count(), 2);
  const marks = await page.getByTestId('sweep-mark').allTextContents();
  assert.ok(marks.some((m) => m.includes('fastest')), JSON.stringify(marks));
  await screenshot(page, 'sweep');
  assert.deepEqual(errors, []);
});
