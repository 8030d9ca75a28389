// The sentence under each chart of the bench report: what to read from it, with the run's own
// numbers (the step's ceiling, the slowest epoch, the longest wait, what the tiers served). The
// rule: every number in a caption is computed from the `BenchReport` the chart is drawn from, so a
// caption can never describe another run than the one above it.

import { int, pct } from './figures.js';
import type { BenchEpoch, BenchReport, BenchScenario } from './bench-report.js';

interface At {
  readonly s: BenchScenario;
  readonly e: BenchEpoch;
}

/** Rows per second the simulated step allows at most (batch / step), or undefined with no step. */
export function stepCeiling(report: BenchReport): number | undefined {
  const { batchSize, stepMs } = report.config;
  return stepMs > 0 ? (batchSize * 1000) / stepMs : undefined;
}

function all(report: BenchReport): At[] {
  return report.scenarios.flatMap((s) => s.epochs.map((e) => ({ s, e })));
}

function name({ s, e }: At): string {
  return `${s.name} epoch ${e.epoch + 1}`;
}

function extreme(list: readonly At[], pick: (a: At) => number, want: 'min' | 'max'): At | undefined {
  let best: At | undefined;
  for (const a of list) if (best === undefined || (want === 'min' ? pick(a) < pick(best) : pick(a) > pick(best))) best = a;
  return best;
}

export function throughputCaption(report: BenchReport, scale: 'linear' | 'log'): string {
  const list = all(report);
  const low = extreme(list, (a) => a.e.samplesPerSec, 'min');
  const high = extreme(list, (a) => a.e.samplesPerSec, 'max');
  const cap = stepCeiling(report);
  const parts = ['Rows delivered per second of each epoch’s wall time.'];
  if (cap !== undefined) {
    parts.push(`The simulated step (${report.config.stepMs} ms per batch of ${report.config.batchSize}) caps it at ${int(cap)} samples/s, the dashed line: a bar near the line is held back by the training step, not the loader; a bar far below it is held back by the loader.`);
  } else {
    parts.push('No training step was simulated, so this is the loader’s own rate with no step competing for the CPU — an upper bound, not what a training loop sees.');
  }
  if (low !== undefined && high !== undefined) {
    const source = low.e.sourcePct === 100 ? ', every row read from the source' : '';
    parts.push(`Slowest here: ${name(low)}, ${int(low.e.samplesPerSec)} samples/s${source}; fastest: ${name(high)}, ${int(high.e.samplesPerSec)}.`);
  }
  if (cap !== undefined && high !== undefined && high.e.samplesPerSec < 0.8 * cap) {
    parts.push(`No bar reaches 80 % of the ceiling: the step itself took longer than ${report.config.stepMs} ms (on a shared CPU the spin is preempted), so read the wait chart below for which side held back.`);
  }
  if (scale === 'log') parts.push(`The axis is logarithmic: the values span ${int(high!.e.samplesPerSec / low!.e.samplesPerSec)}×, and on a linear axis the small bars would vanish.`);
  return parts.join(' ');
}

export function waitCaption(report: BenchReport): string {
  const list = all(report);
  const high = extreme(list, (a) => a.e.waitPct, 'max');
  const low = extreme(list, (a) => a.e.waitPct, 'min');
  if (stepCeiling(report) === undefined) {
    return 'The share of each epoch the loop spent waiting for its next batch. No training step was simulated (--step-ms 0): the loop does nothing but wait, so every bar is near 100 % and says nothing about what the loader hides; run with --step-ms N to see it.';
  }
  const parts = [`The share of each epoch the loop spent waiting for its next batch instead of stepping. Near 0 %: the loader prepared batches while the ${report.config.stepMs} ms step ran — it hid its reads; near 100 %: the step mostly waited for data.`];
  if (high !== undefined && low !== undefined) {
    const source = high.e.sourcePct === 100 ? ' (every row read from the source)' : '';
    parts.push(`Longest wait here: ${name(high)}, ${pct(high.e.waitPct)}${source}; shortest: ${name(low)}, ${pct(low.e.waitPct)}.`);
  }
  return parts.join(' ');
}

export function tierCaption(s: BenchScenario): string {
  const first = s.epochs[0];
  const second = s.epochs[1];
  const parts = ['Where each epoch’s rows came from.'];
  if (first !== undefined) parts.push(`Epoch 1 read ${pct(first.sourcePct)} of its rows from the source.`);
  if (second !== undefined) {
    const from = [second.poolPct !== undefined && second.poolPct > 0 ? 'VRAM pool' : '', (second.cachePct ?? 0) > 0 ? 'RAM cache' : '', (second.diskPct ?? 0) > 0 ? 'disk stage' : ''].filter((x) => x !== '');
    parts.push(`Epoch 2 took ${pct(second.hitPct)} from ${from.length > 0 ? `the ${from.join(' and ')}` : 'the tiers'}: rows not read and decoded again.`);
  } else {
    parts.push('Run two epochs or more to see the tiers serve the later ones.');
  }
  return parts.join(' ');
}
