// The lab in a browser: launching from the form, a live run, a reload mid-run, comparing
// runs, a viewer without the token, a bad value at its field; a screenshot of each view.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { labAndBrowser, startLab, stopAll, openPage, openForm, screenshot } from './lab.mjs';

let lab;
let browser;
before(async () => ({ lab, browser } = await labAndBrowser()));
after(() => stopAll(browser, lab));

const open = (path, { operator = true, on = lab, watch } = {}) => openPage(browser, on, path, { operator, watch });
const shot = screenshot;

async function setKnob(page, name, value) {
  await openForm(page);
  const input = page.getByTestId('launch-form').locator(`[name="${name}"]`);
  await input.fill(value);
  await input.dispatchEvent('change');
}

test('launch a CartPole run from the form: SPS streams, bottleneck rows appear, it finishes', async () => {
  const { page, errors, context } = await open('#/');
  await shot(page, 'home');
  await setKnob(page, 'envs', '8');
  await setKnob(page, 'total_steps', '1500000');
  await page.getByTestId('launch-button').click();
  await page.waitForURL(/#\/run\/\d+$/);
  const sps = page.getByTestId('sps');
  const seen = new Set();
  await page.getByTestId('run-status').filter({ hasText: 'running' }).waitFor({ timeout: 30_000 });
  const start = Date.now();
  while (Date.now() - start < 60_000) {
    const status = await page.getByTestId('run-status').textContent();
    const text = await sps.textContent();
    if (status === 'running' && text !== '–') seen.add(text);
    if (seen.size >= 3 || status !== 'running') break;
    await page.waitForTimeout(200);
  }
  assert.ok(seen.size >= 2, `steps/s changed while running: ${[...seen]}`);
  await page.getByTestId('bottleneck-row').first().waitFor({ timeout: 30_000 });
  await page.getByTestId('run-status').filter({ hasText: 'finished' }).waitFor({ timeout: 120_000 });
  assert.ok((await page.getByTestId('bottleneck-row').count()) >= 3);
  await page.getByTestId('phase-split').locator('rect').first().waitFor();
  assert.match(await page.getByTestId('counters').textContent(), /host syncs/);
  assert.match(await page.getByTestId('counters').textContent(), /update replays.*update launches/s);
  await shot(page, 'run');
  assert.deepEqual(errors, []);
  await context.close();
});

test('reload in the middle of a run: the history comes back and the stream continues', async () => {
  const id = await lab.launch({ env: 'cartpole', envs: 8, total_steps: 2_000_000, device: 'cpu' });
  const { page, errors, context } = await open(`#/run/${id}`);
  const progress = async () => Number((await page.getByTestId('progress').textContent()).split(' / ')[0]);
  await page.getByTestId('run-status').filter({ hasText: 'running' }).waitFor({ timeout: 30_000 });
  await page.waitForFunction(() => document.querySelector('[data-testid=progress]')?.textContent.includes('/'));
  const before = await progress();
  await page.reload();
  await page.waitForFunction(() => document.querySelector('[data-testid=progress]')?.textContent.includes('/'));
  const replayed = await progress();
  assert.ok(replayed >= before, `after the reload the page has updates up to ${replayed} (had ${before})`);
  await page.waitForFunction(
    (n) => Number(document.querySelector('[data-testid=progress]').textContent.split(' / ')[0]) > n,
    replayed,
    { timeout: 60_000 },
  );
  await page.getByTestId('run-status').filter({ hasText: 'finished' }).waitFor({ timeout: 120_000 });
  const run = await (await fetch(new URL(`/api/runs/${id}`, lab.url))).json();
  const [done, all] = (await page.getByTestId('progress').textContent()).split(' / ').map(Number);
  assert.equal(done, all, 'every update shown');
  assert.equal(run.status, 'finished');
  assert.deepEqual(errors, []);
  await context.close();
});

test('compare two finished runs with different backends: ratios are shown', async () => {
  const a = await lab.launch({ env: 'cartpole', envs: 8, total_steps: 200_000, device: 'cpu', backend: 'vectorized' });
  await lab.waitFor(a, ['finished']);
  const b = await lab.launch({ env: 'cartpole', envs: 8, total_steps: 200_000, device: 'cpu', backend: 'threads', workers: 2 });
  await lab.waitFor(b, ['finished']);
  const { page, errors, context } = await open('#/');
  for (const id of [a, b]) {
    await page.locator(`[data-testid=history-row][data-run="${id}"] [data-testid=pick]`).check();
  }
  await page.getByTestId('compare-button').click();
  await page.waitForURL(new RegExp(`#/compare/${a},${b}$`));
  const view = page.getByTestId('compare-view');
  await view.getByTestId('compare-row').first().waitFor({ timeout: 20_000 });
  assert.match(await view.textContent(), /backend.*vectorized.*threads/s, 'what differs is named');
  const ratios = await view.getByTestId('ratio').allTextContents();
  assert.ok(ratios.length >= 3 && ratios.some((r) => /^\d+\.\d\d×$/.test(r)), `ratios: ${ratios}`);
  await view.getByTestId('compare-phases').locator('rect').first().waitFor();
  await shot(page, 'compare');
  assert.deepEqual(errors, []);
  await context.close();
});

test('a viewer cannot launch; a bad value shows the server message at its field', async () => {
  const viewer = await open('#/', { operator: false });
  await openForm(viewer.page);
  assert.ok(await viewer.page.getByTestId('launch-button').isDisabled(), 'the button is disabled for a viewer');
  await viewer.page.getByTestId('launch-hint').waitFor();
  await viewer.page.getByTestId('system-panel').getByTestId('torch-version').waitFor({ timeout: 20_000 });
  await shot(viewer.page, 'viewer');
  await viewer.context.close();

  const { page, errors, context } = await open('#/');
  await setKnob(page, 'envs', '0');
  await page.getByTestId('launch-button').click();
  const message = page.getByTestId('error-envs');
  await message.filter({ hasText: /between 1 and/ }).waitFor({ timeout: 10_000 });
  assert.match(await message.textContent(), /got 0/, 'the server message, at the field it names');
  assert.match(page.url(), /#\/$/, 'nothing launched');
  await shot(page, 'launch-error');
  assert.deepEqual(errors, []);
  await context.close();
});

test('a recommendation launches the recommended variant of the run', async () => {
  const id = await lab.launch({ env: 'cartpole', envs: 8, total_steps: 100_000, device: 'cpu', inference: 'eager' });
  await lab.waitFor(id, ['finished']);
  const { page, errors, context } = await open(`#/run/${id}`);
  const rec = page.getByTestId('recommendation').filter({ hasText: '--inference fused' });
  await rec.waitFor({ timeout: 20_000 });
  await rec.getByTestId('recommendation-launch').click();
  await page.waitForURL((url) => /#\/run\/\d+$/.test(url.hash) && !url.hash.endsWith(`/run/${id}`));
  const variant = Number(page.url().match(/#\/run\/(\d+)$/)[1]);
  const run = await (await fetch(new URL(`/api/runs/${variant}`, lab.url))).json();
  assert.equal(run.spec.exec.inference, 'fused', 'the recommended knob is turned');
  assert.equal(run.spec.envs, 8, 'the rest of the spec is kept');
  await lab.waitFor(variant, ['finished']);
  assert.deepEqual(errors, []);
  await context.close();
});

test('the proof env shows its goal list, the successors and the choice', async () => {
  const id = await lab.launch({ env: 'proof', kb: 'family:people=30,seed=3', envs: 8, total_steps: 2_000_000, device: 'cpu' });
  const { page, errors, context } = await open(`#/run/${id}`);
  const proof = page.getByTestId('rollout-proof');
  await proof.locator('li.chosen').first().waitFor({ timeout: 60_000 });
  assert.match(await proof.textContent(), /goals \[/);
  await shot(page, 'run-proof');
  await page.getByTestId('stop-button').click();
  await page.getByTestId('run-status').filter({ hasText: 'stopped' }).waitFor({ timeout: 60_000 });
  assert.deepEqual(errors, []);
  await context.close();
});

/** Stops the run on `page`, goes home and opens the launch form with workload `env`. */
async function stopThenFormFor(page, env) {
  await page.getByTestId('stop-button').click();
  await page.getByTestId('run-status').filter({ hasText: 'stopped' }).waitFor({ timeout: 60_000 });
  await page.evaluate(() => { location.hash = '#/'; });
  await openForm(page);
  const form = page.getByTestId('launch-form');
  await form.locator('[name="env"]').selectOption(env);
  return form;
}

test('a Gymnasium env runs from the lab: env 0 as it draws itself, its observation vectors and actions show; the form offers its id', async () => {
  const id = await lab.launch({ env: 'gym', gym_id: 'Acrobot-v1', envs: 4, steps: 32, total_steps: 50_000_000, device: 'cpu' });
  const { page, errors, context } = await open(`#/run/${id}`);
  const gym = page.getByTestId('rollout-gym');
  await gym.getByTestId('gym-env').nth(3).waitFor({ timeout: 60_000 });
  assert.match(await gym.textContent(), /Acrobot-v1/);
  // Acrobot observes six floats per env.
  const values = (await gym.getByTestId('gym-env').first().locator('code').textContent()).trim().split(/\s+/);
  assert.equal(values.length, 6, values.join(' '));
  // Env 0's picture: a PNG the browser decodes, Acrobot's 500 × 500 shrunk to 167 × 167.
  const picture = gym.getByTestId('gym-picture');
  await picture.waitFor({ timeout: 60_000 });
  await page.waitForFunction(() => document.querySelector('[data-testid="gym-picture"]')?.complete);
  const size = await picture.evaluate((img) => [img.naturalWidth, img.naturalHeight]);
  assert.deepEqual(size, [167, 167]);
  assert.match(await gym.textContent(), /env 0 at batch step \d+, drawn in [\d.]+ ms/);
  await shot(page, 'run-gym');
  const form = await stopThenFormFor(page, 'gym');
  await form.locator('[name="gym_id"]').waitFor({ timeout: 10_000 });
  assert.equal(await form.locator('[name="gym_id"]').inputValue(), 'CartPole-v1');
  assert.deepEqual(errors, []);
  await context.close();
});

test('an Atari env runs from the lab: env 0 as the CNN sees it, its 4 stacked 84×84 frames painted, pixel for pixel the bytes the lab sent', async () => {
  const id = await lab.launch({ env: 'gym', gym_id: 'ALE/Breakout-v5', envs: 2, steps: 32, total_steps: 50_000_000, device: 'cpu' });
  // Every rollout frame the page gets over its socket, from its first.
  const frames = [];
  const watch = (page) => page.on('websocket', (ws) => ws.on('framereceived', ({ payload }) => {
    let parsed;
    try { parsed = JSON.parse(payload); } catch { return; }
    for (const e of Array.isArray(parsed) ? parsed : [parsed]) if (e.kind === 'rollout') frames.push(e.frame);
  }));
  const { page, errors, context } = await open(`#/run/${id}`, { watch });
  const gym = page.getByTestId('rollout-gym');
  await gym.getByTestId('gym-seen').nth(3).waitFor({ timeout: 90_000 });
  assert.equal(await gym.getByTestId('gym-seen').count(), 4);
  assert.match(await gym.textContent(), /env 0 as the policy sees it: 4 channels of 84×84/);
  // The newest frame is painted: a grey screen with Breakout's walls and bricks, not blank.
  const lit = await gym.getByTestId('gym-seen').nth(3).evaluate((c) => {
    const data = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
    let sum = 0;
    for (let i = 0; i < data.length; i += 4) sum += data[i];
    return [c.width, c.height, sum];
  });
  assert.deepEqual(lit.slice(0, 2), [84, 84]);
  assert.ok(lit[2] > 0, `painted: ${lit}`);
  await shot(page, 'run-gym-atari');
  await page.getByTestId('stop-button').click();
  await page.getByTestId('run-status').filter({ hasText: 'stopped' }).waitFor({ timeout: 60_000 });
  // The canvases hold the bytes the lab sent, pixel for pixel: the run stopped, the last
  // frame the socket brought is what is painted.
  await page.waitForTimeout(500);
  assert.ok(frames.length > 0, 'the socket brought frames');
  const { planes, width, height } = frames[frames.length - 1].seen;
  assert.deepEqual([width, height, planes.length], [84, 84, 4]);
  for (let k = 0; k < 4; k += 1) {
    const painted = await gym.getByTestId('gym-seen').nth(k).evaluate((c) => {
      const data = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
      return Array.from(data.filter((_, i) => i % 4 === 0));
    });
    assert.deepEqual(painted, Array.from(Buffer.from(planes[k], 'base64')), `plane ${k}`);
  }
  assert.deepEqual(errors, []);
  await context.close();
});

test('a Box-action env runs from the lab: the sampled actions, the action chart and the normalizers show; the form takes make() keywords', async () => {
  const id = await lab.launch({ env: 'gym', gym_id: 'Pendulum-v1', envs: 2, steps: 64, total_steps: 50_000_000, device: 'cpu' });
  const { page, errors, context } = await open(`#/run/${id}`);
  const gym = page.getByTestId('rollout-gym');
  await gym.getByTestId('gym-env').nth(1).waitFor({ timeout: 60_000 });
  // Pendulum acts with one real: each env's row ends with it, signed, as the policy sampled it.
  assert.match((await gym.getByTestId('gym-env').first().textContent()).trim(), /action [+-]\d+\.\d{3}$/);
  // Its first update's figures: the action's mean, spread and log-std, the normalizers' state.
  await page.getByTestId('chart-action').waitFor({ timeout: 60_000 });
  await page.getByTestId('chart-norm').waitFor({ timeout: 60_000 });
  await shot(page, 'run-gym-box');
  const form = await stopThenFormFor(page, 'gym');
  await form.locator('[name="gym_kwargs"]').waitFor({ timeout: 10_000 });
  assert.equal(await form.locator('[name="gym_kwargs"]').inputValue(), '{}');
  assert.equal(await form.locator('[name="obs_norm"]').inputValue(), 'auto');
  assert.deepEqual(errors, []);
  await context.close();
});

test('a Dict env runs from the lab: env 0\'s observation leaf by leaf, the goal index listed, the noise floats, the image painted', async () => {
  const id = await lab.launch({ env: 'gym', gym_id: 'dict_envs:GoalDict', envs: 4, steps: 32, total_steps: 50_000_000, device: 'cpu' });
  const { page, errors, context } = await open(`#/run/${id}`);
  const gym = page.getByTestId('rollout-gym');
  await gym.getByTestId('gym-leaf').nth(2).waitFor({ timeout: 60_000 });
  const leaves = gym.getByTestId('gym-leaf');
  assert.equal(await leaves.count(), 3);
  assert.match((await leaves.nth(0).textContent()).trim(), /^goal\s*[0-3] of 4$/);
  const noise = (await leaves.nth(1).locator('code').nth(1).textContent()).trim().split(/\s+/);
  assert.equal(noise.length, 3, noise.join(' '));
  const view = leaves.nth(2).getByTestId('gym-seen');
  await view.waitFor({ timeout: 10_000 });
  const painted = await view.evaluate((c) => {
    const data = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
    let sum = 0;
    for (let i = 0; i < data.length; i += 4) sum += data[i];
    return [c.width, c.height, sum];
  });
  assert.deepEqual(painted.slice(0, 2), [6, 6]);
  assert.ok(painted[2] > 0, `painted: ${painted}`);
  await shot(page, 'run-gym-dict');
  await page.getByTestId('stop-button').click();
  await page.getByTestId('run-status').filter({ hasText: 'stopped' }).waitFor({ timeout: 60_000 });
  assert.deepEqual(errors, []);
  await context.close();
});

test('a recurrent run shows env 0\'s state norm over its episode; the launch form offers --rnn', async () => {
  const id = await lab.launch({
    env: 'gym', gym_id: 'hotlab/CueRecall-v0', rnn: 'lstm', rnn_width: 16, envs: 4, steps: 32, total_steps: 50_000_000, device: 'cpu',
  });
  const { page, errors, context } = await open(`#/run/${id}`);
  const memory = page.getByTestId('memory');
  await memory.getByTestId('chart-memory').waitFor({ timeout: 60_000 });
  // The cue task's episodes are six steps: the norm is shown for the steps of env 0's so far.
  assert.match(await memory.textContent(), /[1-6] steps into env 0's episode/);
  await shot(page, 'run-recurrent');
  const form = await stopThenFormFor(page, 'gym');
  const rnn = form.locator('[name="rnn"]');
  await rnn.waitFor({ timeout: 10_000 });
  assert.equal(await rnn.inputValue(), 'none');
  const offered = await rnn.locator('option').evaluateAll((os) => os.map((o) => o.value));
  assert.deepEqual(offered, ['none', 'lstm', 'gru']);
  assert.deepEqual(errors, []);
  await context.close();
});

test('the morpho env shows each host with its slots, its accuracy, its episode as a timeline and the 8 heads; the form shows its fields', async () => {
  const id = await lab.launch({
    env: 'morpho', envs: 4, steps: 4, minibatches: 2, tasks: 2, task_images: 64, host_width: 4, host_epochs: 3,
    total_steps: 2_000_000, device: 'cpu',
  });
  const { page, errors, context } = await open(`#/run/${id}`);
  const morpho = page.getByTestId('rollout-morpho');
  await morpho.getByTestId('morpho-host').first().waitFor({ timeout: 90_000 });
  assert.equal(await morpho.getByTestId('morpho-host').first().getByTestId('morpho-slot').count(), 3, 'three slots');
  assert.equal(await morpho.getByTestId('morpho-heads').locator('tr').count(), 8, 'eight heads');
  assert.match(await morpho.textContent(), /validation \d+\.\d %/);
  assert.match(await morpho.textContent(), /credit [+-]\d\.\d{3}/);
  // The episode so far: a row per slot with its α curve, a cell per slot and epoch seen,
  // each cell coloured by its stage and naming its credit.
  const timeline = morpho.getByTestId('morpho-host').first().getByTestId('morpho-timeline');
  assert.equal(await timeline.locator('polyline.alpha').count(), 3, 'an α curve per slot');
  const cells = timeline.locator('rect');
  assert.ok((await cells.count()) >= 3 && (await cells.count()) % 3 === 0, `${await cells.count()} cells`);
  assert.match(await cells.first().locator('title').textContent(), /^epoch \d+ · slot 0 · \w+.* · α \d\.\d\d · credit [+-]\d\.\d{3}$/);
  assert.match(await cells.first().getAttribute('class'), /^stage-(dormant|germinated|training|blending|holding|fossilized|cooldown)$/);
  await shot(page, 'run-morpho');
  await page.getByTestId('stop-button').click();
  await page.getByTestId('run-status').filter({ hasText: 'stopped' }).waitFor({ timeout: 90_000 });
  await page.evaluate(() => { location.hash = '#/'; });
  await openForm(page);
  const form = page.getByTestId('launch-form');
  await form.locator('[name="env"]').selectOption('morpho');
  await form.locator('[name="host_width"]').waitFor({ timeout: 10_000 });
  assert.equal(await form.locator('[name="slots"]').inputValue(), 'dynamic');
  assert.deepEqual(errors, []);
  await context.close();
});

test('the dreamer shows the frame it sees, its reconstruction and frames it imagines, and its losses fall', async () => {
  const id = await lab.launch({
    env: 'dreamer', envs: 2, steps: 32, prefill: 64, batch_size: 8, seq_len: 8, train_ratio: 16,
    total_steps: 2_000_000, device: 'cpu',
  });
  const { page, errors, context } = await open(`#/run/${id}`);
  const dreamer = page.getByTestId('rollout-dreamer');
  // Once the actor acts on the model's state: seen, reconstructed and three imagined frames.
  await dreamer.getByTestId('dreamer-frame').nth(4).waitFor({ timeout: 90_000 });
  assert.match(await dreamer.textContent(), /seen.*reconstructed.*imagined \+5.*imagined \+10.*imagined \+15/);
  const lit = await dreamer.locator('canvas').first().evaluate((c) => {
    const px = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
    let n = 0;
    for (let i = 0; i < px.length; i += 4) if (px[i] > 100) n += 1;
    return n;
  });
  assert.ok(lit > 10, `the seen frame shows the cart and pole (${lit} bright pixels)`);
  await page.getByTestId('chart-world').waitFor({ timeout: 30_000 });
  // The fall, from the run's stored metrics: after the prefill, each iteration trains 16
  // steps; by the fourth that trains, the frames' loss is under half its first value.
  const world = async () => {
    const events = await (await fetch(new URL(`/api/runs/${id}/metrics`, lab.url))).json();
    return events.map((e) => e.metrics?.losses?.world ?? e.metrics?.world).filter((w) => w?.image > 0);
  };
  const start = Date.now();
  let terms = await world();
  while (terms.length < 4) {
    assert.ok(Date.now() - start < 120_000, `world-model losses: ${JSON.stringify(terms)}`);
    await new Promise((r) => setTimeout(r, 500));
    terms = await world();
  }
  assert.ok(terms.at(-1).image < terms[0].image / 2, `the frames' loss falls: ${terms.map((w) => w.image)}`);
  await shot(page, 'run-dreamer');
  await page.getByTestId('stop-button').click();
  await page.getByTestId('run-status').filter({ hasText: 'stopped' }).waitFor({ timeout: 90_000 });
  assert.deepEqual(errors, []);
  await context.close();
});

test('the header, the counters and the stream agree on env steps, for every workload', async () => {
  const specs = {
    cartpole: { env: 'cartpole', envs: 4, steps: 128, total_steps: 20_480, device: 'cpu' },
    proof: { env: 'proof', kb: 'family:people=12,seed=1', envs: 8, steps: 32, total_steps: 4096, device: 'cpu' },
    morpho: {
      env: 'morpho', envs: 4, steps: 4, minibatches: 2, tasks: 1, task_images: 64, host_width: 2, host_epochs: 2,
      total_steps: 96, device: 'cpu',
    },
    dreamer: {
      env: 'dreamer', envs: 2, steps: 32, prefill: 64, batch_size: 8, seq_len: 8, train_ratio: 16,
      total_steps: 512, device: 'cpu',
    },
    gym: { env: 'gym', gym_id: 'Acrobot-v1', backend: 'subprocess', workers: 2, envs: 4, steps: 32, total_steps: 1024, device: 'cpu' },
  };
  for (const [workload, spec] of Object.entries(specs)) {
    const id = await lab.launch(spec);
    // Watched live from the start: frames stream beside the metrics and profiles.
    const { page, errors, context } = await open(`#/run/${id}`);
    await page.getByTestId('run-status').filter({ hasText: 'finished' }).waitFor({ timeout: 120_000 });
    const events = await (await fetch(new URL(`/api/runs/${id}/events?limit=10000`, lab.url))).json();
    const last = events.filter((e) => e.kind === 'metrics').at(-1).metrics.global_step;
    const profiled = events.filter((e) => e.kind === 'profile').reduce((n, e) => n + e.profile.counters.env_steps, 0);
    assert.equal(profiled, last, `${workload}: the profiles' env steps and the last metrics'`);
    // The page's figures (rounded on screen, exact in their titles) against the server's
    // exact global_step: the wait fails the test when they never agree.
    const header = page.getByTestId('env-steps');
    const counted = page.getByTestId('counter-env-steps').locator('td').nth(1);
    await page.waitForFunction(
      ([a, b, want]) => a.title === want && b.title === want,
      [await header.elementHandle(), await counted.elementHandle(), String(last)],
      { timeout: 10_000 },
    ).catch(async () => {
      assert.fail(`${workload}: the page shows ${await header.getAttribute('title')} (header) and `
        + `${await counted.getAttribute('title')} (counters); the server's global_step is ${last}`);
    });
    assert.equal(await counted.textContent(), await header.textContent(), `${workload}: counters and header, rounded`);
    assert.deepEqual(errors, [], workload);
    await context.close();
  }
});

test('after a server crash the page shows a banner, reconnects by itself and shows the outcome', async () => {
  const first = await startLab();
  const id = await first.launch({ env: 'cartpole', envs: 8, total_steps: 50_000_000, device: 'cpu' });
  const { page, errors, context } = await open(`#/run/${id}`, { on: first });
  await page.getByTestId('run-status').filter({ hasText: 'running' }).waitFor({ timeout: 30_000 });
  // Some updates first (the run's process takes a moment to start), and past the store's
  // 250 ms commit, so that there is something to show after the crash.
  await page.waitForFunction(() => document.querySelector('[data-testid=sps]')?.textContent !== '–', null, { timeout: 30_000 });
  await page.waitForTimeout(600);
  first.kill();
  await page.getByTestId('connection-banner').waitFor({ timeout: 20_000 });
  await shot(page, 'disconnected');
  const again = await startLab({ port: first.port, data: first.data });
  try {
    await page.getByTestId('run-status').filter({ hasText: 'interrupted' }).waitFor({ timeout: 30_000 });
    await page.getByTestId('connection-banner').waitFor({ state: 'detached', timeout: 10_000 });
    assert.notEqual(await page.getByTestId('sps').textContent(), '–', 'the metrics up to the crash are shown');
    assert.deepEqual(errors.filter((e) => !/WebSocket/.test(e)), []);
  } finally {
    await context.close();
    again.stop();
  }
});
