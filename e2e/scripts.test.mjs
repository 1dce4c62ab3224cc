// A user's own training script in the lab: refused (and the form says why) by a lab not
// started with --allow-scripts; launched from the form on one that is, its run shows the
// bottleneck table and advice with the lessons that teach each fix, a click away.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { join, dirname, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { launchBrowser, startLab, openPage, openForm, screenshot, TOKEN } from './lab.mjs';

const repo = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const python = process.env.HOTLAB_PYTHON ?? join(repo, '.venv/bin/python');
const planted = join(repo, 'tests/fixtures/external/planted.py');
const command = `${python} ${planted} --updates 3 --num-envs 32 --num-steps 16 --plant item --plant copies`;

let browser;
let open;
let closed;
before(async () => {
  browser = await launchBrowser();
  [open, closed] = await Promise.all([startLab({ args: ['--allow-scripts'] }), startLab()]);
});
after(async () => {
  await browser?.close();
  open?.stop();
  closed?.stop();
});

async function pickScript(page) {
  await openForm(page);
  const form = page.getByTestId('launch-form');
  await form.locator('[name="env"]').selectOption('external');
  const input = form.locator('[name="command"]');
  await input.fill(command);
  await input.dispatchEvent('change');
}

test('a lab without --allow-scripts refuses a script, and its form says how to allow one', async () => {
  const res = await fetch(new URL('/api/runs', closed.url), {
    method: 'POST',
    headers: { Authorization: `Bearer ${TOKEN}`, 'Content-Type': 'application/json' },
    body: JSON.stringify({ env: 'external', command }),
  });
  assert.equal(res.status, 403);
  const body = await res.json();
  assert.equal(body.error.code ?? body.code, 'scripts_off', JSON.stringify(body));
  const { page, errors, context } = await openPage(browser, closed, '#/');
  await pickScript(page);
  await page.getByTestId('script-note').filter({ hasText: '--allow-scripts' }).waitFor({ timeout: 10_000 });
  assert.match(await page.getByTestId('script-note').textContent(), /runs no commands of its users/);
  assert.ok(await page.getByTestId('launch-button').isDisabled(), 'no launch where it would be refused');
  assert.deepEqual(errors, []);
  await context.close();
});

test('a script launched from the form shows its table, its advice and the lessons that teach the fixes', async () => {
  const { page, errors, context } = await openPage(browser, open, '#/');
  await pickScript(page);
  await page.getByTestId('script-note').filter({ hasText: 'unmodified' }).waitFor({ timeout: 10_000 });
  await page.getByTestId('launch-button').click();
  await page.waitForURL(/#\/run\/\d+$/);
  await page.getByTestId('run-status').filter({ hasText: 'finished' }).waitFor({ timeout: 120_000 });
  await page.getByTestId('recommendation').first().waitFor({ timeout: 30_000 });
  assert.ok((await page.getByTestId('bottleneck-row').count()) >= 5, 'the script\'s phases are its table');
  const table = await page.locator('table.bottlenecks').textContent();
  assert.match(table, /host_read/);
  assert.match(table, /env_step/);
  const lessons = await page.getByTestId('recommendation-lesson').evaluateAll(
    (links) => links.map((a) => [a.dataset.lesson, a.getAttribute('href'), a.textContent]),
  );
  const ids = lessons.map(([id]) => id).sort();
  assert.deepEqual(ids, ['observation-copies', 'per-item-sync'], JSON.stringify(lessons));
  for (const [id, href, text] of lessons) {
    assert.equal(href, `#/lesson/${id}`);
    assert.match(text, /^row [24]: /);
  }
  const sites = await page.getByTestId('recommendation-site').allTextContents();
  assert.ok(sites.length === 2 && sites.every((s) => s.startsWith('planted.py:')), sites.join(', '));
  assert.match(await page.getByTestId('report-notes').textContent(), /probe cost/);
  // The counters are the probe's: 3 updates × 16 steps × 32 envs, each step 33 reads.
  assert.equal(await page.getByTestId('env-steps').getAttribute('title'), '1536');
  assert.match(await page.getByTestId('progress').textContent(), /^\d+$/, 'a script\'s updates: its own count, no total');
  const syncs = await page.getByTestId('counter-host-syncs').locator('td').nth(1).getAttribute('title');
  assert.ok(Number(syncs) > 1536, `host syncs counted (33 a step, the first step set-up's): ${syncs}`);
  assert.match(await page.getByTestId('run-summary').textContent(), /external · .*planted\.py --updates 3/);
  await screenshot(page, 'script-run');
  await page.getByTestId('recommendation-lesson').filter({ hasText: 'row 4' }).click();
  await page.waitForURL(/#\/lesson\/per-item-sync/);
  await page.getByText('A device sync per action element').first().waitFor({ timeout: 10_000 });
  assert.deepEqual(errors, []);
  await context.close();
});
