// Remote datasets through the node cache (src/remote/, docs/remote.md), against a real HTTP server
// started here on loopback (nginx, as test/remote/ starts it), in one process:
//
// Part 1, throughput: WebDataset tar shards served by nginx, read through `sources.tarShards` +
// DataLoader (one in-order epoch, every sample's bytes touched) — cold (an empty node cache: the
// downloads are in the time), warm (the same cache: one HEAD a shard), and the same shards from the
// local disk — against the ceiling: the raw GET throughput of the same server, every shard fetched
// with `concurrency` GETs in flight and written to a file, as the cache writes them. Ratios: cold and
// warm ÷ ceiling, the ceiling being the slower of the raw GETs and the local-disk epoch (a remote
// epoch can beat neither).
//
// Part 2, eviction: a cache budget of ¼ and ½ of the shards, and an access trace of E epochs that each
// read every shard once in a shuffled order (a shard-order shuffle, as a block shuffle reads). The
// real NodeCache fetches from nginx under each policy: next use (the trace is known: Belady's rule,
// `cache.nextUse`) and least recently used; a figure is the hit rate (shard reads served from the
// cache / all shard reads) and the bytes downloaded.
//
//   npm run bench -- remote [--shards 32] [--shard-mb 4] [--epochs 4] [--quick]

