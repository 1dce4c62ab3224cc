// A run store that cannot write: the lab's data dir on a small disk of its own (a tmpfs in a
// mount namespace of the lab's alone, as tests/faults.rs makes it), filled while a run
// writes. The banner shows over the run's page, saying why, and goes once the disk has room
// again and the store writes.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { closeSync, mkdtempSync, openSync, rmSync, writeSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { labAndBrowser, stopAll, openPage, screenshot } from './lab.mjs';

let lab;
let browser;
let dir;
before(async () => {
  dir = mkdtempSync(join(tmpdir(), 'hotlab-e2e-disk-'));
  const user = process.getuid() === 0 ? [] : ['--user', '--map-root-user'];
  const mount = 'mount -t tmpfs -o size=8m hotlab-e2e "$1" && shift && exec "$@"';
  const wrap = ['unshare', ...user, '--mount', '--propagation', 'private', 'sh', '-c', mount, 'sh', dir];
  ({ lab, browser } = await labAndBrowser({ data: dir, wrap }));
});
after(() => stopAll(browser, lab));

/** A file on the lab's small disk, as this process reaches it. */
const onDisk = (name) => `/proc/${lab.pid}/root${dir}/${name}`;

/** Fills the small disk with a file of its own, to the last byte it takes. */
function fill() {
  const fd = openSync(onDisk('filler'), 'w');
  const chunk = Buffer.alloc(64 << 10);
  try {
    for (;;) writeSync(fd, chunk);
  } catch (e) {
    assert.equal(e.code, 'ENOSPC', `filling the disk: ${e}`);
  } finally {
    closeSync(fd);
  }
}

test('a full disk under the store shows its banner over the page, and it goes when the store writes again', async () => {
  const id = await lab.launch({ env: 'cartpole', envs: 8, total_steps: 50_000_000, device: 'cpu' });
  const { page, errors, context } = await openPage(browser, lab, `#/run/${id}`);
  await page.getByTestId('run-status').filter({ hasText: 'running' }).waitFor({ timeout: 30_000 });
  assert.equal(await page.getByTestId('store-banner').count(), 0, 'no banner while the store writes');
  fill();
  const banner = page.getByTestId('store-banner');
  await banner.waitFor({ timeout: 30_000 });
  assert.match(await banner.textContent(), /^The run store cannot write: .*the disk under the data dir .* is full/);
  await page.getByTestId('run-status').filter({ hasText: 'failed' }).waitFor({ timeout: 30_000 });
  await screenshot(page, 'store-failing');
  rmSync(onDisk('filler'));
  await banner.waitFor({ state: 'detached', timeout: 30_000 });
  assert.deepEqual(errors, []);
  await context.close();
});
