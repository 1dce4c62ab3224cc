// The first five minutes: the home's three ways in on a first visit (and a short one after),
// a one-click run per preset that ends with its panels explained, the lesson cards with
// this machine's checks, and the presenter's tour. Screenshots at 1440×900.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { labAndBrowser, stopAll, openPage, openForm, ARTIFACTS, TOKEN } from './lab.mjs';

let lab;
let browser;
let lessons; // the server's catalogue: the cards, the tour and the checks count from it
before(async () => {
  ({ lab, browser } = await labAndBrowser());
  lessons = (await (await fetch(new URL('/api/lessons', lab.url))).json()).length;
  assert.ok(lessons >= 3, `a catalogue of ${lessons} lessons`);
});
after(() => stopAll(browser, lab));

const PRESETS = [
  'cleanrl', 'wide', 'gpu', 'proof', 'morpho', 'grow', 'dreamer', 'mujoco', 'atari', 'mujoco-fast', 'atari-lstm',
  'memory', 'atari-envpool', 'atari-gpu',
];
// A fresh lab has timed no preset, so each card's Run gives it 2 minutes (a `--seconds`
// budget) beside a Full run button; once a card's run has a speed here, the card gives the
// whole run's time. What a lab without a GPU can run here: the gpu preset's card says it needs one; the grow,
// mujoco and atari presets train for minutes to days (mujoco and mujoco-fast: 1M steps of
// HalfCheetah; atari, atari-lstm, atari-envpool and atari-gpu: 10M steps of Breakout), so their cards
// are only opened into the form; the dreamer preset
// trains for about four minutes of one core, so its run is stopped from its page once its
// world model has trained (the CLI's test trains it whole and checks what its actor and
// world model learned); the morpho preset's run, about a minute, is stopped once
// its agent has made two updates (the morpho tests check what its run learns and
// evaluates).
const RUNNABLE = PRESETS.filter((p) => !['gpu', 'grow'].includes(p) && !p.startsWith('mujoco') && !p.startsWith('atari'));
const STOPPED = ['dreamer', 'morpho'];
const WORKLOAD = { cleanrl: 'cartpole', wide: 'cartpole', proof: 'proof', morpho: 'morpho', dreamer: 'dreamer', memory: 'gym' };

async function open(path, options) {
  const opened = await openPage(browser, lab, path, options);
  await opened.page.setViewportSize({ width: 1440, height: 900 });
  return opened;
}
const shot = (page, name) => page.screenshot({ path: join(ARTIFACTS, `${name}.png`) });