import { createHash } from 'node:crypto';
import { cpSync, mkdirSync, mkdtempSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { open } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { create } from 'tar';
import { DataLoader, sources } from '../src/index.js';
import { NodeCache } from '../src/remote/node-cache.js';
import { Rng } from '../src/sampler/rng.js';
import { startNginx } from '../test/fixtures/servers/nginx.js';
import { fmtFixed, hardwareLine, UsageError } from './util.js';

/** Seconds. */
const now = () => performance.now() / 1000;

const USAGE = 'remote [--shards N] [--shard-mb MB] [--epochs E] [--quick]';
const SAMPLE_BYTES = 64 * 1024;

export async function main(args: readonly string[]): Promise<void> {
  let v: Record<string, string | boolean | undefined>;
  try {
    ({ values: v } = parseArgs({ args: [...args], strict: true, options: { shards: { type: 'string' }, 'shard-mb': { type: 'string' }, epochs: { type: 'string' }, quick: { type: 'boolean' } } }));
  } catch (error) {
    throw new UsageError(`${(error as Error).message}\nusage: ${USAGE}`);
  }
  const quick = v.quick === true;
  const shards = Number(v.shards ?? (quick ? 8 : 32));
  const shardMb = Number(v['shard-mb'] ?? (quick ? 1 : 4));
  const epochs = Number(v.epochs ?? 4);
  if (![shards, shardMb, epochs].every((n) => Number.isInteger(n) && n >= 1)) throw new UsageError(`--shards, --shard-mb and --epochs take integers ≥ 1\nusage: ${USAGE}`);
  const perShard = Math.max(1, Math.floor((shardMb * 2 ** 20) / SAMPLE_BYTES));
  const dir = mkdtempSync(join(tmpdir(), 'stoker-bench-remote-'));
  const data = join(dir, 'data');
  console.log(hardwareLine());
  console.log(`data: ${shards} tar shards × ${perShard} samples of ${SAMPLE_BYTES / 1024} KiB (${((shards * perShard * SAMPLE_BYTES) / 2 ** 20).toFixed(0)} MiB), served by nginx on loopback`);
  writeShards(dir, data, shards, perShard);
  const nginx = await startNginx(data);
  try {
    const pattern = (base: string) => `${base}/train-{${pad(0)}..${pad(shards - 1)}}.tar`;
    const bytes = shards * tarBytes(perShard);

    // Part 1.
    const ceiling = await rawGets(nginx.url, shards, join(dir, 'raw'), 8);
    // The local epoch after one untimed (its tar index built, the code warm), as the remote ones find them.
    await epochOf(await sources.tarShards(pattern(data), { decoders: { bin: 'raw' } }));
    const local = await epochOf(await sources.tarShards(pattern(data), { decoders: { bin: 'raw' } }));
    // The async sources use this process's node cache: here, a fresh folder of the bench's own.
    process.env.STOKER_CACHE_DIR = join(dir, 'cache');
    const t0 = now();
    const cold = await epochOf(await sources.tarShards(pattern(nginx.url), { decoders: { bin: 'raw' } }));
    const coldS = now() - t0;
    const t1 = now();
    const warm = await epochOf(await sources.tarShards(pattern(nginx.url), { decoders: { bin: 'raw' } }));
    const warmS = now() - t1;
    // Another node (or the next job): an empty cache but for the dataset's manifest, so shards come as the plan reaches them.
    process.env.STOKER_CACHE_DIR = join(dir, 'cache-next');
    cpSync(join(dir, 'cache', 'manifests'), join(dir, 'cache-next', 'manifests'), { recursive: true });
    const t2 = now();
    const next = await epochOf(await sources.tarShards(pattern(nginx.url), { decoders: { bin: 'raw' } }));
    const nextS = now() - t2;
    if (cold.digest !== local.digest || warm.digest !== local.digest || next.digest !== local.digest) throw new Error('remote epochs differ from the local one');
    const mbps = (s: number) => bytes / 2 ** 20 / s;
    console.log('\npart 1: one in-order epoch, from making the source to the last batch (downloads included when cold)');
    console.log(`  raw GETs (8 in flight, to files)        ${fmtFixed(mbps(ceiling), 1).padStart(8)} MB/s   the ceiling`);
    console.log(`  local disk, the same shards             ${fmtFixed(mbps(local.seconds), 1).padStart(8)} MB/s   ${fmtFixed(local.samples / local.seconds, 0)} samples/s`);
    console.log(`  remote, cold cache                      ${fmtFixed(mbps(coldS), 1).padStart(8)} MB/s   ${fmtFixed(local.samples / coldS, 0)} samples/s, first batch ${fmtFixed(cold.firstS + (coldS - cold.seconds), 2)} s`);
    console.log(`  remote, cold cache + manifest           ${fmtFixed(mbps(nextS), 1).padStart(8)} MB/s   ${fmtFixed(local.samples / nextS, 0)} samples/s, first batch ${fmtFixed(next.firstS + (nextS - next.seconds), 2)} s`);
    console.log(`  remote, warm cache                      ${fmtFixed(mbps(warmS), 1).padStart(8)} MB/s   ${fmtFixed(local.samples / warmS, 0)} samples/s`);
    // The ceiling of a remote epoch is the slower of the server's GETs and the loader's local epoch.
    const top = Math.max(ceiling, local.seconds);
    console.log(`  cold ÷ ceiling ${fmtFixed(top / coldS, 3)} (first open: every shard indexed before the first batch), cold + manifest ÷ ceiling ${fmtFixed(top / nextS, 3)} (goal ≥ 0.8), warm ÷ ceiling ${fmtFixed(top / warmS, 3)} (goal ≥ 0.9); ceiling = the slower of raw GETs and the local-disk epoch`);

    // Part 2.
    console.log(`\npart 2: ${epochs} epochs, each shard once an epoch in a shuffled order; hit rate = shard reads served from the cache`);
    const results: Record<string, unknown>[] = [];
    for (const share of [0.25, 0.5]) {
      const trace = shardTrace(shards, epochs);
      const budget = Math.floor(share * shards * tarBytes(perShard)) + 1024;
      const row: Record<string, number> = {};
      for (const policy of ['next-use', 'lru'] as const) {
        const c = new NodeCache({ dir: join(dir, `evict-${share}-${policy}`), bytes: budget });
        let at = 0;
        if (policy === 'next-use') {
          // The trace is known: a shard's next use is its next position in it after `at`.
          c.nextUse = (p) => {
            const s = Number(/train-(\d+)\.tar$/.exec(p)?.[1]);
            const k = trace.indexOf(s, at + 1);
            return k < 0 ? Infinity : k;
          };
        }
        for (at = 0; at < trace.length; at++) await c.ensure(`${nginx.url}/train-${pad(trace[at]!)}.tar`);
        row[policy] = c.counters.hits / trace.length;
        row[`${policy}MB`] = c.counters.bytes / 2 ** 20;
        await c.close();
      }
      console.log(`  cache ${share * 100}% of the data: next use ${fmtFixed(row['next-use']! * 100, 1)} % hits (${fmtFixed(row['next-useMB']!, 0)} MB fetched), LRU ${fmtFixed(row.lru! * 100, 1)} % (${fmtFixed(row.lruMB!, 0)} MB); next use ÷ LRU bytes fetched ${fmtFixed(row['next-useMB']! / row.lruMB!, 3)}`);
      results.push({ share, ...row });
    }
    console.log(JSON.stringify({ bench: 'remote', shards, perShard, sampleBytes: SAMPLE_BYTES, ceilingS: ceiling, localS: local.seconds, coldS, coldManifestS: nextS, warmS, eviction: results }));
  } finally {
    await nginx.stop();
    rmSync(dir, { recursive: true, force: true });
  }
}

const pad = (s: number) => String(s).padStart(4, '0');

/** Bytes of one shard (every shard holds as many samples of one size: measured on the first). */
let shardBytes = 0;
const tarBytes = (_perShard: number) => shardBytes;

function writeShards(dir: string, data: string, shards: number, perShard: number): void {
  mkdirSync(data, { recursive: true });
  const src = join(dir, 'src');
  mkdirSync(src, { recursive: true });
  const block = new Uint8Array(SAMPLE_BYTES);
  for (let s = 0; s < shards; s++) {
    const names: string[] = [];
    for (let k = 0; k < perShard; k++) {
      const id = s * perShard + k;
      const key = String(id).padStart(8, '0');
      for (let j = 0; j < block.length; j += 4) new DataView(block.buffer).setUint32(j, Math.imul(id + 1, 2654435761) ^ j, true);
      writeFileSync(join(src, `${key}.bin`), block);
      writeFileSync(join(src, `${key}.cls`), String(id % 1000));
      names.push(`${key}.bin`, `${key}.cls`);
    }
    const shard = join(data, `train-${pad(s)}.tar`);
    create({ file: shard, cwd: src, sync: true, portable: true }, names);
    rmSync(src, { recursive: true, force: true });
    mkdirSync(src);
    if (s === 0) shardBytes = statSync(shard).size;
  }
}

/** Fetch every shard with `lanes` GETs in flight, each body streamed into a file: seconds. */
async function rawGets(base: string, shards: number, dir: string, lanes: number): Promise<number> {
  mkdirSync(dir, { recursive: true });
  let next = 0;
  const t0 = now();
  await Promise.all(
    Array.from({ length: lanes }, async () => {
      while (next < shards) {
        const s = next++;
        const r = await fetch(`${base}/train-${pad(s)}.tar`);
        const f = await open(join(dir, `${s}.tar`), 'w');
        let at = 0;
        for await (const chunk of r.body as unknown as AsyncIterable<Uint8Array>) {
          await f.write(chunk, 0, chunk.length, at);
          at += chunk.length;
        }
        await f.close();
      }
    }),
  );
  return now() - t0;
}

/** One in-order epoch: seconds from the loader's create to its last batch, the first batch's seconds, and a digest of every byte. */
async function epochOf(ds: Awaited<ReturnType<typeof sources.tarShards>>): Promise<{ seconds: number; firstS: number; samples: number; digest: string }> {
  const t0 = now();
  const loader = await DataLoader.create(ds, { batchSize: 64, shuffle: false, mode: 'streaming', sampleCache: false });
  const h = createHash('sha256');
  let first = 0;
  let samples = 0;
  for await (const b of loader.epoch(0)) {
    if (first === 0) first = now() - t0;
    const bin = b.get('bin') as { data: Uint8Array };
    h.update(bin.data);
    samples += b.sampleIds.length;
    b.release();
  }
  const seconds = now() - t0;
  await loader.close();
  return { seconds, firstS: first, samples, digest: h.digest('hex') };
}

/** E epochs of every shard once, each epoch's order a permutation drawn from the loader's RNG. */
function shardTrace(shards: number, epochs: number): number[] {
  const out: number[] = [];
  for (let e = 0; e < epochs; e++) {
    const rng = Rng.seed(1000 + e);
    const order = Array.from({ length: shards }, (_, i) => i);
    for (let i = shards - 1; i > 0; i--) {
      const j = rng.below(i + 1);
      [order[i], order[j]] = [order[j]!, order[i]!];
    }
    out.push(...order);
  }
  return out;
}
