// The disk stage never leaks: a loader's pack file goes with its process however the process dies,
// SIGKILL and SIGHUP included (nothing runs at a SIGKILL, so only a file without a name can pass).
// Each case runs a child that builds a streaming loader with reader workers and a disk stage in a
// fresh directory, stages every sample, reports, and waits to be killed.

import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { describe, test } from 'node:test';
import { CHILD_MS, TEST_MS } from './fixtures.js';

const index = new URL('../src/index.ts', import.meta.url).href;
const scripted = new URL('./fixtures/scripted-source.ts', import.meta.url).href;

interface Staged {
  staged: number;
  fromDisk: number;
  workers: number;
}

/** Start the child; resolve once it reports what it staged, with a way to kill it and await its end. */
function stagingChild(dir: string): Promise<{ report: Staged; kill: (signal: NodeJS.Signals) => Promise<NodeJS.Signals | null> }> {
  const code = [
    `const { DataLoader, sources } = await import(${JSON.stringify(index)});`,
    `const loader = await DataLoader.create(sources.module(${JSON.stringify(scripted)}, 'openScripted', { n: 64 }),`,
    `  { batchSize: 8, mode: 'streaming', workers: 2, ramMaxUsage: 0, diskStage: { gigabytes: 0.01, dir: ${JSON.stringify(dir)} } });`,
    `for await (const b of loader.epoch(0)) void b;`,
    `for await (const b of loader.epoch(1)) void b;`,
    `const s = loader.stats().epochs;`,
    `console.log(JSON.stringify({ staged: s[1].diskStagedBytes, fromDisk: s[1].rowsFromDisk, workers: loader.stats().workers }));`,
    `setInterval(() => {}, 1000);`,
  ].join('\n');
  const proc = spawn(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', code], { stdio: ['ignore', 'pipe', 'pipe'], timeout: CHILD_MS });
  const ended = new Promise<NodeJS.Signals | null>((resolve) => proc.once('close', (_status, signal) => resolve(signal)));
  let stdout = '';
  let stderr = '';
  proc.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
  return new Promise((resolve, reject) => {
    proc.once('error', reject);
    proc.stdout.on('data', (d: Buffer) => {
      stdout += d.toString();
      if (!stdout.includes('\n')) return;
      resolve({
        report: JSON.parse(stdout.split('\n')[0]!) as Staged,
        kill: (signal) => (proc.kill(signal), ended),
      });
    });
    void ended.then(() => reject(new Error(`the child ended before reporting (stdout: ${stdout}; stderr: ${stderr})`)));
  });
}

describe('disk stage leaks nothing when its process dies', { concurrency: true }, () => {
  for (const signal of ['SIGKILL', 'SIGHUP'] as const) {
    test(`a loader with a disk stage killed by ${signal} leaves its diskStage.dir empty`, { timeout: TEST_MS }, async () => {
      const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'stoker-leak-test-'));
      try {
        const child = await stagingChild(dir);
        assert.ok(child.report.staged > 0, `the child staged records on disk (${JSON.stringify(child.report)})`);
        assert.ok(child.report.fromDisk > 0, 'and read them back through its reader workers');
        assert.equal(child.report.workers, 2);
        assert.deepEqual(fs.readdirSync(dir), [], 'nothing is named in diskStage.dir even while the loader runs');
        assert.equal(await child.kill(signal), signal);
        assert.deepEqual(fs.readdirSync(dir), []);
      } finally {
        fs.rmSync(dir, { recursive: true, force: true });
      }
    });
  }
});
