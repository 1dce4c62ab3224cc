// Lessons and audits in a browser: the catalogue, a lesson run by the operator from its
// page (parameters in the URL) and followed by a viewer without the token, the link that
// reopens it, presenter mode, and a recommendation audited from a run's view.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { labAndBrowser, stopAll, openPage, screenshot } from './lab.mjs';

let lab;
let browser;
before(async () => ({ lab, browser } = await labAndBrowser()));
after(() => stopAll(browser, lab));

const open = (path, options) => openPage(browser, lab, path, options);
const shot = screenshot;

test('a lesson runs from its page, a viewer follows it, and its link reopens it', async () => {
  const { page, errors } = await open('#/lessons');
  const cards = page.getByTestId('lesson-card');
  await cards.first().waitFor({ timeout: 20_000 });
  assert.ok(await cards.count() >= 8, 'a card per lesson');
  const gpuOnly = await cards.filter({ hasText: 'A replay buffer on the host' }).textContent();
  assert.match(gpuOnly, /needs a GPU/, 'a lesson whose bottleneck needs a GPU says so on its card');
  await shot(page, 'lessons');

  // What a GPU measured, labelled with the device and the day (the repository's record),
  // on a lesson's page; a lesson with nothing recorded says so.
  await page.goto(new URL('/#/lesson/op-dispatch', lab.url).href);
  await page.getByTestId('lesson-title').filter({ hasText: 'Op-by-op dispatch' }).waitFor({ timeout: 20_000 });
  assert.match(await page.getByTestId('gpu-result').textContent(),
    /^On a GPU: measured on an NVIDIA H100 80GB HBM3, 2026-11-27: inference=fused confirmed ×3\.37 \(2\.76–4\.34; A\/A noise 0\.73–1\.80, 1 s runs × 3 repeats\)$/);
  await page.goto(new URL('/#/lesson/update-dispatch', lab.url).href);
  await page.getByTestId('lesson-title').filter({ hasText: 'An update dispatched op by op' }).waitFor({ timeout: 20_000 });
  assert.match(await page.getByTestId('gpu-result').textContent(),
    /^On a GPU: measured on .*: update=graph confirmed ×1\.90 \(1\.39–2\.50; A\/A noise 0\.87–1\.11, 4 s runs × 3 repeats\); at 1-second runs/);

  // The parameters live in the URL: the operator sets one, and the link carries it.
  await page.goto(new URL('/#/lesson/batch-size?repeats=2&seconds=0.3&hide=', lab.url).href);
  await page.getByTestId('lesson-title').filter({ hasText: 'A batch too small' }).waitFor({ timeout: 20_000 });
  await page.getByTestId('lesson-knob-envs').fill('2');
  await page.getByTestId('lesson-knob-envs').press('Enter');
  await page.waitForFunction(() => location.hash.includes('envs=2'), null, { timeout: 10_000 });
  const link = await page.evaluate(() => location.hash);
  assert.match(link, /^#\/lesson\/batch-size\?envs=2&repeats=2&seconds=0\.3$/);

  const viewer = await open(link, { operator: false });
  assert.equal(await viewer.page.getByTestId('lesson-run').isDisabled(), true, 'a viewer cannot start it');
  assert.equal(await viewer.page.getByTestId('lesson-knob-envs').inputValue(), '2', 'the link reopens the same settings');

  await page.getByTestId('lesson-knob-envs').waitFor();
  await page.getByTestId('lesson-run').click();
  await page.getByTestId('audit-progress').waitFor({ timeout: 20_000 });
  // The verdict, then the signature, on the operator's page and on the viewer's.
  for (const p of [page, viewer.page]) {
    await p.getByTestId('lesson-shows').waitFor({ timeout: 120_000 });
    assert.match(await p.getByTestId('lesson-shows').textContent(), /showed/);
    const verdicts = await p.getByTestId('verdict').allTextContents();
    assert.match(verdicts[0], /noise ×/);
    assert.match(verdicts[1], /(confirmed|no effect|regression|beyond the bound): ×[0-9.]+ \([0-9.]+–[0-9.]+\)/);
    const figures = await p.getByTestId('signature-figure').allTextContents();
    assert.deepEqual(figures.map(Number).slice(0, 1), [0.5], 'two envs: half a forward per env step');
  }
  await shot(page, 'lesson-done');

  // Presenter mode: the lesson alone, full screen.
  const presenter = await open(`${link}&present=1`, { operator: false });
  await presenter.page.getByTestId('lesson-shows').waitFor({ timeout: 20_000 });
  const box = await presenter.page.getByTestId('lesson').boundingBox();
  assert.ok(box.x === 0 && box.y === 0 && box.width >= 1270, `full screen: ${JSON.stringify(box)}`);
  await shot(presenter.page, 'lesson-presenter');
  assert.deepEqual([...errors, ...viewer.errors, ...presenter.errors], []);
});

test('a recommendation is audited from the run view', async () => {
  // Workers that spin on two cores: waiting on them is most of the time, so the report
  // recommends removing them whatever this machine's speed.
  const id = await lab.launch({ env: 'cartpole', envs: 8, steps: 16, total_steps: 512, device: 'cpu',
    backend: 'subprocess', workers: 2, wait: 'spin' });
  await lab.waitFor(id, ['finished']);
  const { page, errors } = await open(`#/run/${id}`);
  const audit = page.getByTestId('recommendation-audit').first();
  await audit.waitFor({ timeout: 30_000 });
  const knob = await page.getByTestId('recommendation').first().locator('code').textContent();
  // The run's spec has 512 steps: each of the audit's runs is as short (or 2 s).
  await audit.click();
  await page.getByTestId('run-audit').waitFor({ timeout: 20_000 });
  await page.getByTestId('recommendation-verdict').first().filter({ hasText: '×' }).waitFor({ timeout: 120_000 });
  const verdict = await page.getByTestId('recommendation-verdict').first().textContent();
  assert.match(verdict, /: ×[0-9.]+ \(.*predicted ≤ ×[0-9.]+/, `${knob}: ${verdict}`);
  await shot(page, 'run-audited');

  // Find the fastest setup: a chain of audits whose last one launches what it found.
  await page.getByTestId('tune-button').click();
  const best = page.getByTestId('tune-launch');
  await best.waitFor({ timeout: 240_000 });
  assert.match(await page.getByTestId('tune-step').first().textContent(), /the search ends|kept/);
  await best.click();
  await page.waitForFunction((old) => /^#\/run\/\d+$/.test(location.hash) && location.hash !== old, `#/run/${id}`, { timeout: 20_000 });
  await shot(page, 'run-tuned');
  assert.deepEqual(errors, []);
});
