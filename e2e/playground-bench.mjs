// Steps/s of the playground's two paths in headless Chromium (WebGPU on SwiftShader, and
// wasm on the CPU) at 1, 16, 256, 4096, 65536 and 1048576 envs: the page's own sweep.
//
//   node e2e/playground-bench.mjs [--trained] [--json]
//
// Starts a `hotlab serve` of its own (target/release/hotlab, or HOTLAB_BIN). The sweep
// runs the random policy, or with --trained the actor of a CartPole run that it trains
// first (cleanrl preset, about 5 s).
import { startLab, launchBrowser } from './lab.mjs';

const args = process.argv.slice(2);
const json = args.includes('--json');
const trained = args.includes('--trained');
if (args.some((a) => !['--json', '--trained'].includes(a))) {
  console.error('usage: node e2e/playground-bench.mjs [--trained] [--json]');
  process.exit(2);
}

const lab = await startLab();
const browser = await launchBrowser([], { webgpu: true });
try {
  let run = null;
  if (trained) {
    run = await lab.launch({ env: 'cartpole', device: 'cpu', seed: 1 });
    await lab.waitFor(run, ['finished'], 600_000);
  }
  const page = await browser.newPage({ viewport: { width: 1280, height: 900 } });
  await page.goto(new URL('/playground', lab.url).href);
  await page.waitForFunction(() => document.querySelector('[data-testid=pg-backend]')?.textContent === 'webgpu', null, { timeout: 60_000 });
  if (run !== null) await page.getByTestId('pg-policy').selectOption(String(run));
  const adapter = await page.getByTestId('pg-adapter').textContent();
  await page.getByTestId('pg-sweep').click();
  await page.waitForFunction(() => document.querySelector('[data-testid=pg-sweep-status]')?.textContent !== '', null, { timeout: 30_000 });
  await page.waitForFunction(() => document.querySelector('[data-testid=pg-sweep-status]')?.textContent === '', null, { timeout: 900_000, polling: 1000 });
  const rows = await page.$$eval('[data-testid=pg-measurement]', (trs) => trs.map((tr) => ({
    path: tr.dataset.path, envs: Number(tr.dataset.envs), sps: Number(tr.dataset.sps),
  })));
  const result = { browser: 'headless chromium', adapter, policy: run === null ? 'random' : `run ${run}`, measurements: rows };
  if (json) {
    console.log(JSON.stringify(result));
  } else {
    console.log(adapter);
    for (const r of rows) console.log(`${r.path.padEnd(7)} ${String(r.envs).padStart(8)} envs ${String(r.sps).padStart(12)} steps/s`);
  }
} finally {
  await browser.close();
  lab.stop();
}
