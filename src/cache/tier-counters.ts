// Internal: not exported from the package entry.
// Per-tier figures shared by every thread that reads samples: rows served by the RAM cache, the
// disk stage and the source, and time spent reading the source. The rule: counters only grow;
// the main thread takes differences between snapshots to report an epoch.

const FIELDS = ['ramRows', 'diskRows', 'sourceRows', 'sourceNs'] as const;
export type TierCounterName = (typeof FIELDS)[number];
export type TierSnapshot = Record<TierCounterName, number>;

export class TierCounters {
  /** SharedArrayBuffer-backed; structured-clones into workers as shared memory. */
  readonly cells: BigInt64Array;

  constructor(cells?: BigInt64Array) {
    this.cells = cells ?? new BigInt64Array(new SharedArrayBuffer(FIELDS.length * 8));
  }

  add(name: TierCounterName, amount: number): void {
    Atomics.add(this.cells, FIELDS.indexOf(name), BigInt(Math.round(amount)));
  }

  snapshot(): TierSnapshot {
    const out = {} as TierSnapshot;
    FIELDS.forEach((f, i) => (out[f] = Number(Atomics.load(this.cells, i))));
    return out;
  }
}

export function diffSnapshots(now: TierSnapshot, before: TierSnapshot): TierSnapshot {
  const out = {} as TierSnapshot;
  for (const f of FIELDS) out[f] = now[f] - before[f];
  return out;
}
