// Several nodes on one machine, reading tar shards over s3:// from one Swift server: each simulated
// node is its own node cache folder, each rank its own process with torchrun's environment (RANK,
// WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE). What it asserts: every sample exactly once per epoch
// across all ranks; each shard downloaded once per node, however many ranks read it; a resume onto
// another world size delivers exactly the rest of the epoch; a rank killed mid-download is taken
// over by its restart, and the world still gets every sample once; with a block shuffle, each node
// downloads only its own blocks, opening from the manifest the first ranks published beside the shards.

import assert from 'node:assert/strict';
import { type ChildProcess, spawn } from 'node:child_process';
import { mkdirSync, mkdtempSync, readdirSync, rmSync, writeFileSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { create } from 'tar';
// @ts-expect-error: a JavaScript module of the launcher, without types
import { distCurrent } from '../../bin/dist-current.js';
import { HANG_MS } from '../fixtures.js';
import { startFaultProxy, type FaultProxy } from '../fixtures/servers/fault-proxy.js';
import { createBucket, putObjects, startSwiftS3, type SwiftS3 } from '../fixtures/servers/swift.js';

const BUCKET = 'nodes';
const SHARDS = 6;
const PER_SHARD = 8;
const SAMPLES = SHARDS * PER_SHARD;
const BATCH = 4;

interface RankResult {
  readonly ids: number[];
  readonly state: unknown;
}

describe('remote shards on N nodes × R ranks (torchrun environment, one node cache per node)', { timeout: HANG_MS * 6 }, () => {
  let dir: string;
  let swift: SwiftS3;
  let proxy: FaultProxy;
  let script: string;
  let runner: string[];

  before(async () => {
    dir = mkdtempSync(join(tmpdir(), 'stoker-nodes-'));
    const objects: Record<string, Uint8Array> = {};
    for (let s = 0; s < SHARDS; s++) {
      const src = join(dir, `src-${s}`);
      mkdirSync(src);
      const names: string[] = [];
      for (let k = 0; k < PER_SHARD; k++) {
        const key = String(s * PER_SHARD + k).padStart(6, '0');
        writeFileSync(join(src, `${key}.cls`), String(s * PER_SHARD + k));
        writeFileSync(join(src, `${key}.bin`), new Uint8Array(4096).fill(s * PER_SHARD + k));
        names.push(`${key}.cls`, `${key}.bin`);
      }
      const shard = join(dir, `train-${s}.tar`);
      create({ file: shard, cwd: src, sync: true, portable: true }, names);
      objects[`train-${s}.tar`] = readFileSync(shard);
    }
    swift = await startSwiftS3({ parent: dir });
    await createBucket(swift, BUCKET);
    await putObjects(swift, BUCKET, objects);
    proxy = await startFaultProxy(swift.endpoint);
    // One rank: read one epoch (or `stop` batches of it), print its sample ids, its state and its node cache's counters.
    // Under plain node over dist/ when it is current (CI's npm ci builds it: a rank starts in a fraction of tsx's time), else tsx over src/.
    const dist = distCurrent() as boolean;
    script = join(dir, dist ? 'rank.mjs' : 'rank.mts');
    runner = dist ? [] : ['--import', 'tsx'];
    const entry = JSON.stringify(new URL(dist ? '../../dist/index.js' : '../../src/index.ts', import.meta.url).pathname);
    writeFileSync(script, `
      import { DataLoader, sources } from ${entry};
      const [url, cacheDir, options] = process.argv.slice(2);
      const o = JSON.parse(options);
      const ds = await sources.tarShards(url, { decoders: { bin: 'raw' }, index: 'beside', remote: { dir: cacheDir } });
      const loader = await DataLoader.create(ds, { batchSize: ${BATCH}, seed: 5, workers: 0, mode: 'streaming', sampleCache: false, ...(o.resume ? { resume: o.resume } : {}), ...(o.shuffle ? { shuffle: o.shuffle } : {}) });
      const ids = [];
      let n = 0;
      for await (const b of loader.epoch(0)) {
        ids.push(...b.sampleIds);
        b.release();
        if (++n === o.stop) break;
      }
      const state = loader.state();
      await loader.close();
      await ds.close();
      console.log(JSON.stringify({ ids, state }));
    `);
  });

  after(async () => {
    await Promise.allSettled([proxy?.stop(), swift?.stop()]);
    rmSync(dir, { recursive: true, force: true });
  });

  const env = (rank: number, world: number, localRank: number, localWorld: number) => ({
    ...process.env,
    RANK: String(rank), WORLD_SIZE: String(world), LOCAL_RANK: String(localRank), LOCAL_WORLD_SIZE: String(localWorld),
    AWS_ENDPOINT_URL_S3: proxy.url, AWS_ACCESS_KEY_ID: swift.accessKeyId, AWS_SECRET_ACCESS_KEY: swift.secretAccessKey, AWS_REGION: swift.region,
  });

  function startRank(rank: number, world: number, node: string, localRank: number, localWorld: number, options: object = {}): { child: ChildProcess; done: Promise<RankResult> } {
    const child = spawn(process.execPath, [...runner, script, `s3://${BUCKET}/train-*.tar`, join(dir, node), JSON.stringify(options)], {
      env: env(rank, world, localRank, localWorld), stdio: ['ignore', 'pipe', 'pipe'],
    });
    let out = '';
    let err = '';
    child.stdout!.on('data', (d) => (out += d));
    child.stderr!.on('data', (d) => (err += d));
    // NOTE: waits for the rank's process to exit; the describe's timeout bounds it.
    const done = new Promise<RankResult>((resolve, reject) => {
      child.once('exit', (code, signal) => {
        if (code === 0) resolve(JSON.parse(out.trim().split('\n').at(-1)!) as RankResult);
        else reject(new Error(`rank ${rank} (${node}) exited with ${code ?? signal}: ${err.split('\n').filter((l) => !/Warning|trace-warnings/.test(l)).join('\n')}`));
      });
    });
    return { child, done };
  }

  /** Ranks laid out node by node: `nodes` of `perNode` ranks each, rank = node × perNode + local rank. */
  function world(prefix: string, nodes: number, perNode: number, options: object = {}): Promise<RankResult[]> {
    const w = nodes * perNode;
    return Promise.all(Array.from({ length: w }, (_, r) => startRank(r, w, `${prefix}-${Math.floor(r / perNode)}`, r % perNode, perNode, options).done));
  }

  /** GETs of shard `s` that reached the server (retries none here: no faults injected). */
  const shardGets = (s: number) => proxy.count((r) => r.method === 'GET' && r.path.split('?')[0]!.endsWith(`/train-${s}.tar`));
  const sorted = (ids: number[]) => [...ids].sort((a, b) => a - b);
  const everySampleOnce = Array.from({ length: SAMPLES }, (_, i) => i);

  it('2 nodes × 2 ranks: every sample exactly once across the ranks, each shard downloaded once per node', async () => {
    proxy.reset();
    const ranks = await world('a', 2, 2);
    assert.deepEqual(sorted(ranks.flatMap((r) => r.ids)), everySampleOnce);
    for (let s = 0; s < SHARDS; s++) assert.equal(shardGets(s), 2, `shard ${s}: one GET per node`);
  });

  it('a block shuffle on 2 nodes: the manifest published beside the shards is read, and each node downloads only its own blocks', async () => {
    proxy.reset();
    const ranks = await world('d', 2, 2, { shuffle: { window: 2 } });
    assert.deepEqual(sorted(ranks.flatMap((r) => r.ids)), everySampleOnce);
    const held = (node: string) => readdirSync(join(dir, node), { recursive: true }).map(String).filter((n) => /train-\d\.tar$/.test(n)).map((n) => n.slice(-11)).sort();
    const [d0, d1] = [held('d-0'), held('d-1')];
    // Beyond its own blocks a node holds at most shard 0: the loader's shape probe reads sample 0.
    const own = (h: string[]) => h.filter((f) => f !== 'train-0.tar');
    assert.deepEqual(own(d0).filter((f) => d1.includes(f)), [], `no shard but the probe's downloaded by both nodes: ${d0} / ${d1}`);
    assert.deepEqual([...new Set([...d0, ...d1])].sort(), Array.from({ length: SHARDS }, (_, s) => `train-${s}.tar`));
    for (const h of [d0, d1]) assert.ok(own(h).length <= SHARDS / 2, `a node holds its ${SHARDS / 2} blocks (and the probe's): ${h}`);
    assert.equal(Array.from({ length: SHARDS }, (_, s) => shardGets(s)).reduce((a, b) => a + b, 0), d0.length + d1.length, 'one GET per shard held');
    assert.equal(proxy.count((r) => r.method === 'GET' && /\/\.stoker\/tar-[0-9a-f]{32}\.json$/.test(r.path.split('?')[0]!)), 2, 'each node read the manifest once');
  });

  it('a resume onto another world size (4 ranks on 2 nodes → 2 ranks on 1 node) delivers exactly the rest of the epoch', async () => {
    const first = await world('b', 2, 2, { stop: 1 });
    const states = first.map((r) => JSON.stringify(r.state));
    assert.ok(states.every((s) => s === states[0]), 'every rank saves the same state');
    const rest = await world('b', 1, 2, { resume: first[0]!.state });
    assert.deepEqual(sorted([...first.flatMap((r) => r.ids), ...rest.flatMap((r) => r.ids)]), everySampleOnce);
  });

  it('a rank killed mid-download is recovered: its restart takes the download over, and the world gets every sample once', async () => {
    proxy.reset();
    const node = 'c';
    // The first GET of shard 3 stalls after its headers: whoever downloads it holds the lock when killed.
    proxy.inject({ delayMs: 60_000 }, { times: 1, match: (r) => r.method === 'GET' && r.path.split('?')[0]!.endsWith('/train-3.tar') });
    const ranks = [startRank(0, 2, node, 0, 2), startRank(1, 2, node, 1, 2)];
    const lock = join(dir, node, 's3');
    const holder = (): number | undefined => {
      const find = (d: string): string | undefined => {
        try {
          for (const e of readdirSync(d, { withFileTypes: true })) {
            const p = join(d, e.name);
            if (e.isDirectory()) {
              const hit = find(p);
              if (hit !== undefined) return hit;
            } else if (e.name === '.train-3.tar.stoker.lock') return p;
          }
        } catch {
          return undefined;
        }
        return undefined;
      };
      const p = find(lock);
      if (p === undefined) return undefined;
      try {
        return Number(readFileSync(p, 'utf8').split(' ')[1]);
      } catch {
        return undefined;
      }
    };
    // NOTE: waits (bounded by HANG_MS) for a rank to hold shard 3's lock with its GET stalled at the proxy.
    const t0 = Date.now();
    let pid: number | undefined;
    while ((pid = holder()) === undefined || proxy.count((r) => r.method === 'GET' && r.path.split('?')[0]!.endsWith('/train-3.tar')) === 0) {
      assert.ok(Date.now() - t0 < HANG_MS, 'no rank took the lock of shard 3');
      await new Promise((r) => setTimeout(r, 50));
    }
    const killed = ranks.findIndex((r) => r.child.pid === pid);
    assert.ok(killed >= 0, `the lock's holder ${pid} is one of the ranks`);
    ranks[killed]!.child.kill('SIGKILL');
    await assert.rejects(ranks[killed]!.done);
    const restarted = startRank(killed, 2, node, killed, 2);
    const results = await Promise.all([ranks[1 - killed]!.done, restarted.done]);
    assert.deepEqual(sorted(results.flatMap((r) => r.ids)), everySampleOnce);
    const left = readdirSync(join(dir, node), { recursive: true }).map(String).filter((n) => /\.stoker\.(lock|part)/.test(n));
    assert.deepEqual(left, [], 'no lock or part file left');
  });
});
