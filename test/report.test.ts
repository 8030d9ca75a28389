// The bench report's structure, rendered in process from reports whose figures are known: the
// throughput axis turns logarithmic when the rates span more than 10×, every chart sits in a figure
// with a caption saying what to read from it, and every number in a caption or on a bar is the
// run's own (the step's ceiling, the slowest epoch, the longest wait, what the tiers served).

import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { newEpochStats } from '../src/pipeline/stats.js';
import { epochFigures } from '../src/report/figures.js';
import { type BenchReport, type BenchScenario, compact, renderBenchReport } from '../src/report/html.js';
import { logTicks, scaleFor } from '../src/report/svg.js';

type Over = Partial<ReturnType<typeof newEpochStats>>;
const epoch = (e: number, over: Over) => {
  const stats = { ...newEpochStats(e, 'streaming'), ...over };
  return { ...epochFigures(stats), stats };
};
/** A scenario whose epoch k delivers 6 400 rows in wallMs[k] ms, waiting waitMs[k] of them. */
const scenario = (name: string, wallMs: number[], waitMs: number[], tiers?: Over[]): BenchScenario => ({
  name, description: `${name} scenario`, device: 'cpu', mode: tiers === undefined ? 'resident' : 'streaming', workers: 1, samples: 6400, bytesPerSample: 3076, createSeconds: 0.1,
  epochs: wallMs.map((w, k) => epoch(k, { batches: 100, rowsDelivered: 6400, wallMs: w, waitMs: waitMs[k]!, ...(tiers?.[k] ?? {}) })),
});
const report = (stepMs: number, scenarios: BenchScenario[]): BenchReport => ({
  ok: true, command: 'bench', startedAt: '2026-01-01T00:00:00.000Z',
  hardware: { cpu: 'Test CPU', cores: 2, memoryBytes: 8 * 2 ** 30, node: 'v20.0.0', platform: 'linux-x64' },
  config: { batchSize: 64, epochs: 2, stepMs, seed: 42 }, scenarios, totalSeconds: 9,
});

/** Each <figure> of the document: its <svg> root tag, the whole svg, and its caption text. */
function figures(html: string): { root: string; svg: string; caption: string }[] {
  return [...html.matchAll(/<figure>\n(<svg[^>]*>)([\s\S]*?<\/svg>)\n<figcaption>([^<]*)<\/figcaption>\n<\/figure>/g)].map((m) => ({ root: m[1]!, svg: m[1]! + m[2]!, caption: m[3]! }));
}
const scaleOf = (root: string) => /data-scale="(linear|log)"/.exec(root)?.[1];

// Step 10 ms per batch of 64: the ceiling is 6 400 samples/s. images epoch 1: 6 400 rows in 6.4 s
// (1 000/s, every row from the source, 90 % wait); epoch 2: 6 400 in 1.28 s (5 000/s, from the cache).
const images = scenario('images', [6400, 1280], [5760, 64], [{ rowsFromSource: 6400 }, { rowsFromCache: 6336, rowsFromSource: 64 }]);
const memory = scenario('memory', [1100, 1067], [110, 53]);

