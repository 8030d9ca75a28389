// The bench report: one self-contained HTML file (inline CSS and SVG; no script, no font, no
// network) with per-epoch throughput, loader wait and tier hit-rate charts for every scenario, the
// table of figures, and what each figure means; each chart has a caption saying what to read from
// it (captions.ts). The rule: every number shown comes from the `BenchReport` it is given — the
// same document `stoker bench --json` prints.

import type { BenchEpoch, BenchReport } from './bench-report.js';
import { stepCeiling, throughputCaption, tierCaption, waitCaption } from './captions.js';
import { int, pct } from './figures.js';
import { type Series, barChart, esc, scaleFor } from './svg.js';

export type { BenchEpoch, BenchReport, BenchScenario } from './bench-report.js';

const PALETTE = ['#3b6fd8', '#e07b29', '#2f9e62', '#b04fc4', '#c9453f', '#6b7280'];
const TIERS = { pool: '#7b4fd0', cache: '#2f9e62', disk: '#e0a829', source: '#8a94a6' };

/** The whole report as an HTML document. */
export function renderBenchReport(report: BenchReport): string {
  const epochs = Math.max(0, ...report.scenarios.map((s) => s.epochs.length));
  const categories = Array.from({ length: epochs }, (_, i) => `epoch ${i + 1}`);
  const series = (pick: (e: BenchEpoch) => number | undefined): Series[] =>
    report.scenarios.map((s, k) => ({ name: s.name, colour: PALETTE[k % PALETTE.length]!, values: categories.map((_, i) => (s.epochs[i] === undefined ? undefined : pick(s.epochs[i]!))) }));
  const rates = series((e) => e.samplesPerSec);
  const ceiling = stepCeiling(report);
  const scale = scaleFor([...rates.flatMap((r) => r.values), ceiling]);
  const throughput = figure(barChart({
    title: 'Throughput per epoch', unit: 'samples/s', categories, series: rates, format: compact, scale,
    ...(ceiling !== undefined ? { reference: { value: ceiling, label: 'step’s ceiling' } } : {}),
  }), throughputCaption(report, scale));
  const wait = figure(barChart({ title: 'Loader wait per epoch (share of the epoch the loop waited)', unit: 'wait %', categories, series: series((e) => e.waitPct), max: 100, format: (v) => `${v.toFixed(0)}%` }), waitCaption(report));
  const tierCharts = report.scenarios
    .filter((s) => s.epochs.some((e) => e.cachePct !== undefined))
    .map((s) => figure(
      barChart({
        title: `Where rows came from — ${s.name}`,
        unit: 'share of rows %',
        categories: s.epochs.map((e) => `epoch ${e.epoch + 1}`),
        stacked: true,
        max: 100,
        format: (v) => `${v.toFixed(0)}%`,
        series: [
          ...(s.epochs.some((e) => (e.poolPct ?? 0) > 0) ? [{ name: 'VRAM pool', colour: TIERS.pool, values: s.epochs.map((e) => e.poolPct) }] : []),
          { name: 'RAM cache', colour: TIERS.cache, values: s.epochs.map((e) => e.cachePct) },
          { name: 'disk stage', colour: TIERS.disk, values: s.epochs.map((e) => e.diskPct) },
          { name: 'source', colour: TIERS.source, values: s.epochs.map((e) => e.sourcePct) },
        ],
      }), tierCaption(s)));
  const hw = report.hardware;
  const rows = report.scenarios.flatMap((s) =>
    s.epochs.map((e) => `<tr><td>${esc(s.name)}</td><td class="n">${e.epoch + 1}</td><td class="n">${int(e.rows)}</td><td class="n">${e.seconds.toFixed(3)}</td><td class="n">${int(e.samplesPerSec)}</td><td class="n">${esc(pct(e.waitPct))}</td><td class="n">${esc(pct(e.transformPct))}</td><td class="n">${esc(pct(e.poolPct))}</td><td class="n">${esc(pct(e.cachePct))}</td><td class="n">${esc(pct(e.diskPct))}</td><td class="n">${esc(pct(e.sourcePct))}</td></tr>`));
  const scenarioList = report.scenarios.map((s) =>
    `<li><b>${esc(s.name)}</b> — ${esc(s.description)}. ${int(s.samples)} samples of ${int(s.bytesPerSample)} bytes, ${esc(s.mode)} on ${esc(s.device)}, ${s.workers === 0 ? 'main-thread reads' : `${s.workers} reader worker${s.workers === 1 ? '' : 's'}`}; create ${s.createSeconds.toFixed(2)} s.</li>`);
  return `<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>Stoker bench report — ${esc(report.startedAt)}</title>
<style>
body { font: 15px/1.5 system-ui, -apple-system, "Segoe UI", sans-serif; color: #1f2430; max-width: 980px; margin: 2em auto; padding: 0 1em; }
h1 { font-size: 1.6em; margin-bottom: 0.2em; } h2 { font-size: 1.2em; margin-top: 2em; }
.meta { color: #5b6475; }
figure { margin: 1.5em 0; } svg { max-width: 100%; height: auto; background: #fbfcfe; border: 1px solid #e3e7ef; border-radius: 6px; }
svg .chart-title { font-weight: 600; font-size: 15px; fill: #1f2430; } svg .tick, svg .legend { font-size: 12px; fill: #5b6475; }
svg .axis { font-size: 12px; fill: #5b6475; } svg .grid { stroke: #e3e7ef; } svg .axis-line { stroke: #5b6475; }
svg .value { font-size: 11px; fill: #1f2430; } svg .value.inside { fill: #fff; font-weight: 600; }
svg .reference { stroke: #c9453f; stroke-width: 1.5; } svg .reference-label { font-size: 12px; fill: #c9453f; }
figcaption { color: #3a4252; font-size: 14px; margin-top: 0.4em; max-width: 720px; }
table { border-collapse: collapse; width: 100%; font-size: 13px; } th, td { padding: 4px 8px; border-bottom: 1px solid #e3e7ef; text-align: left; }
td.n, th.n { text-align: right; font-variant-numeric: tabular-nums; }
dt { font-weight: 600; } dd { margin: 0 0 0.6em 1.2em; }
</style>
</head>
<body>
<h1>Stoker bench report</h1>
<p class="meta">${esc(report.startedAt)} · ${esc(hw.cpu)}, ${hw.cores} cores, ${esc(formatGiB(hw.memoryBytes))} RAM · Node ${esc(hw.node)} · ${esc(hw.platform)}<br>
batch ${report.config.batchSize} · ${report.config.epochs} epochs per scenario · simulated training step ${report.config.stepMs} ms per batch · seed ${report.config.seed} · total ${report.totalSeconds.toFixed(1)} s</p>
<h2>Scenarios</h2>
<ul>
${scenarioList.join('\n')}
</ul>
<h2>Throughput</h2>
${throughput}
<h2>Loader wait</h2>
${wait}
<h2>Tier hit rates</h2>
${tierCharts.length === 0 ? '<p>No scenario read through the sample tiers (resident mode reads the dataset once, at create).</p>' : tierCharts.join('\n')}
<h2>All figures</h2>
<table>
<thead><tr><th>scenario</th><th class="n">epoch</th><th class="n">rows</th><th class="n">seconds</th><th class="n">samples/s</th><th class="n">wait</th><th class="n">transform</th><th class="n">VRAM pool</th><th class="n">RAM cache</th><th class="n">disk</th><th class="n">source</th></tr></thead>
<tbody>
${rows.join('\n')}
</tbody>
</table>
<h2>What the figures mean</h2>
<dl>
<dt>samples/s</dt><dd>Rows delivered in the epoch divided by its wall time (<code>rowsDelivered / wallMs</code>), from the first request for a batch to the last.</dd>
<dt>wait</dt><dd>Share of the epoch the consuming loop spent inside the loader waiting for its next batch (<code>waitMs / wallMs</code>); the transform runs during that wait and counts in it. With a training step of ${report.config.stepMs} ms per batch, what the loader hides behind the step does not count.</dd>
<dt>transform</dt><dd>Share of the epoch spent in the transform (<code>transformMs / wallMs</code>).</dd>
<dt>VRAM pool · RAM cache · disk · source</dt><dd>Where the epoch's rows came from: the VRAM sample pool on a GPU, the shared RAM sample cache, the disk stage, or the dataset itself (<code>rowsServedOnDevice</code>, <code>rowsFromCache</code>, <code>rowsFromDisk</code>, <code>rowsFromSource</code> as shares of their sum). Resident mode reads the dataset once at create, so it has none.</dd>
</dl>
<p class="meta">Made by <code>stoker bench --report</code>. The same figures: <code>stoker bench --json</code>, or <code>loader.stats()</code> in your own loop (docs/stats.md).</p>
</body>
</html>
`;
}

/** A chart and the sentence that says what to read from it. */
function figure(svg: string, caption: string): string {
  return `<figure>\n${svg}\n<figcaption>${esc(caption)}</figcaption>\n</figure>`;
}

/** A rate for a bar label or a tick: 752, 1.5k, 111k, 2M (a trailing ".0" dropped). */
export function compact(v: number): string {
  const short = (x: number, digits: number) => x.toFixed(digits).replace(/\.0$/, '');
  if (v >= 1e6) return `${short(v / 1e6, v >= 1e7 ? 0 : 1)}M`;
  if (v >= 1e3) return `${short(v / 1e3, v >= 1e4 ? 0 : 1)}k`;
  return v.toFixed(0);
}

function formatGiB(n: number): string {
  return `${(n / 2 ** 30).toFixed(0)} GiB`;
}
