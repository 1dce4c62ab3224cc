// Helpers for the browser tests: a real `hotlab serve` on a free port with a temporary
// data dir, and Debian's Chromium driven by playwright-core (never a downloaded browser).
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, dirname, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { chromium } from 'playwright-core';

const repo = resolve(dirname(fileURLToPath(import.meta.url)), '..');

/** Starts `hotlab serve --port 0` and resolves with { url, stop } once it prints its URL. */
export async function startLab() {
  const bin = process.env.HOTLAB_BIN ?? join(repo, 'target/release/hotlab');
  const data = mkdtempSync(join(tmpdir(), 'hotlab-e2e-'));
  const child = spawn(bin, ['serve', '--host', '127.0.0.1', '--port', '0', '--static-dir', join(repo, 'static')], {
    cwd: data,
    stdio: ['ignore', 'pipe', 'pipe'],
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
    stop() {
      child.kill('SIGTERM');
      rmSync(data, { recursive: true, force: true });
    },
  };
}

/** Headless Debian Chromium with the flags this machine needs. playwright gives every
 * launch a fresh temporary profile (a fresh user-data-dir). */
export async function launchBrowser(extraArgs = []) {
  return chromium.launch({
    executablePath: process.env.CHROMIUM ?? '/usr/bin/chromium',
    headless: true,
    args: [
      '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
      '--disable-background-networking', '--disable-component-update', '--disable-sync',
      ...extraArgs,
    ],
  });
}