describe('the bench report', () => {
  it('draws throughput on a log axis when the rates span more than 10×, and on a linear one otherwise', () => {
    const wide = figures(renderBenchReport(report(0, [scenario('memory', [50, 40], [49, 39]), images])));
    assert.equal(scaleOf(wide[0]!.root), 'log', 'rates from 1 000 to 160 000 samples/s');
    assert.match(wide[0]!.svg, /samples\/s \(log scale\)/, 'the axis says so');
    for (const tick of ['1k', '10k', '100k', '200k']) assert.match(wide[0]!.svg, new RegExp(`class="tick"[^>]*>${tick}</text>`), `a tick at ${tick}`);
    assert.match(wide[0]!.caption, /The axis is logarithmic: the values span 160×/);
    const narrow = figures(renderBenchReport(report(10, [memory, images])));
    assert.equal(scaleOf(narrow[0]!.root), 'linear', 'rates from 1 000 to 6 400 samples/s (the ceiling included)');
    assert.doesNotMatch(narrow[0]!.caption, /logarithmic/);
    for (const f of [...wide.slice(1), ...narrow.slice(1)]) assert.equal(scaleOf(f.root), 'linear', 'shares stay on a linear axis');
  });

  it('puts every chart in a figure with a caption saying what to read from it', () => {
    for (const r of [report(10, [memory, images]), report(0, [memory])]) {
      const html = renderBenchReport(r);
      const found = figures(html);
      assert.equal(found.length, (html.match(/<svg/g) ?? []).length, 'no chart outside a captioned figure');
      assert.equal(found.length, 2 + r.scenarios.filter((s) => s.mode === 'streaming').length, 'throughput, wait, one tier chart per streaming scenario');
      for (const f of found) assert.ok(f.caption.length > 60 && /\.$/.test(f.caption), `a sentence under the chart: ${f.caption}`);
    }
  });

  it('the captions carry the run’s own numbers: the step’s ceiling, the slowest epoch, the longest wait, what the tiers served', () => {
    const [throughput, wait, tiers] = figures(renderBenchReport(report(10, [memory, images])));
    assert.match(throughput!.caption, /caps it at 6 400 samples\/s/, '64 rows per 10 ms step');
    assert.match(throughput!.caption, /Slowest here: images epoch 1, 1 000 samples\/s, every row read from the source; fastest: memory epoch 2, 5 998\./);
    assert.match(throughput!.svg, /class="reference"[^>]*><title>step’s ceiling: 6\.4k<\/title>/, 'the ceiling drawn as a line');
    assert.match(wait!.caption, /Longest wait here: images epoch 1, 90\.0 % \(every row read from the source\); shortest: memory epoch 2, 5\.0 %\./);
    assert.match(tiers!.caption, /Epoch 1 read 100\.0 % of its rows from the source\. Epoch 2 took 99\.0 % from the RAM cache/);
    const idle = figures(renderBenchReport(report(0, [memory])));
    assert.match(idle[0]!.caption, /No training step was simulated/);
    assert.doesNotMatch(idle[0]!.svg, /class="reference"/, 'no ceiling without a step');
    assert.match(idle[1]!.caption, /--step-ms 0\): the loop does nothing but wait/);
  });

  it('labels every bar with its epoch’s figure, as text and as a tooltip', () => {
    const r = report(10, [memory, images]);
    const [throughput, wait] = figures(renderBenchReport(r));
    for (const s of r.scenarios) {
      for (const e of s.epochs) {
        assert.ok(throughput!.svg.includes(`<title>${s.name}, epoch ${e.epoch + 1}: ${compact(e.samplesPerSec)}</title>`), `${s.name} epoch ${e.epoch + 1} samples/s`);
        assert.ok(wait!.svg.includes(`<title>${s.name}, epoch ${e.epoch + 1}: ${e.waitPct.toFixed(0)}%</title>`), `${s.name} epoch ${e.epoch + 1} wait`);
      }
    }
  });

  it('chooses a log axis past a 10× span and gives it round ticks that cover the data', () => {
    assert.equal(scaleFor([100, 1001]), 'log');
    assert.equal(scaleFor([100, 1000]), 'linear');
    assert.equal(scaleFor([752, undefined, 0, 7000]), 'linear', 'gaps and zeros do not count');
    assert.equal(scaleFor([5]), 'linear');
    assert.deepEqual(logTicks(752, 111_000), [500, 1000, 2000, 5000, 10_000, 20_000, 50_000, 100_000, 200_000]);
    assert.deepEqual(logTicks(3, 4_000_000), [2, 10, 100, 1000, 10_000, 100_000, 1_000_000, 5_000_000]);
    assert.deepEqual(logTicks(1000, 1000), [1000, 2000]);
    assert.deepEqual([compact(752), compact(1500), compact(2000), compact(111_000), compact(2e6)], ['752', '1.5k', '2k', '111k', '2M']);
  });
});
