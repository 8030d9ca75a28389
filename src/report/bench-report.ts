// The document `stoker bench` produces: hardware, config, and per scenario per epoch the derived
// figures with the raw `EpochStats` — what `--json` prints and what the HTML report and its
// captions are drawn from. The rule: a report holds measurements only; text is made from it later.

import type { EpochStats } from '../pipeline/stats.js';
import type { EpochFigures } from './figures.js';

export interface BenchEpoch extends EpochFigures {
  /** The raw figures of `loader.stats().epochs[e]`. */
  readonly stats: EpochStats;
}

export interface BenchScenario {
  readonly name: string;
  readonly description: string;
  readonly device: string;
  readonly mode: 'resident' | 'streaming';
  readonly workers: number;
  readonly samples: number;
  readonly bytesPerSample: number;
  /** Seconds `DataLoader.create` took (resident mode reads the whole dataset then). */
  readonly createSeconds: number;
  readonly epochs: readonly BenchEpoch[];
}

export interface BenchReport {
  readonly ok: true;
  readonly command: 'bench';
  readonly startedAt: string;
  readonly hardware: { readonly cpu: string; readonly cores: number; readonly memoryBytes: number; readonly node: string; readonly platform: string };
  readonly config: { readonly batchSize: number; readonly epochs: number; readonly stepMs: number; readonly seed: number };
  readonly scenarios: readonly BenchScenario[];
  readonly totalSeconds: number;
}
