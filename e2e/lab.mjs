// Helpers for the browser tests: a real `hotlab serve` on a free port with a temporary
// data dir, and Debian's Chromium driven by playwright-core (never a downloaded browser).
import { spawn } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, dirname, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { chromium } from 'playwright-core';

const repo = resolve(dirname(fileURLToPath(import.meta.url)), '..');

/** The operator token every test server gets. */
export const TOKEN = 'e2e-operator-token';

/** Where screenshots go (a test artifact, not committed). */
export const ARTIFACTS = join(repo, 'target', 'e2e-artifacts');

const bin = process.env.HOTLAB_BIN ?? join(repo, 'target/release/hotlab');

/** The worker token every test server gets. */
export const WORKER_TOKEN = 'e2e-worker-token-123';

/** Starts `hotlab serve` (on `port`, 0 = a free one, with the data dir `data`, else a
 * fresh temporary one, and `args` besides; `wrap`: a command it runs under, the lab's own
 * command line appended) and resolves once it prints its URL. */
export async function startLab({ port = 0, data: given, args: extra = [], wrap = [] } = {}) {
  const data = given ?? mkdtempSync(join(tmpdir(), 'hotlab-e2e-'));
  const args = ['serve', '--host', '127.0.0.1', '--port', String(port), '--token', TOKEN,
    '--data-dir', join(data, 'hotlab-data'), '--static-dir', join(repo, 'static'),
    '--worker-token', WORKER_TOKEN, ...extra];
  // The tests' own Gymnasium envs (a Dict observation's) importable by the runs this lab
  // starts.
  const PYTHONPATH = [join(repo, 'tests', 'fixtures', 'structured'), process.env.PYTHONPATH].filter(Boolean).join(':');
  const [command, ...before] = [...wrap, bin];
  const child = spawn(command, [...before, ...args], {
    cwd: data,
    stdio: ['ignore', 'pipe', 'pipe'],
    env: { ...process.env, PYTHONPATH },
  });
  let log = '';
  const url = await new Promise((ok, fail) => {
    const timer = setTimeout(() => fail(new Error(`hotlab serve printed no URL in 30 s:\n${log}`)), 30_000);
    const onData = (chunk) => {
      log += chunk;
      const m = log.match(/http:\/\/[0-9.]+:[0-9]+\//);
      if (m) {
        clearTimeout(timer);
        ok(m[0]);
      }
    };
    child.stdout.on('data', onData);
    child.stderr.on('data', (c) => { log += c; });
    child.on('exit', (code) => fail(new Error(`hotlab serve exited with ${code}:\n${log}`)));
  });
  return {
    url,
    data,
    pid: child.pid,
    port: Number(new URL(url).port),
    /** POSTs a run spec with the token; the new run's id. */
    async launch(spec) {
      const res = await fetch(new URL('/api/runs', url), {
        method: 'POST',
        headers: { Authorization: `Bearer ${TOKEN}`, 'Content-Type': 'application/json' },
        body: JSON.stringify(spec),
      });
      if (res.status !== 201) throw new Error(`launch: ${res.status} ${await res.text()}`);
      return (await res.json()).id;
    },
    /** Waits until run `id` has one of `statuses`. */
    async waitFor(id, statuses, timeoutMs = 120_000) {
      const start = Date.now();
      for (;;) {
        const run = await (await fetch(new URL(`/api/runs/${id}`, url))).json();
        if (statuses.includes(run.status)) return run;
        if (Date.now() - start > timeoutMs) throw new Error(`run ${id} still ${run.status}`);
        await new Promise((r) => setTimeout(r, 100));
      }
    },
    /** Kills the server as a crash would, keeping its data dir. */
    kill() {
      child.kill('SIGKILL');
    },
    stop() {
      child.kill('SIGTERM');
      rmSync(data, { recursive: true, force: true });
    },
  };
}

/** Starts `hotlab worker` named `name` for `lab`; `stop()` ends it. */
export function startWorker(lab, name) {
  const data = mkdtempSync(join(tmpdir(), 'hotlab-e2e-worker-'));
  const child = spawn(bin, ['worker', '--lab', lab.url, '--worker-token', WORKER_TOKEN, '--name', name,
    '--data-dir', data], { stdio: ['ignore', 'ignore', 'pipe'] });
  let log = '';
  child.stderr.on('data', (c) => { log += c; });
  return {
    log: () => log,
    stop() {
      child.kill('SIGKILL');
      rmSync(data, { recursive: true, force: true });
    },
  };
}

/** Headless Debian Chromium with the flags this machine needs. playwright gives every
 * launch a fresh temporary profile (a fresh user-data-dir). With `webgpu`, WebGPU is on
 * (SwiftShader, Chromium's software GPU); without it the page has no `navigator.gpu`. */
export async function launchBrowser(extraArgs = [], { webgpu = false } = {}) {
  return chromium.launch({
    executablePath: process.env.CHROMIUM ?? '/usr/bin/chromium',
    headless: true,
    args: [
      '--no-sandbox', '--disable-quic', '--no-first-run',
      '--disable-background-networking', '--disable-component-update', '--disable-sync',
      ...(webgpu ? ['--enable-unsafe-webgpu'] : ['--disable-gpu']),
      ...extraArgs,
    ],
  });
}

/** A page of `lab` as the operator (the token once in the URL sets the cookie) or as a
 * viewer, with the page's errors collected: uncaught exceptions and console errors (a Rust
 * panic is logged by console_error_panic_hook before the wasm trap). The browser also logs
 * each 4xx answer; those are expected where a test provokes one, so they are not errors. */
export async function openPage(browser, lab, path, { operator = true, watch } = {}) {
  const context = await browser.newContext({ viewport: { width: 1280, height: 720 } });
  const page = await context.newPage();
  // What the caller listens to from the first request on (the page's socket, say).
  if (watch) watch(page);
  const errors = [];
  page.on('pageerror', (e) => errors.push(String(e)));
  page.on('console', (m) => {
    if (m.type() === 'error' && !m.text().startsWith('Failed to load resource')) errors.push(m.text());
  });
  await page.goto(new URL(operator ? `/?token=${TOKEN}${path}` : `/${path}`, lab.url).href);
  await page.getByTestId('role').filter({ hasText: operator ? 'operator' : 'viewer' }).waitFor({ timeout: 20_000 });
  return { page, errors, context };
}

/** Opens the home's launch form (collapsed under the preset picked) if it is closed. */
export async function openForm(page) {
  const details = page.getByTestId('launch-details');
  await details.waitFor({ state: 'attached', timeout: 20_000 });
  if (!(await details.evaluate((d) => d.open))) await page.getByTestId('launch-summary').click();
  await page.getByTestId('launch-form').locator('[name="envs"]').waitFor({ timeout: 10_000 });
}

/** A lab (`startLab`'s options) and a browser for a test file, the artifacts folder made. */
export async function labAndBrowser(options) {
  mkdirSync(ARTIFACTS, { recursive: true });
  const lab = await startLab(options);
  return { lab, browser: await launchBrowser() };
}

/** Closes what a test file started: browsers first, then workers and labs (`stop`). */
export async function stopAll(...things) {
  for (const t of things) {
    if (t?.close) await t.close();
    else t?.stop();
  }
}

/** A full-page screenshot into the artifacts folder. */
export const screenshot = (page, name) => page.screenshot({ path: join(ARTIFACTS, `${name}.png`), fullPage: true });
