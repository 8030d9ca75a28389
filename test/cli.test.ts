// The `stoker` command end to end, in a child process through bin/stoker.js: help everywhere, a demo
// that trains on a tiny budget, bench --json and its HTML report, inspect, and failures — a bad
// command line exits 2, a failed command exits 1, each with one line on stderr and the stack only
// under --verbose. Plus the report renderer in process: well-formed, escaped, every figure shown.

import assert from 'node:assert/strict';
import { execFile, spawn } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { Writable } from 'node:stream';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import { writeShapesDataset } from '../src/cli/demo-data.js';
import { Ui } from '../src/cli/ui.js';
import { newEpochStats } from '../src/pipeline/stats.js';
import { epochFigures, int } from '../src/report/figures.js';
import { type BenchReport, compact, renderBenchReport } from '../src/report/html.js';
import { niceTicks } from '../src/report/svg.js';
import { CHILD_MS, within } from './fixtures.js';

const BIN = fileURLToPath(new URL('../bin/stoker.js', import.meta.url));
const VERSION = (JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8')) as { version: string }).version;

interface Run {
  readonly code: number;
  readonly stdout: string;
  readonly stderr: string;
}

/** Run `stoker …args` in a child process (no TTY, CI set), with a hard time limit. */
function stoker(args: readonly string[], timeoutMs = CHILD_MS): Promise<Run> {
  return new Promise((resolve, reject) => {
    execFile(process.execPath, [BIN, ...args], { timeout: timeoutMs, maxBuffer: 16 << 20, env: { ...process.env, CI: '1', NODE_ENV: 'test' } }, (error, stdout, stderr) => {
      if (error !== null && (error as { killed?: boolean }).killed) reject(new Error(`stoker ${args.join(' ')} did not finish within ${timeoutMs} ms (hang)\n${stderr}`));
      else resolve({ code: error === null ? 0 : Number((error as { code?: unknown }).code), stdout, stderr });
    });
  });
}

/** One line, no stack frames. */
function assertOneLine(stderr: string, what: RegExp): void {
  const lines = stderr.trimEnd().split('\n');
  assert.equal(lines.length, 1, `one line on stderr, got:\n${stderr}`);
  assert.match(lines[0]!, what);
  assert.doesNotMatch(stderr, /^\s+at /m);
}

const VOID = new Set(['meta', 'link', 'br', 'img', 'hr', 'input', 'col', 'wbr', 'source', 'area', 'base', 'embed', 'track']);

/**
 * A strict well-formedness check of the HTML the report writes: a doctype, tags that nest and close
 * (void elements aside; `/>` only inside <svg>), quoted attributes, text with no bare `<` and only
 * known entities. Returns how many times each element occurs.
 */
function checkWellFormed(html: string): Map<string, number> {
  assert.match(html, /^<!DOCTYPE html>\n/i, 'starts with the HTML5 doctype');
  const counts = new Map<string, number>();
  const stack: string[] = [];
  const entity = /&(amp|lt|gt|quot|#39|#\d+|#x[0-9a-f]+);/gi;
  const checkText = (text: string, where: number) => {
    assert.ok(!text.includes('<'), `a bare "<" in text at ${where}`);
    assert.ok(!text.replace(entity, '').includes('&'), `a bare "&" in text at ${where}: ${JSON.stringify(text.slice(0, 60))}`);
  };
  let i = html.indexOf('>') + 1;
  while (i < html.length) {
    const lt = html.indexOf('<', i);
    if (lt < 0) {
      checkText(html.slice(i), i);
      break;
    }
    checkText(html.slice(i, lt), i);
    const m = /^<(\/?)([a-zA-Z][a-zA-Z0-9-]*)((?:\s+[a-zA-Z_:][-a-zA-Z0-9_:.]*(?:="[^"<]*")?)*)\s*(\/?)>/.exec(html.slice(lt, lt + 4000));
    assert.ok(m !== null, `a malformed tag at ${lt}: ${JSON.stringify(html.slice(lt, lt + 80))}`);
    const [whole, closing, rawName, attrs, selfClosing] = m;
    const name = rawName!.toLowerCase();
    for (const a of attrs!.matchAll(/="([^"]*)"/g)) assert.ok(!a[1]!.replace(entity, '').includes('&'), `a bare "&" in an attribute of <${name}>`);
    i = lt + whole.length;
    if (closing === '/') {
      assert.equal(stack.pop(), name, `</${name}> at ${lt} closes the wrong element (open: ${stack.join(' > ')})`);
      continue;
    }
    counts.set(name, (counts.get(name) ?? 0) + 1);
    if (selfClosing === '/') {
      assert.ok(stack.includes('svg') || VOID.has(name), `<${name}/> self-closes outside SVG at ${lt}`);
      continue;
    }
    if (VOID.has(name)) continue;
    if (name === 'style' || name === 'script') {
      const end = html.indexOf(`</${name}>`, i);
      assert.ok(end >= 0, `<${name}> is never closed`);
      i = end + name.length + 3;
      continue;
    }
    stack.push(name);
  }
  assert.deepEqual(stack, [], 'every element is closed');
  assert.equal(counts.get('html'), 1);
  assert.equal(counts.get('head'), 1);
  assert.equal(counts.get('body'), 1);
  return counts;
}

let scratch: string;
before(() => {
  scratch = mkdtempSync(join(tmpdir(), 'stoker-cli-test-'));
});
after(() => rmSync(scratch, { recursive: true, force: true }));

describe('stoker: help and version', () => {
  it('--help on the program and on each command exits 0 and lists what the command takes', async () => {
    const [root, demo, bench, inspect, version, helpDemo, bare] = await Promise.all([
      stoker(['--help']), stoker(['demo', '--help']), stoker(['bench', '--help']), stoker(['inspect', '--help']), stoker(['--version']), stoker(['help', 'demo']), stoker([]),
    ]);
    for (const r of [root, demo, bench, inspect, version, helpDemo]) assert.equal(r.code, 0, r.stderr);
    assert.equal(helpDemo.stdout, demo.stdout, '`stoker help demo` is `stoker demo --help`');
    assert.equal(bare.code, 2, 'no command is a usage error');
    assert.match(bare.stderr, /Usage: stoker/, 'and shows the help on stderr');
    assert.match(root.stdout, /Usage: stoker/);
    for (const c of ['demo', 'bench', 'inspect', 'serve']) assert.match(root.stdout, new RegExp(`^\\s+${c}\\b`, 'm'));
    assert.match(root.stdout, /Exit codes: 0 ok .* 2 bad command line/);
    for (const o of ['--samples', '--epochs', '--device', '--backend', '--json', '--no-progress']) assert.ok(demo.stdout.includes(o), `demo --help lists ${o}`);
    for (const o of ['--scenarios', '--report', '--step-ms', '--json']) assert.ok(bench.stdout.includes(o), `bench --help lists ${o}`);
    assert.match(inspect.stdout, /Usage: stoker inspect \[options\] <path>/);
    assert.equal(version.stdout.trim(), VERSION);
  });
});

describe('stoker: a reader that stops early', () => {
  // NOTE: waits for the child to exit, at most CHILD_MS.
  it('ends quietly with code 0 when its stdout pipe is closed (`stoker --help | head`), as Unix tools do', async () => {
    for (const args of [['--help'], ['inspect', '--help']]) {
      const child = spawn(process.execPath, [BIN, ...args], { env: { ...process.env, CI: '1', NODE_ENV: 'test' } });
      // The read end closes before the child writes (it takes far longer to start): its write meets EPIPE.
      child.stdout.destroy();
      let stderr = '';
      child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
      const code = await within(CHILD_MS, `stoker ${args.join(' ')} exiting`, new Promise<number | null>((resolve) => child.on('close', (c) => resolve(c))));
      assert.equal(stderr, '', `nothing on stderr for ${args.join(' ')}`);
      assert.equal(code, 0);
    }
  });
});

describe('stoker demo', () => {
  it('trains on a tiny budget: one plain line per epoch without a terminal, a summary, the temp folder removed', async () => {
    const r = await stoker(['demo', '--samples', '200', '--epochs', '1', '--batch-size', '50']);
    assert.equal(r.code, 0, r.stderr);
    assert.doesNotMatch(r.stdout, /\x1b\[/, 'no terminal escapes (no progress bar) without a TTY');
    assert.match(r.stdout, /^epoch 1\/1 .*samples\/s .*wait .*cache .*loss \d+\.\d{3} .*held-out acc \d+\.\d %$/m);
    assert.match(r.stdout, /held-out accuracy\s+\d+\.\d % after 1 epoch \(chance: 10 %\)/);
    assert.match(r.stdout, /250 PNG files \(200 to train on, 50 held out\)/);
    const dir = /with sharp to (\S+) …$/m.exec(r.stdout)?.[1];
    assert.ok(dir !== undefined && dir.includes('stoker-demo-'), 'names its temp folder');
    assert.equal(existsSync(dir), false, 'the temp folder is removed');
  });

  it('without TensorFlow.js (an optional peer) says so before it writes anything', async () => {
    const dir = mkdtempSync(join(scratch, 'no-tfjs-'));
    const r = await new Promise<Run>((resolve, reject) => {
      const args = ['--import', fileURLToPath(new URL('./fixtures/no-tfjs.mjs', import.meta.url)), BIN, 'demo', '--dir', dir, '--samples', '40', '--batch-size', '20', '--epochs', '1'];
      execFile(process.execPath, args, { timeout: CHILD_MS, env: { ...process.env, CI: '1', NODE_ENV: 'test' } }, (error, stdout, stderr) => {
        if (error !== null && (error as { killed?: boolean }).killed) reject(new Error(`stoker demo did not finish within ${CHILD_MS} ms (hang)`));
        else resolve({ code: error === null ? 0 : Number((error as { code?: unknown }).code), stdout, stderr });
      });
    });
    assert.equal(r.code, 1);
    assertOneLine(r.stderr, /^stoker demo: training needs TensorFlow\.js, .*npm install @tensorflow\/tfjs/);
    assert.deepEqual(readdirSync(dir), [], 'no file written');
    assert.equal(r.stdout, '');
  });

  it('says it is writing the images, and where, before it writes them, then says when it is done', async () => {
    // Read the child's stdout as it comes: the announcement must arrive before the done line, so a log
    // shows what the demo is doing during the write (5 000 files by default) instead of looking hung.
    const child = spawn(process.execPath, [BIN, 'demo', '--samples', '40', '--epochs', '1', '--batch-size', '20'], { env: { ...process.env, CI: '1', NODE_ENV: 'test' } });
    const seen: string[] = [];
    let out = '';
    child.stdout.setEncoding('utf8').on('data', (chunk: string) => {
      out += chunk;
      for (const [name, re] of [['writing', /writing 50 PNG files \(40 to train on, 10 held out\) with sharp to \S*stoker-demo-\S+ …/], ['written', /written in \d+\.\d s:/]] as const) {
        if (!seen.includes(name) && re.test(out)) seen.push(name);
      }
    });
    const code = await new Promise<number | null>((resolve, reject) => {
      const timer = setTimeout(() => {
        child.kill();
        reject(new Error(`stoker demo did not finish within 60 s (hang)\n${out}`));
      }, 60_000);
      child.on('exit', (c) => {
        clearTimeout(timer);
        resolve(c);
      });
    });
    assert.equal(code, 0, out);
    assert.deepEqual(seen, ['writing', 'written'], `the step is announced first, then its end:\n${out}`);
    assert.doesNotMatch(out, /\x1b\[/, 'no bar without a terminal');
  });

  it('the image writer reports 0 of n before the first file exists and n of n at the end', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'stoker-shapes-'));
    try {
      const calls: [number, number, number][] = [];
      const pngs = () => readdirSync(dir, { recursive: true }).filter((f) => String(f).endsWith('.png')).length;
      await writeShapesDataset(dir, { train: 30, test: 10, size: 8, onProgress: (done, total) => calls.push([done, total, done === 0 ? pngs() : -1]) });
      assert.deepEqual(calls[0], [0, 40, 0], 'the first call comes before any file is written');
      assert.deepEqual(calls.at(-1)!.slice(0, 2), [40, 40]);
      assert.deepEqual(calls.map((c) => c[0]), Array.from({ length: 41 }, (_, i) => i), 'one call per file, in order');
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('a long step prints its line in a log, and its line and a live bar on a terminal', () => {
    const sink = (tty: boolean) => {
      let text = '';
      const stream = new Writable({ write(chunk, _enc, done) { text += String(chunk); done(); } }) as Writable & { isTTY?: boolean; columns?: number };
      if (tty) Object.assign(stream, { isTTY: true, columns: 100 });
      return { stream: stream as unknown as NodeJS.WriteStream, text: () => text };
    };
    const log = sink(false);
    const logTask = new Ui({ json: false, progress: true }, log.stream, {}).task('writing 40 files …', '{bar} {value}/{total} files', 40);
    logTask.update(20, {});
    logTask.stop();
    assert.equal(log.text(), 'writing 40 files …\n', 'one line, no bar, in a log');
    const term = sink(true);
    const termTask = new Ui({ json: false, progress: true }, term.stream, {}).task('writing 40 files …', '{bar} {value}/{total} files', 40);
    termTask.update(20, {});
    termTask.stop();
    assert.ok(term.text().startsWith('writing 40 files …\n'), 'the line first');
    assert.match(term.text(), /0\/40 files/, 'then a bar');
    const json = sink(true);
    new Ui({ json: true, progress: true }, json.stream, {}).task('writing …', '{bar}', 1).stop();
    assert.equal(json.text(), '', 'nothing under --json');
  });

  it('--json prints one JSON document with per-epoch figures from loader.stats(), and the cache serves epoch 2', async () => {
    const r = await stoker(['demo', '--samples', '200', '--epochs', '2', '--batch-size', '50', '--json']);
    assert.equal(r.code, 0, r.stderr);
    const doc = JSON.parse(r.stdout) as {
      ok: boolean; epochs: { epoch: number; samplesPerSec: number; waitPct: number; cachePct: number; sourcePct: number; loss: number; heldOutAccuracy: number }[];
      heldOutAccuracy: number; tfjs: { backend: string }; stats: { epochs: { rowsDelivered: number }[] }; dataset: { files: number };
    };
    assert.equal(doc.ok, true);
    assert.equal(doc.epochs.length, 2);
    assert.equal(doc.dataset.files, 250);
    assert.equal(doc.stats.epochs.length, 2);
    assert.equal(doc.stats.epochs[0]!.rowsDelivered, 200);
    assert.equal(doc.epochs[0]!.sourcePct, 100, 'epoch 1 decodes every file');
    assert.ok(doc.epochs[1]!.cachePct > 90, `epoch 2 reads from the RAM cache: ${doc.epochs[1]!.cachePct} %`);
    for (const e of doc.epochs) {
      assert.ok(e.samplesPerSec > 0 && e.waitPct >= 0 && e.waitPct <= 100 && Number.isFinite(e.loss));
      assert.ok(e.heldOutAccuracy >= 0 && e.heldOutAccuracy <= 1);
    }
    assert.ok(['wasm', 'cpu'].includes(doc.tfjs.backend));
  });
});

describe('stoker bench', () => {
  it('--json parses with per-scenario, per-epoch figures, and --report writes a well-formed HTML file showing them', async () => {
    const report = join(scratch, 'bench.html');
    const r = await stoker(['bench', '--json', '--samples', '512', '--images', '256', '--epochs', '2', '--batch-size', '64', '--report', report]);
    assert.equal(r.code, 0, r.stderr);
    const doc = JSON.parse(r.stdout) as BenchReport & { reportPath: string };
    assert.equal(doc.ok, true);
    assert.equal(doc.reportPath, report);
    assert.deepEqual(doc.scenarios.map((s) => s.name), ['memory', 'images', 'disk']);
    for (const s of doc.scenarios) {
      assert.equal(s.epochs.length, 2, s.name);
      for (const e of s.epochs) {
        assert.ok(e.samplesPerSec > 0, `${s.name} throughput`);
        assert.ok(e.waitPct >= 0 && e.waitPct <= 100);
        assert.equal(e.rows, s.name === 'memory' ? 512 : 256);
        assert.equal(e.stats.rowsDelivered, e.rows);
      }
    }
    const [memory, images, disk] = doc.scenarios;
    assert.equal(memory!.mode, 'resident');
    assert.equal(memory!.epochs[0]!.cachePct, undefined, 'resident mode has no tier figures');
    assert.equal(images!.epochs[0]!.sourcePct, 100);
    assert.ok(images!.epochs[1]!.cachePct! > 90, 'images: epoch 2 from the RAM cache');
    assert.ok(disk!.epochs[1]!.diskPct! > 90, 'disk: epoch 2 from the disk stage');

    const html = readFileSync(report, 'utf8');
    const counts = checkWellFormed(html);
    assert.ok((counts.get('svg') ?? 0) >= 4, 'throughput, wait and two tier charts');
    assert.ok(!/<script|<link|src=|url\(/i.test(html), 'self-contained: no script, no external resource');
    for (const s of doc.scenarios) {
      for (const e of s.epochs) {
        assert.ok(html.includes(`<td class="n">${int(e.samplesPerSec)}</td>`), `${s.name} epoch ${e.epoch + 1} samples/s in the table`);
        assert.ok(html.includes(`<title>${s.name}, epoch ${e.epoch + 1}: ${compact(e.samplesPerSec)}</title>`), `${s.name} epoch ${e.epoch + 1} samples/s on its bar`);
      }
    }
    assert.equal((html.match(/<figcaption>/g) ?? []).length, counts.get('svg'), 'every chart has its caption');
    const rates = doc.scenarios.flatMap((s) => s.epochs.map((e) => e.samplesPerSec));
    const ceiling = (doc.config.batchSize * 1000) / doc.config.stepMs;
    assert.match(html, new RegExp(`data-scale="${Math.max(...rates, ceiling) / Math.min(...rates) > 10 ? 'log' : 'linear'}"`), 'the throughput axis follows the run’s span');
    assert.ok(html.includes(`caps it at ${int(ceiling)} samples/s`), 'the step’s ceiling in the caption');
  });

  it('by default simulates a training step, so the wait says what the loader hides', async () => {
    const r = await stoker(['bench', '--json', '--scenarios', 'memory', '--samples', '640']);
    assert.equal(r.code, 0, r.stderr);
    const doc = JSON.parse(r.stdout) as BenchReport;
    assert.deepEqual([doc.config.stepMs, doc.config.batchSize, doc.config.epochs], [10, 64, 3], 'a 10 ms step per batch of 64, 3 epochs');
    const help = await stoker(['bench', '--help']);
    assert.match(help.stdout, /--samples <n>[^\n]*\n?[^\n]*\(default:\s+10000\)/, 'epochs of 150 batches in memory');
    assert.match(help.stdout, /--images <n>[^\n]*\n?[^\n]*\(default:\s+4000\)/, 'and of 62 batches of PNG files');
  });

  it('prints a table without --json', async () => {
    const r = await stoker(['bench', '--scenarios', 'memory', '--samples', '256', '--epochs', '1', '--batch-size', '64']);
    assert.equal(r.code, 0, r.stderr);
    assert.match(r.stdout, /scenario\s+epoch\s+samples\/s\s+wait\s+transform\s+RAM cache\s+disk\s+source/);
    assert.match(r.stdout, /^memory\s+1\s+[\d ]+\s+\d+\.\d %/m);
  });
});

describe('stoker inspect', () => {
  it('describes a small .npy file, as text and as --json', async () => {
    const path = join(scratch, 'x.npy');
    const header = "{'descr': '<f4', 'fortran_order': False, 'shape': (5, 3), }";
    const padded = header + ' '.repeat(128 - 10 - header.length - 1) + '\n';
    const h = Buffer.from([0x93, ...Buffer.from('NUMPY'), 1, 0, padded.length & 0xff, padded.length >> 8]);
    writeFileSync(path, Buffer.concat([h, Buffer.from(padded, 'latin1'), Buffer.from(new Float32Array(15).buffer)]));
    const [text, json] = await Promise.all([stoker(['inspect', path]), stoker(['inspect', path, '--json'])]);
    assert.equal(text.code, 0, text.stderr);
    assert.match(text.stdout, /format\s+npy/);
    assert.match(text.stdout, /samples\s+5/);
    assert.match(text.stdout, /^x\s+float32\s+\[3\]\s+12$/m, 'one file: a column named after its stem');
    assert.equal(json.code, 0, json.stderr);
    const d = JSON.parse(json.stdout) as { format: string; length: number; columns: { dtype: string; shape: number[] }[]; bytesPerSample: number };
    assert.equal(d.format, 'npy');
    assert.equal(d.length, 5);
    assert.deepEqual(d.columns.map((c) => [c.dtype, c.shape]), [['float32', [3]]]);
    assert.equal(d.bytesPerSample, 12);
  });
});

describe('stoker: failures', () => {
  it('a bad command line exits 2 with one line that names the problem and points to --help', async () => {
    const full = join(scratch, 'not-empty');
    mkdirSync(full);
    writeFileSync(join(full, 'mine.txt'), 'keep me');
    const cases: [string[], RegExp][] = [
      [['demo', '--dir', full], /^stoker demo: --dir .*not-empty is not empty: give a new or empty folder/],
      [['demo', '--epochs', '0'], /^stoker demo: option '--epochs <n>' argument '0' is invalid\. expected an integer from 1 to 1000 \(see 'stoker demo --help'\)$/],
      [['demo', '--sampels', '5'], /^stoker demo: unknown option '--sampels' \(Did you mean --samples\?\)/],
      [['demo', '--device', 'tpu'], /^stoker demo: .*'tpu' is invalid\. expected cpu, cuda, cuda:N or sim/],
      [['demo', '--samples', '20', '--batch-size', '64'], /^stoker demo: --samples \(20\) must be at least --batch-size \(64\)/],
      [['bench', '--scenarios', 'memory,gpu'], /^stoker bench: .*unknown: gpu/],
      [['frobnicate'], /^stoker: unknown command 'frobnicate'/],
      [['inspect'], /^stoker inspect: missing required argument 'path'/],
      [['inspect', join(scratch, 'does-not-exist.npy')], /^stoker inspect: no such file or folder: .*does-not-exist\.npy \(see 'stoker inspect --help'\)$/],
    ];
    const runs = await Promise.all(cases.map(([args]) => stoker(args)));
    runs.forEach((r, k) => {
      assert.equal(r.code, 2, `${cases[k]![0].join(' ')} → exit 2 (got ${r.code}: ${r.stderr})`);
      assert.equal(r.stdout, '', 'nothing on stdout');
      assertOneLine(r.stderr, cases[k]![1]);
    });
    assert.equal(readFileSync(join(full, 'mine.txt'), 'utf8'), 'keep me');
  });

  it('a command that fails exits 1 with one line and no stack; --verbose adds the stack; --json adds an error document', async () => {
    const bad = join(scratch, 'bad.npy');
    writeFileSync(bad, 'garbage');
    const [plain, verbose, json] = await Promise.all([stoker(['inspect', bad]), stoker(['inspect', bad, '--verbose']), stoker(['--verbose', 'inspect', bad, '--json'])]);
    assert.equal(plain.code, 1);
    assertOneLine(plain.stderr, /^stoker inspect: ERR_BAD_FILE: .*bad\.npy: at byte 0: .*NPY header/);
    assert.equal(verbose.code, 1);
    assert.match(verbose.stderr, /^stoker inspect: ERR_BAD_FILE: /);
    assert.match(verbose.stderr, /^\s+at .*npy\.[jt]s/m, '--verbose prints the stack (dist/ or the sources)');
    assert.equal(json.code, 1);
    const doc = JSON.parse(json.stdout) as { ok: boolean; error: { code: string; message: string; exitCode: number } };
    assert.deepEqual([doc.ok, doc.error.code, doc.error.exitCode], [false, 'ERR_BAD_FILE', 1]);
    assert.match(doc.error.message, /bad\.npy: at byte 0/);
  });
});

describe('the bench report renderer', () => {
  const stats = (epoch: number, over: Partial<ReturnType<typeof newEpochStats>>) => ({ ...newEpochStats(epoch, 'streaming'), ...over });
  const epoch = (s: ReturnType<typeof newEpochStats>) => ({ ...epochFigures(s), stats: s });
  const report: BenchReport = {
    ok: true, command: 'bench', startedAt: '2026-01-01T00:00:00.000Z',
    hardware: { cpu: 'Test CPU <fast> & "cheap"', cores: 2, memoryBytes: 8 * 2 ** 30, node: 'v20.0.0', platform: 'linux-x64' },
    config: { batchSize: 64, epochs: 2, stepMs: 0, seed: 42 },
    totalSeconds: 1.5,
    scenarios: [{
      name: 'images <b>&</b>', description: 'a "quoted" & <tagged> description', device: 'cpu', mode: 'streaming', workers: 1, samples: 1000, bytesPerSample: 3076, createSeconds: 0.1,
      epochs: [
        epoch(stats(0, { batches: 15, rowsDelivered: 960, wallMs: 480, waitMs: 300, rowsFromSource: 960 })),
        epoch(stats(1, { batches: 15, rowsDelivered: 960, wallMs: 32, waitMs: 8, rowsFromCache: 900, rowsFromDisk: 30, rowsFromSource: 30 })),
      ],
    }],
  };

  it('is well-formed, escapes every text it is given, and shows every figure', () => {
    const html = renderBenchReport(report);
    const counts = checkWellFormed(html);
    assert.equal(counts.get('svg'), 3, 'throughput, wait, and one tier chart');
    assert.ok(html.includes('images &lt;b&gt;&amp;&lt;/b&gt;'), 'the scenario name is escaped');
    assert.ok(!html.includes('<b>&</b>') && !html.includes('<tagged>'));
    assert.ok(html.includes('Test CPU &lt;fast&gt; &amp; &quot;cheap&quot;'));
    for (const cell of ['2 000', '30 000', '62.5 %', '25.0 %', '93.8 %', '3.1 %', '100.0 %']) assert.ok(html.includes(`<td class="n">${cell}</td>`), `table cell ${cell}`);
    assert.match(html, /<text[^>]*>2k<\/text>/, 'epoch 1 throughput labelled on its bar');
    assert.match(html, /<title>RAM cache, epoch 2: 94%<\/title>/, 'tier shares as tooltips');
  });

  it('tier shares count the VRAM pool with the host tiers, and the hit rate is every row not read from the source', () => {
    const f = epochFigures(stats(1, { rowsDelivered: 960, wallMs: 100, waitMs: 10, rowsServedOnDevice: 368, rowsFromCache: 553, rowsFromSource: 39 }));
    assert.equal(f.poolPct!.toFixed(2), ((100 * 368) / 960).toFixed(2));
    assert.equal(f.cachePct!.toFixed(2), ((100 * 553) / 960).toFixed(2));
    assert.equal(f.hitPct!.toFixed(2), ((100 * 921) / 960).toFixed(2));
    assert.equal(f.samplesPerSec, 9600);
    assert.equal(f.waitPct, 10);
    const resident = epochFigures({ ...newEpochStats(0, 'resident'), rowsDelivered: 10, wallMs: 1 });
    assert.deepEqual([resident.poolPct, resident.cachePct, resident.hitPct, resident.sourcePct], [undefined, undefined, undefined, undefined]);
  });

  it('axis ticks are round numbers that cover the data', () => {
    assert.deepEqual(niceTicks(100), [0, 20, 40, 60, 80, 100]);
    assert.deepEqual(niceTicks(128_378), [0, 50_000, 100_000, 150_000]);
    assert.deepEqual(niceTicks(0.3), [0, 0.1, 0.2, 0.3]);
    assert.deepEqual(niceTicks(0), [0, 1]);
  });
});