test('a first visit shows the three ways in; the next visit opens short; a viewer cannot run', async () => {
  const { page, errors, context } = await open('#/');
  await page.getByTestId('first-visit').waitFor({ timeout: 20_000 });
  for (const way of ['way-run', 'way-lesson', 'way-play']) assert.ok(await page.getByTestId(way).isVisible(), way);
  assert.deepEqual(await page.locator('[data-testid^="preset-"] h4').allTextContents(), PRESETS);
  assert.equal(await page.getByTestId('lesson-card').count(), lessons, 'the catalogue as cards');
  assert.ok(await page.getByTestId('play-link').isVisible());
  assert.equal(await page.getByTestId('launch-details').evaluate((d) => d.open), false, 'the form is collapsed');
  assert.equal(await page.getByTestId('launch-preset').textContent(), 'cleanrl');
  const gpu = page.getByTestId('preset-gpu');
  await gpu.getByTestId('preset-needs-gpu').waitFor({ timeout: 10_000 });
  assert.ok(await gpu.getByTestId('preset-run').isDisabled(), 'no GPU here: the gpu preset cannot run');
  assert.ok(!(await page.getByTestId('preset-cleanrl').getByTestId('preset-run').isDisabled()));
  // Each card says what its preset sets, as flags.
  assert.equal(
    await page.getByTestId('preset-wide').getByTestId('preset-flags').textContent(),
    '--envs 1024 --total-steps 5000000 --minibatches 32',
  );
  assert.equal(await page.getByTestId('preset-cleanrl').getByTestId('preset-flags').textContent(), 'nothing: the defaults');
  // A fresh lab has timed nothing: every card says so, and its Run gives it 2 minutes (which
  // time it) with the whole run one click away.
  for (const name of PRESETS) {
    const card = page.getByTestId(`preset-${name}`);
    const line = await card.getByTestId('preset-time').textContent();
    assert.match(line, /^Not timed on this lab yet: Run gives it 2 min and times it; Full run runs all [\d,]+ steps\.$/, `${name}: ${line}`);
    assert.equal(await card.getByTestId('preset-run').textContent(), 'Run 2 min', name);
    assert.equal(await card.getByTestId('preset-full').textContent(), 'Full run', name);
  }
  assert.match(await page.getByTestId('preset-atari').getByTestId('preset-time').textContent(), /all 10,000,000 steps/);
  await shot(page, 'landing');
  // "Adjust…" sets the form to the preset and opens it.
  await page.getByTestId('preset-dreamer').getByTestId('preset-adjust').click();
  const form = page.getByTestId('launch-form');
  await form.locator('[name="seq_len"]').waitFor({ state: 'visible', timeout: 10_000 });
  assert.equal(await form.locator('[name="env"]').inputValue(), 'dreamer');
  assert.equal(await form.locator('[name="envs"]').inputValue(), '4');
  assert.equal(await page.getByTestId('launch-preset').textContent(), 'dreamer');
  await page.getByTestId('preset-grow').getByTestId('preset-adjust').click();
  await form.locator('[name="clone_grower"]').waitFor({ state: 'visible', timeout: 10_000 });
  assert.equal(await form.locator('[name="env"]').inputValue(), 'morpho');
  assert.equal(await form.locator('[name="pin_heads"]').inputValue(), 'grower');
  assert.equal(await form.locator('[name="clone_grower"]').inputValue(), '384');
  assert.equal(await form.locator('[name="training_entry"]').inputValue(), 'gate');
  await page.getByTestId('preset-mujoco').getByTestId('preset-adjust').click();
  await form.locator('[name="gym_kwargs"]').waitFor({ state: 'visible', timeout: 10_000 });
  assert.equal(await form.locator('[name="env"]').inputValue(), 'gym');
  assert.equal(await form.locator('[name="gym_id"]').inputValue(), 'HalfCheetah-v5');
  assert.equal(await form.locator('[name="obs_norm"]').inputValue(), 'auto');
  assert.equal(await form.locator('[name="steps"]').inputValue(), '2048');
  // gym_id offers the ids the lab's Python can make: MuJoCo's are installed here.
  const groups = page.locator('[data-testid="suggestions"][data-knob="gym_id"]');
  await groups.locator('[data-group="mujoco"]').waitFor({ timeout: 20_000 });
  assert.match(await groups.locator('[data-group="mujoco"]').textContent(), /^mujoco: \d+ ids$/);
  assert.match(await groups.textContent(), /Gymnasium \d/, 'the list says where it came from');
  assert.equal(await form.locator('[name="gym_id"]').getAttribute('list'), 'gym_id-values');
  assert.equal(await form.locator('[name="hidden"]').getAttribute('list'), null, 'a knob without suggestions offers none');
  const offered = await page.locator('[id="gym_id-values"] option').evaluateAll((os) => os.map((o) => o.value));
  assert.ok(offered.includes('HalfCheetah-v5') && offered.includes('Hopper-v4') && offered.includes('CartPole-v1'), offered.join(' '));
  await page.reload();
  await page.getByTestId('welcome-back').waitFor({ timeout: 20_000 });
  assert.equal(await page.getByTestId('first-visit').count(), 0, 'the home remembers the visit');
  assert.ok(await page.getByTestId('way-run').isVisible(), 'the ways in stay');
  assert.deepEqual(errors, []);
  await context.close();

  const viewer = await open('#/', { operator: false });
  await viewer.page.getByTestId('preset-hint').waitFor({ timeout: 20_000 });
  assert.ok(await viewer.page.getByTestId('preset-cleanrl').getByTestId('preset-run').isDisabled());
  await viewer.context.close();
});

