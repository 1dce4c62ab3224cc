// The page shows the lab's name and the worker's /api/system answer.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { labAndBrowser, stopAll, TOKEN } from './lab.mjs';

let lab;
let browser;
before(async () => ({ lab, browser } = await labAndBrowser()));
after(() => stopAll(browser, lab));

test('the page renders the lab name and the system info from the worker', async () => {
  const api = await (await fetch(new URL('/api/system', lab.url))).json();
  assert.equal(api.name, 'hotlab');

  const page = await browser.newPage({ viewport: { width: 1280, height: 720 } });
  const errors = [];
  page.on('pageerror', (e) => errors.push(String(e)));
  await page.goto(lab.url);
  await page.getByRole('heading', { name: 'hotlab' }).waitFor();
  const panel = page.getByTestId('system-panel');
  await panel.getByTestId('torch-version').waitFor({ timeout: 20_000 });
  assert.equal(await panel.getByTestId('torch-version').textContent(), api.torch_version);
  assert.equal(await panel.getByTestId('hotlab-version').textContent(), api.version);
  assert.equal(await panel.getByTestId('cpu-cores').textContent(), String(api.cpu_cores));
  assert.equal(await panel.getByTestId('device').count(), api.devices.length);
  assert.match(await panel.getByTestId('device').first().textContent(), /cpu/);
  assert.deepEqual(errors, []);
});

test('unknown API paths answer 404 with a JSON error, unknown pages get the app', async () => {
  const res = await fetch(new URL('/api/nope', lab.url));
  assert.equal(res.status, 404);
  const body = await res.json();
  assert.equal(body.error.code, 'not_found');
  const page = await fetch(new URL('/some/page', lab.url));
  assert.equal(page.status, 200);
  assert.match(await page.text(), /hotlab_web\.js/);
});

test('the token leaves the address bar once the cookie carries it', async () => {
  const page = await browser.newPage({ viewport: { width: 1280, height: 720 } });
  await page.goto(new URL(`/?token=${TOKEN}#/`, lab.url).href);
  await page.getByTestId('role').filter({ hasText: 'operator' }).waitFor({ timeout: 20_000 });
  assert.doesNotMatch(page.url(), /token/, 'a link copied from the address bar carries no operator rights');
  assert.match(page.url(), /#\/$/, 'the route is kept');
  await page.reload();
  await page.getByTestId('role').filter({ hasText: 'operator' }).waitFor({ timeout: 20_000 });
  await page.close();
});
