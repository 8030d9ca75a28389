// Internal: not exported from the package entry.
// `loader.describe()`: what a loader is, in one readable summary — the device, the mode and the route
// its batches take, the tiers and what they hold, the budgets it works under, the world. The rule:
// every line is built from facts the loader reports (its options as resolved, its tiers' figures),
// never from defaults restated here, so the summary cannot drift from what runs.

import type { World } from '../distributed/launch.js';
import type { PoolPhase } from '../device/pool-payoff.js';
import type { EpochRoute } from '../pipeline/stats.js';
import { bytes, int } from './figures.js';

export interface LoaderFacts {
  readonly device: string;
  readonly resident: boolean;
  readonly route: EpochRoute;
  readonly workers: number;
  readonly datasetLength: number;
  readonly augment: number;
  readonly picks: number;
  readonly batchSize: number;
  readonly numBatches: number;
  readonly dropLast: boolean;
  readonly cache?: { readonly held: number; readonly budget: number };
  readonly disk?: { readonly bytes: number; readonly budget: number; readonly latched: boolean };
  readonly pool?: { readonly phase: PoolPhase; readonly bytes: number; readonly budget: number; readonly rows: number };
  readonly ramMaxUsage: number;
  readonly ramShare: number;
  readonly vramMaxUsage: number;
  readonly prefetch?: { readonly depth: number; readonly pinned: boolean };
  readonly world: World;
  readonly epochsRun: number;
  /** Remote files this process's node caches fetched or found (absent: none asked). */
  readonly remote?: { readonly requests: number; readonly bytes: number; readonly downloads: number; readonly hits: number; readonly retries: number; readonly waited: number; readonly evictions: number };
}

const ROUTES: Record<EpochRoute, string> = {
  resident: 'each batch is a gather over data held whole',
  staged: 'rows are read into host staging, then copied into each batch',
  'in-place': 'the device reads the rows of the page-locked in-memory source where they lie',
  decode: "the image files are read on the host and decoded on the device into each batch (decode: 'gpu')",
};

export function describeLoader(f: LoaderFacts): string {
  const reads = f.workers > 0 ? `${f.workers} reader worker${f.workers === 1 ? '' : 's'}` : 'the main thread';
  const route = f.route === 'staged' ? `${ROUTES.staged} (reads on ${reads})` : ROUTES[f.route];
  const tiers: string[] = [];
  if (f.cache !== undefined) tiers.push(`RAM cache ${bytes(f.cache.held)} held of ${bytes(f.cache.budget)}`);
  if (f.disk !== undefined) tiers.push(`disk stage ${bytes(f.disk.bytes)} of ${bytes(f.disk.budget)}${f.disk.latched ? ' (off after a write failed)' : ''}`);
  if (f.pool !== undefined) tiers.push(`VRAM pool ${f.pool.phase}, ${int(f.pool.rows)} rows in ${bytes(f.pool.bytes)}${f.pool.budget > 0 ? ` of ${bytes(f.pool.budget)}` : ''}`);
  const budgets = [`ramMaxUsage ${f.ramMaxUsage}${f.ramShare !== f.ramMaxUsage ? ` (this rank's share ${+f.ramShare.toFixed(4)})` : ''}`];
  if (f.device !== 'cpu') budgets.push(`vramMaxUsage ${f.vramMaxUsage}`);
  if (f.prefetch !== undefined) budgets.push(`prefetch ${f.prefetch.depth} batches (${f.prefetch.pinned ? 'pinned' : 'adaptive'})`);
  const w = f.world;
  const lines: [string, string][] = [
    ['device', f.device],
    ['mode', `${f.resident ? 'resident' : 'streaming'}: ${route}`],
    ['epoch', `${int(f.picks)} picks (${int(f.datasetLength)} samples × augment ${f.augment}), batch ${int(f.batchSize)}, ${int(f.numBatches)} batches${f.dropLast ? ' (short last batch dropped)' : ''}; ${int(f.epochsRun)} run so far`],
    ['tiers', tiers.length > 0 ? tiers.join('; ') : f.resident ? 'none needed (resident)' : 'none (every read goes to the source)'],
    ['budgets', budgets.join('; ')],
    ...(f.remote !== undefined
      ? [['remote', `${int(f.remote.requests)} requests, ${int(f.remote.downloads)} files downloaded (${bytes(f.remote.bytes)}), ${int(f.remote.hits)} found in the node cache, ${int(f.remote.waited)} waited for another downloader, ${int(f.remote.retries)} retries, ${int(f.remote.evictions)} evictions (main thread)`] as [string, string]]
      : []),
    ['world', w.worldSize > 1 ? `rank ${w.rank} of ${w.worldSize}${w.localRank !== undefined ? ` (local rank ${w.localRank})` : ''}, from ${w.launcher}` : 'one process'],
  ];
  const width = Math.max(...lines.map(([k]) => k.length));
  return lines.map(([k, v]) => `${k.padEnd(width)}  ${v}`).join('\n');
}