test('each preset card launches its run, which ends with its panels explained and its odd rows labelled', async () => {
  const { page, errors, context } = await open('#/');
  const ids = {};
  for (const name of RUNNABLE) {
    await page.evaluate(() => { location.hash = '#/'; });
    await page.getByTestId(`preset-${name}`).getByTestId('preset-run').click();
    await page.waitForURL(/#\/run\/\d+$/, { timeout: 20_000 });
    const id = Number(page.url().match(/#\/run\/(\d+)$/)[1]);
    ids[name] = id;
    const end = STOPPED.includes(name) ? 'stopped' : 'finished';
    if (end === 'stopped') {
      // The dreamer: one iteration whose world model trained (its rows and charts are
      // there then); morpho: two updates. Then the page's stop button.
      if (name === 'dreamer') await page.getByTestId('chart-world').waitFor({ timeout: 300_000 });
      const trained = async () => {
        const events = await (await fetch(new URL(`/api/runs/${id}/metrics`, lab.url))).json();
        if (name !== 'dreamer') return events.length;
        return events.filter((e) => (e.metrics?.losses?.world ?? e.metrics?.world)?.image > 0).length;
      };
      const enough = name === 'dreamer' ? 1 : 2;
      const start = Date.now();
      while ((await trained()) < enough) {
        assert.ok(Date.now() - start < 300_000, `${name}: ${enough} iterations that train`);
        await new Promise((r) => setTimeout(r, 500));
      }
      await page.getByTestId('stop-button').click();
    }
    // A bound, not a speed.
    const run = await lab.waitFor(id, [end, 'failed'], 600_000);
    assert.equal(run.status, end, `${name}: ${JSON.stringify(run.message)}`);
    assert.deepEqual(Object.keys(run.spec.workload), [WORKLOAD[name]], name);
    await page.getByTestId('run-status').filter({ hasText: end }).waitFor({ timeout: 30_000 });
    await page.getByTestId('bottleneck-row').first().waitFor({ timeout: 30_000 });
    for (const panel of ['bottlenecks', 'phase-split', 'counters', 'verdicts', 'noise']) {
      const line = await page.getByTestId(`explain-${panel}`).textContent();
      assert.ok(line.length > 60 && /more in the guide$/.test(line), `${name} ${panel}: ${line}`);
    }
    const per = await page.getByTestId('row-per').allTextContents();
    if (name === 'dreamer') {
      assert.ok(per.some((p) => /per train step \(none during the prefill\)/.test(p)), `the world model's rows: ${per}`);
    } else if (name !== 'morpho') {
      assert.ok(per.some((p) => /per minibatch/.test(p)), `PPO's update rows: ${per}`);
    }
    await shot(page, `preset-${name}`);
  }
  // Each card it ran now gives its whole run's time at the speed its run measured here:
  // under the demo's 2 minutes, Run runs it whole; over, Run stays the demo beside Full run.
  await page.evaluate(() => { location.hash = '#/'; });
  for (const name of ['cleanrl', 'proof', 'memory']) {
    const card = page.getByTestId(`preset-${name}`);
    const time = card.getByTestId('preset-time');
    await time.filter({ hasText: `run #${ids[name]}` }).waitFor({ timeout: 20_000 });
    const line = await time.textContent();
    const run = await (await fetch(new URL(`/api/runs/${ids[name]}`, lab.url))).json();
    assert.equal(run.spec.seconds, 120, `${name}: the card ran a demo of 2 minutes at most`);
    const whole = run.spec.total_steps / run.sps;
    if (whole <= 120) {
      assert.match(line, /^Here: about \d+ (s|min) for its [\d,]+ steps \(run #\d+ ran [\d.]+ k? ?steps\/s\)\.$/, `${name}: ${line}`);
      assert.equal(await card.getByTestId('preset-run').textContent(), 'Run', name);
      assert.equal(await card.getByTestId('preset-full').count(), 0, name);
    } else {
      assert.match(line, /^Here the whole run takes about .* \(.* steps at the .* steps\/s of run #\d+\): Run gives it 2 min, Full run all of it\.$/, `${name}: ${line}`);
      assert.equal(await card.getByTestId('preset-run').textContent(), 'Run 2 min', name);
    }
  }
  await page.evaluate(() => window.scrollTo(0, 0));
  await shot(page, 'home-timed');
  // The atari card's demo: 2 minutes of the 10 M steps, whose page says when it will end
  // (no later than its budget); stopped here.
  await page.getByTestId('preset-atari').getByTestId('preset-run').click();
  await page.waitForURL(/#\/run\/\d+$/, { timeout: 20_000 });
  const atari = Number(page.url().match(/#\/run\/(\d+)$/)[1]);
  const spec = (await (await fetch(new URL(`/api/runs/${atari}`, lab.url))).json()).spec;
  assert.deepEqual([spec.seconds, spec.total_steps, spec.workload.gym.id], [120, 10_000_000, 'ALE/Breakout-v5']);
  const end = page.getByTestId('expected-end');
  await end.waitFor({ timeout: 180_000 });
  assert.match(await end.textContent(), /^expected endin (\d+ s|[12] min)$/);
  assert.match(await end.getAttribute('title'), /^at \d\d:\d\d:\d\d \(/);
  await page.evaluate(() => window.scrollTo(0, 0));
  await shot(page, 'atari-demo');
  await page.getByTestId('stop-button').click();
  const stopped = await lab.waitFor(atari, ['stopped', 'finished', 'failed'], 120_000);
  assert.notEqual(stopped.status, 'failed', JSON.stringify(stopped.message));
  // A panel's link opens its section of the guide.
  await page.getByTestId('explain-counters').getByTestId('explain-link').click();
  await page.getByTestId('guide').waitFor({ timeout: 10_000 });
  assert.match(page.url(), /#\/guide\/counters$/);
  await page.waitForFunction(() => {
    const h = document.getElementById('counters');
    return h && Math.abs(h.getBoundingClientRect().top) < 200;
  }, null, { timeout: 10_000 });
  assert.deepEqual(errors, []);
  await context.close();
});

test('the presenter tour steps forward and back, and a lesson runs from its screen to its verdict', async () => {
  const { page, errors, context } = await open('#/lessons?present=1&seconds=0.3&repeats=2');
  const at = page.getByTestId('tour-at');
  await at.filter({ hasText: `1 / ${lessons}` }).waitFor({ timeout: 20_000 });
  const title = () => page.getByTestId('lesson-title').textContent();
  const first = await title();
  assert.ok(await page.getByTestId('tour-back').isDisabled(), 'nothing before the first');
  await page.keyboard.press('ArrowRight');
  await at.filter({ hasText: `2 / ${lessons}` }).waitFor();
  assert.notEqual(await title(), first);
  await page.getByTestId('tour-forward').click();
  await at.filter({ hasText: `3 / ${lessons}` }).waitFor();
  await page.keyboard.press('ArrowLeft');
  await at.filter({ hasText: `2 / ${lessons}` }).waitFor();
  await page.getByTestId('tour-back').click();
  await at.filter({ hasText: `1 / ${lessons}` }).waitFor();
  assert.equal(await title(), first);
  assert.match(page.url(), /#\/lessons\?present=1&at=1&seconds=0\.3&repeats=2$/, 'the budget goes along');
  await page.getByTestId('lesson-run').click();
  await page.getByTestId('lesson-shows').waitFor({ timeout: 180_000 });
  const verdicts = await page.getByTestId('verdict').allTextContents();
  assert.match(verdicts[0], /noise ×/);
  await shot(page, 'tour');
  assert.deepEqual(errors, []);
  await context.close();
});

// Last: the check goes on in the background (the lab ends it when it stops).
test('the lesson cards show this machine\'s checks, and the operator starts them from the page', async () => {
  const res = await fetch(new URL('/api/lessons/checks', lab.url), {
    method: 'POST',
    headers: { Authorization: `Bearer ${TOKEN}`, 'Content-Type': 'application/json' },
    body: JSON.stringify({ lessons: ['per-item-sync', 'replay-copies'], seconds: 0.2 }),
  });
  assert.equal(res.status, 202, await res.text());
  const { page, errors, context } = await open('#/lessons');
  const card = (id) => page.locator(`[data-testid="lesson-card"][data-lesson="${id}"]`).getByTestId('lesson-seen');
  await card('per-item-sync').filter({ hasText: /shows here: host syncs per env step [0-9.]+ → [0-9.]+/ })
    .waitFor({ timeout: 120_000 });
  assert.match(await card('replay-copies').textContent(),
    /needs a GPU; measured on an NVIDIA H100 80GB HBM3, 2026-11-28: replay=device no_effect ×1\.01 \(0\.78–1\.23; A\/A noise 0\.84–1\.23, 4 s runs × 3 repeats\); the bytes fall 33×/);
  assert.match(await card('worker-waits').textContent(), /not checked on this machine yet/);
  await page.getByTestId('lesson-checks').filter({ hasText: new RegExp(`2 of ${lessons} lessons checked on `) }).waitFor({ timeout: 20_000 });
  await page.getByTestId('check-lessons').click();
  await page.getByTestId('lesson-checks').filter({ hasText: new RegExp(`checking worker-waits on this machine \\(${lessons - 1} after it\\)`) })
    .waitFor({ timeout: 20_000 });
  assert.ok(await page.getByTestId('check-lessons').isDisabled(), 'one check at a time');
  await card('worker-waits').filter({ hasText: /(shows|did not show) here: / }).waitFor({ timeout: 120_000 });
  await shot(page, 'lesson-checks');
  assert.deepEqual(errors, []);
  await context.close();
});
