// Sharding over ranks, exact resume and elastic world sizes: in-process (one loader per simulated
// rank, explicit rank/worldSize), from each launcher's environment variables, and end to end under
// a real launcher (Open MPI's mpirun, 2–4 processes) running examples/ranks.ts.

// @ts-expect-error: a JavaScript module of the launcher, without types
import { distCurrent } from '../bin/dist-current.js';
import assert from 'node:assert/strict';
import { execFile, execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import ts from 'typescript';
import { promisify } from 'node:util';
import { DataLoader, type LoaderOptions, LoaderError, type Tensor, sources } from '../src/index.js';
import { detectLaunch, rankDevice, resolveWorld } from '../src/distributed/launch.js';
import { consumedPicks, shardPicks } from '../src/distributed/shard.js';
import { CHILD_MS, SUITE_MS, range, sorted } from './fixtures.js';

function labelled(n: number) {
  return sources.arrays({ label: Int32Array.from(range(n)) });
}

/** Sample ids each rank receives in epoch `epoch` (labels read from the content). */
async function rankIds(n: number, world: number, options: Omit<LoaderOptions, 'rank' | 'worldSize'>, epoch = 0, stopAfter?: number) {
  const out: number[][] = [];
  const batchCounts: number[] = [];
  const states = [];
  for (let rank = 0; rank < world; rank++) {
    const loader = await DataLoader.create(labelled(n), { mode: 'streaming', ...options, rank, worldSize: world });
    const ids: number[] = [];
    let batches = 0;
    const expected = loader.epoch(epoch).length;
    for await (const b of loader.epoch(epoch)) {
      ids.push(...((b.get('label') as Tensor).data as Int32Array));
      batches++;
      if (batches === stopAfter) break;
    }
    if (stopAfter === undefined) assert.equal(batches, expected, `rank ${rank}: epoch length`);
    out.push(ids);
    batchCounts.push(batches);
    states.push(loader.state());
    await loader.close();
  }
  return { ids: out, batchCounts, states };
}

function counts(ids: readonly number[]): Map<number, number> {
  const m = new Map<number, number>();
  for (const id of ids) m.set(id, (m.get(id) ?? 0) + 1);
  return m;
}

describe('sharding', () => {
  for (const [n, world, batchSize] of [[100, 2, 8], [103, 3, 8], [97, 4, 5], [10, 4, 4], [64, 4, 16]] as const) {
    it(`'drop': ${world} ranks of ${n} samples (batch ${batchSize}) take disjoint shares, equal batch counts, at most once each`, async () => {
      const { ids, batchCounts } = await rankIds(n, world, { batchSize, seed: 5, shards: 'drop', dropLast: false });
      assert.equal(new Set(batchCounts).size, 1, `batch counts ${batchCounts}`);
      const all = ids.flat();
      assert.equal(new Set(all).size, all.length, 'no pick twice');
      assert.equal(all.length, Math.floor(n / world) * world, 'only the last n mod world picks are left out');
      ids.forEach((r) => assert.equal(r.length, Math.floor(n / world)));
    });

    it(`'pad': ${world} ranks of ${n} samples (batch ${batchSize}) cover every pick, padding by wrap-around`, async () => {
      const { ids, batchCounts } = await rankIds(n, world, { batchSize, seed: 5, shards: 'pad', dropLast: false });
      assert.equal(new Set(batchCounts).size, 1);
      const c = counts(ids.flat());
      assert.deepEqual(sorted([...c.keys()]), range(n), 'every pick at least once');
      const padding = Math.ceil(n / world) * world - n;
      const twice = [...c.values()].filter((v) => v === 2).length;
      assert.equal(twice, padding, 'exactly ⌈n/W⌉·W − n picks are delivered twice');
      assert.ok([...c.values()].every((v) => v <= 2));
      // The padding is the start of the epoch's order again: the solo loader's first picks.
      const solo = (await rankIds(n, 1, { batchSize, seed: 5 })).ids[0]!;
      assert.deepEqual(sorted([...c.entries()].filter(([, v]) => v === 2).map(([k]) => k)), sorted(solo.slice(0, padding)));
    });
  }

  it('ranks share one global order: global step s is the solo order’s picks [s·B·W, (s+1)·B·W)', async () => {
    const solo = (await rankIds(96, 1, { batchSize: 8, seed: 9 })).ids[0]!;
    const { ids } = await rankIds(96, 3, { batchSize: 8, seed: 9 });
    for (let s = 0; s < 4; s++) {
      assert.deepEqual(ids.flatMap((r) => r.slice(s * 8, (s + 1) * 8)), solo.slice(s * 24, (s + 1) * 24));
    }
  });

  it('dropLast drops the short tail step in every rank alike', async () => {
    const { ids, batchCounts } = await rankIds(50, 2, { batchSize: 8, seed: 1, dropLast: true, shards: 'drop' });
    assert.deepEqual(batchCounts, [3, 3]);
    assert.deepEqual(ids.map((r) => r.length), [24, 24]);
  });

  it('a rank with nothing left to read gets an empty epoch, not an error', async () => {
    const picks = shardPicks(Uint32Array.from(range(3)), { rank: 3, worldSize: 4, batchSize: 2, position: 0, shards: 'drop' });
    assert.equal(picks.length, 0);
  });
});

describe('resume', () => {
  it('after k batches continues with exactly the rest of the epoch, then the next epoch whole', async () => {
    const opts = { batchSize: 7, seed: 11, augment: 2, shuffle: true, dropLast: false } as const;
    const full = await DataLoader.create(labelled(60), { ...opts, mode: 'streaming' });
    const epoch1: number[] = [];
    for await (const b of full.epoch(1)) epoch1.push(...(b.get('label').data as Int32Array));
    const epoch2: number[] = [];
    for await (const b of full.epoch(2)) epoch2.push(...(b.get('label').data as Int32Array));
    await full.close();

    const first = await DataLoader.create(labelled(60), { ...opts, mode: 'streaming' });
    for await (const _ of first.epoch(0));
    const before: number[] = [];
    let k = 0;
    for await (const b of first.epoch(1)) {
      before.push(...(b.get('label').data as Int32Array));
      if (++k === 5) break;
    }
    const state = JSON.parse(JSON.stringify(first.state()));
    assert.deepEqual({ epoch: state.epoch, position: state.position }, { epoch: 1, position: 35 });
    await first.close();

    for (const mode of ['streaming', 'resident'] as const) {
      const second = await DataLoader.create(labelled(60), { ...opts, mode, resume: state });
      assert.equal(second.epoch(1).length, Math.ceil((120 - 35) / 7));
      const after: number[] = [];
      for await (const b of second.epoch(1)) after.push(...(b.get('label').data as Int32Array));
      assert.deepEqual([...before, ...after], epoch1, `${mode}: before + after = the uninterrupted epoch`);
      assert.deepEqual(second.state(), { ...state, epoch: 2, position: 0 });
      const next: number[] = [];
      for await (const b of second.epoch(2)) next.push(...(b.get('label').data as Int32Array));
      assert.deepEqual(next, epoch2);
      await second.close();
    }
  });

  it('state() before any epoch, and after a whole epoch, points at the next one', async () => {
    const loader = await DataLoader.create(labelled(20), { batchSize: 4, mode: 'streaming' });
    assert.equal(loader.state().epoch, 0);
    assert.equal(loader.state().position, 0);
    for await (const _ of loader.epoch(0));
    assert.deepEqual([loader.state().epoch, loader.state().position], [1, 0]);
    await loader.close();
  });

  it('refuses a state that does not describe this order, with the field named', async () => {
    const loader = await DataLoader.create(labelled(30), { batchSize: 4, seed: 3, mode: 'streaming' });
    let k = 0;
    for await (const _ of loader.epoch(0)) if (++k === 2) break;
    const state = loader.state();
    await loader.close();
    const rejects = (ds: ReturnType<typeof labelled>, o: Partial<LoaderOptions>, re: RegExp) =>
      assert.rejects(DataLoader.create(ds, { batchSize: 4, seed: 3, mode: 'streaming', resume: state, ...o }), (e: unknown) => e instanceof LoaderError && e.code === 'ERR_RESUME_MISMATCH' && re.test(e.message));
    await rejects(labelled(30), { seed: 4 }, /seed "3", but this loader has "4"/);
    await rejects(labelled(31), {}, /dataset length 30, but this loader has 31/);
    await rejects(labelled(30), { augment: 2 }, /augment 1, but this loader has 2/);
    await rejects(labelled(30), { shuffle: false }, /order .*"random", but this loader has "sequential"/);
    await rejects(labelled(30), { resume: { ...state, position: 1e9 } }, /position/);
    const ok = await DataLoader.create(labelled(30), { batchSize: 4, seed: 3, mode: 'streaming', resume: state });
    await assert.rejects(ok.epoch(3)[Symbol.asyncIterator]().next(), (e: unknown) => e instanceof LoaderError && e.code === 'ERR_RESUME_MISMATCH' && /first epoch must be 0, not 3/.test(e.message));
    await ok.close();
  });

  for (const [from, to] of [[4, 2], [2, 3], [3, 1], [1, 4]] as const) {
    it(`elastic ${from} → ${to} ranks: before + after deliver each pick of the epoch exactly once`, async () => {
      // 96 picks, batch 4: every world size here divides what is left, so 'drop' loses nothing.
      const opts = { batchSize: 4, seed: 21, shards: 'drop', dropLast: false } as const;
      const before = await rankIds(96, from, opts, 0, 3);
      const state = before.states[0]!;
      before.states.forEach((s) => assert.deepEqual(s, state, 'every rank saves the same state'));
      assert.equal(state.position, 3 * 4 * from);
      const after = await rankIds(96, to, { ...opts, resume: state }, 0);
      assert.equal(new Set(after.batchCounts).size, 1);
      assert.deepEqual(sorted([...before.ids.flat(), ...after.ids.flat()]), range(96));
      // And with 'pad' on a rest that does not divide: every pick at least once, duplicates only padding.
      const padded = await rankIds(97, to, { ...opts, shards: 'pad', resume: { ...state, datasetLength: 97, picks: 97 } }, 0);
      const c = counts([...(await rankIds(97, from, { ...opts, shards: 'pad' }, 0, 3)).ids.flat(), ...padded.ids.flat()]);
      assert.deepEqual(sorted([...c.keys()]), range(97));
      assert.equal([...c.values()].filter((v) => v > 1).length, Math.ceil((97 - 12 * from) / to) * to - (97 - 12 * from));
    });
  }

  describe('with a block shuffle', () => {
    /** A concat of in-memory parts of these sizes: its members are the block shuffle's blocks. */
    const parted = (sizes: readonly number[]) => {
      const starts = sizes.map((_, k) => sizes.slice(0, k).reduce((a, b) => a + b, 0));
      return sources.concat(sizes.map((n, k) => sources.arrays({ label: Int32Array.from(range(n), (i) => starts[k]! + i) })));
    };
    const sizes = [9, 14, 5, 12, 10, 8, 13, 7, 10, 8];
    /**
     * Each rank of a world in turn over `parted(parts)`: its labels of `epoch` (the first `stopAfter`
     * batches) and its state after. With `perNode`, the world comes from torchrun's variables
     * (LOCAL_WORLD_SIZE = perNode: the block shuffle deals blocks per node), else from the options.
     */
    const rankEpochs = async (parts: readonly number[], world: number, o: Partial<LoaderOptions> & { batchSize: number }, epoch: number, stopAfter?: number, perNode?: number) => {
      const ids: number[][] = [];
      const states = [];
      const saved = { ...process.env };
      try {
        for (let rank = 0; rank < world; rank++) {
          if (perNode !== undefined) Object.assign(process.env, { RANK: String(rank), WORLD_SIZE: String(world), LOCAL_RANK: String(rank % perNode), LOCAL_WORLD_SIZE: String(perNode) });
          const loader = await DataLoader.create(parted(parts), { mode: 'streaming', ...o, ...(perNode === undefined ? { rank, worldSize: world } : {}) });
          const got: number[] = [];
          let k = 0;
          for await (const b of loader.epoch(epoch)) {
            got.push(...((b.get('label') as Tensor).data as Int32Array));
            if (++k === stopAfter) break;
          }
          ids.push(got);
          states.push(loader.state());
          await loader.close();
        }
      } finally {
        for (const k of ['RANK', 'WORLD_SIZE', 'LOCAL_RANK', 'LOCAL_WORLD_SIZE']) if (saved[k] === undefined) delete process.env[k]; else process.env[k] = saved[k];
      }
      return { ids, states };
    };

    for (const shuffle of [{ block: 10, window: 3 }, { within: false }, 'block'] as const) {
      it(`stop mid-epoch at 2 ranks, resume at 3: every sample exactly once (shuffle ${JSON.stringify(shuffle)}, augment 2)`, async () => {
        // 96 samples × augment 2 = 192 picks, batch 4: 3 steps of 2 ranks leave 168 = 14 steps of 3 ranks, so 'drop' loses nothing.
        const opts = { batchSize: 4, seed: 21, shards: 'drop', dropLast: false, shuffle, augment: 2 } as const;
        const ids = (world: number, o: Partial<LoaderOptions>, stopAfter?: number) => rankEpochs(sizes, world, { ...opts, ...o }, 1, stopAfter);
        const whole = await ids(1, {});
        const before = await ids(2, {}, 3);
        const state = JSON.parse(JSON.stringify(before.states[0]));
        assert.deepEqual(before.states[1], before.states[0]);
        assert.equal(state.order, 'block');
        assert.equal(state.position, 3 * 4 * 2);
        const after = await ids(3, { resume: state });
        const all = [...before.ids.flat(), ...after.ids.flat()];
        assert.deepEqual(sorted(all), sorted([...range(96), ...range(96)]), 'each sample twice (augment 2), each pick once');
        assert.deepEqual(sorted(all), sorted(whole.ids[0]!), 'the same picks as the uninterrupted epoch');
      });
    }

    it('blocks per node: 2 nodes × 2 ranks (LOCAL_WORLD_SIZE) read disjoint blocks, every sample once; a resume onto 1 node × 3 ranks keeps the saved layout, exactly', async () => {
      // 8 blocks of 12: two streams of 4 blocks (48 picks), interleaved by chunks of batch 3 × 2 ranks.
      const blocks = [12, 12, 12, 12, 12, 12, 12, 12];
      const launch = (world: number, perNode: number, o: Partial<LoaderOptions>, stopAfter?: number) =>
        rankEpochs(blocks, world, { batchSize: 3, seed: 4, shards: 'drop', shuffle: { window: 2 }, ...o }, 2, stopAfter, perNode);
      const whole = await launch(4, 2, {});
      assert.deepEqual(sorted(whole.ids.flat()), range(96));
      const blocksOf = (ids: number[]) => new Set(ids.map((i) => Math.floor(i / 12)));
      const node0 = blocksOf([...whole.ids[0]!, ...whole.ids[1]!]);
      const node1 = blocksOf([...whole.ids[2]!, ...whole.ids[3]!]);
      assert.equal(node0.size, 4, `node 0 reads 4 blocks: ${[...node0]}`);
      assert.equal(node1.size, 4, `node 1 reads 4 blocks: ${[...node1]}`);
      assert.deepEqual([...node0].filter((b) => node1.has(b)), [], 'no block read by both nodes');
      const before = await launch(4, 2, {}, 2);
      const state = JSON.parse(JSON.stringify(before.states[0]));
      assert.deepEqual([state.block.streams, state.block.chunk], [2, 6]);
      const after = await launch(3, 3, { resume: state });
      assert.deepEqual(sorted([...before.ids.flat(), ...after.ids.flat()]), range(96), 'the rest of the same epoch, each sample once');
      assert.deepEqual(sorted(before.ids.flat()), sorted(whole.ids.map((r) => r.slice(0, 6)).flat()), 'the first two steps are the uninterrupted ones');
    });

    it('refuses a resume with another shuffle, naming the block shape', async () => {
      const loader = await DataLoader.create(parted(sizes), { batchSize: 4, seed: 3, mode: 'streaming', shuffle: { window: 4 } });
      let k = 0;
      for await (const _ of loader.epoch(0)) if (++k === 2) break;
      const state = loader.state();
      await loader.close();
      assert.deepEqual({ ...state.block, bounds: undefined }, { blocks: 10, bounds: undefined, window: 4, within: true, streams: 1, chunk: 1 });
      const rejects = (o: Partial<LoaderOptions>, re: RegExp, ds = parted(sizes)) =>
        assert.rejects(DataLoader.create(ds, { batchSize: 4, seed: 3, mode: 'streaming', resume: state, ...o }), (e: unknown) => e instanceof LoaderError && e.code === 'ERR_RESUME_MISMATCH' && re.test(e.message));
      await rejects({ shuffle: true }, /order .*"block", but this loader has "random"/);
      await rejects({ shuffle: { window: 5 } }, /block shuffle of 10 blocks .*window 4, within true, but this loader's is 10 blocks .*window 5/);
      await rejects({ shuffle: { within: false } }, /within true, but this loader's is .*within false/);
      await rejects({ shuffle: { block: 10, window: 4 } }, /block shuffle of 10 blocks \(bounds ([0-9a-f]{8})\), window 4, within true, but this loader's is 10 blocks \(bounds (?!\1)/);
      await rejects({ shuffle: { window: 4 } }, /block shuffle of 10 blocks/, parted([14, 9, 5, 12, 10, 8, 13, 7, 10, 8]));
      const ok = await DataLoader.create(parted(sizes), { batchSize: 4, seed: 3, mode: 'streaming', shuffle: { window: 4, block: 'parts' }, resume: state });
      await ok.close();
    });
  });

  it('consumedPicks: k steps of B·W picks, then the tail step', () => {
    const spec = { rank: 0, worldSize: 3, batchSize: 4, position: 5, shards: 'pad' } as const;
    assert.equal(consumedPicks(50, spec, 2), 24);
    // 45 left → 15 per rank = 3 full steps + a tail of 3 per rank.
    assert.equal(consumedPicks(50, spec, 4), 45);
  });
});

describe('per-rank tiers', () => {
  it('ranks on one host split the RAM share: each rank budgets ramMaxUsage / local world size for its cache', async () => {
    const ds = { length: 64, get: (i: number) => ({ y: Int32Array.of(i) }) };
    const budget = async () => {
      const loader = await DataLoader.create(ds, { batchSize: 8, mode: 'streaming', workers: 0, ramMaxUsage: 0.4 });
      for await (const _ of loader.epoch(0));
      const bytes = loader.stats().epochs[0]!.cacheBudgetBytes;
      await loader.close();
      return bytes;
    };
    const alone = await budget();
    const saved = { ...process.env };
    Object.assign(process.env, { RANK: '1', WORLD_SIZE: '4', LOCAL_RANK: '1', LOCAL_WORLD_SIZE: '4' });
    try {
      const shared = await budget();
      assert.ok(alone > 0);
      assert.ok(Math.abs(shared / alone - 0.25) < 0.05, `per-rank budget ${shared} vs ${alone} alone`);
    } finally {
      for (const k of ['RANK', 'WORLD_SIZE', 'LOCAL_RANK', 'LOCAL_WORLD_SIZE']) if (saved[k] === undefined) delete process.env[k];
    }
  });
});

describe('launch environment', () => {
  it('reads torchrun, Open MPI, MPICH and SLURM variables', () => {
    assert.deepEqual(detectLaunch({ RANK: '3', WORLD_SIZE: '8', LOCAL_RANK: '1', LOCAL_WORLD_SIZE: '2' }), { rank: 3, worldSize: 8, localRank: 1, localWorldSize: 2, launcher: 'torchrun' });
    assert.deepEqual(detectLaunch({ OMPI_COMM_WORLD_RANK: '1', OMPI_COMM_WORLD_SIZE: '4', OMPI_COMM_WORLD_LOCAL_RANK: '1', OMPI_COMM_WORLD_LOCAL_SIZE: '2' }), { rank: 1, worldSize: 4, localRank: 1, localWorldSize: 2, launcher: 'openmpi' });
    assert.deepEqual(detectLaunch({ PMI_RANK: '2', PMI_SIZE: '3' }), { rank: 2, worldSize: 3, localRank: undefined, localWorldSize: undefined, launcher: 'mpich' });
    assert.deepEqual(detectLaunch({ SLURM_PROCID: '5', SLURM_NTASKS: '6', SLURM_LOCALID: '1', SLURM_NTASKS_PER_NODE: '2(x3)' }), { rank: 5, worldSize: 6, localRank: 1, localWorldSize: undefined, launcher: 'slurm' });
    assert.equal(detectLaunch({ PATH: '/bin' }), undefined);
  });

  it('prefers the innermost launcher: torchrun started by srun describes the process', () => {
    const env = { SLURM_PROCID: '0', SLURM_NTASKS: '2', SLURM_LOCALID: '0', RANK: '5', WORLD_SIZE: '16', LOCAL_RANK: '5' };
    assert.equal(detectLaunch(env)?.launcher, 'torchrun');
    assert.equal(detectLaunch(env)?.rank, 5);
  });

  const bad: [string, Record<string, string>, RegExp][] = [
    ['partial torchrun', { RANK: '1' }, /torchrun environment is partial: RANK=1 is set but WORLD_SIZE is not/],
    ['only a local rank', { LOCAL_RANK: '0' }, /RANK and WORLD_SIZE are not/],
    ['rank beyond the world', { OMPI_COMM_WORLD_RANK: '4', OMPI_COMM_WORLD_SIZE: '4' }, /OMPI_COMM_WORLD_RANK=4 is not below OMPI_COMM_WORLD_SIZE=4/],
    ['local rank beyond the local size', { RANK: '1', WORLD_SIZE: '4', LOCAL_RANK: '2', LOCAL_WORLD_SIZE: '2' }, /LOCAL_RANK=2 is not below LOCAL_WORLD_SIZE=2/],
    ['garbage', { PMI_RANK: 'one', PMI_SIZE: '2' }, /PMI_RANK="one" must be an integer/],
    ['zero world', { SLURM_PROCID: '0', SLURM_NTASKS: '0' }, /SLURM_NTASKS="0" must be an integer ≥ 1/],
  ];
  for (const [name, env, re] of bad) {
    it(`refuses ${name} with a typed error naming the variables`, () => {
      assert.throws(() => detectLaunch(env), (e: unknown) => e instanceof LoaderError && e.code === 'ERR_LAUNCH_ENV' && re.test(e.message));
    });
  }

  it('explicit options must agree with the launcher; cuda means cuda:<localRank>', () => {
    const env = { RANK: '1', WORLD_SIZE: '2', LOCAL_RANK: '1', LOCAL_WORLD_SIZE: '2' };
    assert.equal(resolveWorld({ rank: 1, worldSize: 2 }, env).localRank, 1);
    assert.throws(() => resolveWorld({ rank: 0, worldSize: 2 }, env), /options say rank 0 of 2 but the torchrun launcher says rank 1 of 2/);
    assert.throws(() => resolveWorld({ localRank: 0 }, env), /localRank=0 but the torchrun launcher says local rank 1/);
    assert.equal(rankDevice('cuda', resolveWorld({}, env)), 'cuda:1');
    assert.equal(rankDevice('cuda:0', resolveWorld({}, env)), 'cuda:0');
    assert.equal(rankDevice('cuda', resolveWorld({}, {})), 'cuda');
    assert.throws(() => rankDevice('cuda', resolveWorld({}, { PMI_RANK: '0', PMI_SIZE: '2' })), /needs this rank's local rank.*mpich/);
    assert.deepEqual(resolveWorld({}, {}), { rank: 0, worldSize: 1, localRank: undefined, localWorldSize: undefined, launcher: 'single' });
  });
});

// End to end under Open MPI. CI installs openmpi-bin (.ci/run); elsewhere the suite skips these.
const mpirun = (() => {
  try {
    execFileSync('mpirun', ['--version'], { stdio: 'ignore' });
    return 'mpirun';
  } catch {
    return undefined;
  }
})();
const run = promisify(execFile);
const EXAMPLE = new URL('../examples/ranks.ts', import.meta.url).pathname;

/**
 * How each rank starts: `node --import tsx examples/ranks.ts`, or, when dist/ is current (as CI's
 * `npm ci` builds it), the example compiled here (types erased) over dist/ under plain node: the
 * same program over the same library, without tsx compiling the sources in every rank (seconds of
 * CPU each on the 2-core VM; 20 ranks start here).
 */
let rankCommand: string[] = ['--import', 'tsx', EXAMPLE];
let compiledDir: string | undefined;

function compileExample(): void {
  if (!(distCurrent() as boolean)) return;
  const source = readFileSync(EXAMPLE, 'utf8');
  const from = "from '../src/index.js'";
  assert.ok(source.includes(from), `examples/ranks.ts imports ${from}`);
  const dist = new URL('../dist/index.js', import.meta.url).href;
  const js = ts.transpileModule(source.replace(from, `from ${JSON.stringify(dist)}`), {
    fileName: EXAMPLE, compilerOptions: { target: ts.ScriptTarget.ES2022, module: ts.ModuleKind.ESNext, sourceMap: false },
  }).outputText;
  compiledDir = mkdtempSync(join(tmpdir(), 'stoker-ranks-'));
  const file = join(compiledDir, 'ranks.mjs');
  writeFileSync(file, js);
  rankCommand = [file];
}

async function launch(np: number, args: string[]): Promise<{ ids: number[][][]; lines: { rank: number; worldSize: number; launcher: string }[] }> {
  const out = mkdtempSync(join(tmpdir(), 'stoker-mpi-'));
  try {
    const { stdout } = await run(mpirun!, ['--allow-run-as-root', '--oversubscribe', '-np', String(np), process.execPath, ...rankCommand, '--out', out, ...args], { timeout: CHILD_MS });
    const lines = stdout.trim().split('\n').map((l) => JSON.parse(l));
    const ids = range(np).map((r) => JSON.parse(readFileSync(join(out, `rank-${r}.json`), 'utf8')).epochs as number[][]);
    return { ids, lines };
  } finally {
    rmSync(out, { recursive: true, force: true });
  }
}

describe('under mpirun', { skip: mpirun === undefined ? 'mpirun not installed (apt-get install openmpi-bin)' : false, timeout: SUITE_MS }, () => {
  before(compileExample);
  after(() => {
    if (compiledDir !== undefined) rmSync(compiledDir, { recursive: true, force: true });
  });
  it("3 ranks, 'drop': the delivered ids of all ranks partition each epoch (minus n mod 3)", async () => {
    const { ids, lines } = await launch(3, ['--samples', '1000', '--batch', '32', '--shards', 'drop', '--epochs', '2']);
    assert.deepEqual(sorted(lines.map((l) => l.rank)), [0, 1, 2]);
    assert.ok(lines.every((l) => l.worldSize === 3 && l.launcher === 'openmpi'));
    for (let e = 0; e < 2; e++) {
      const all = ids.flatMap((r) => r[e]!);
      assert.equal(all.length, 999);
      assert.equal(new Set(all).size, 999);
    }
    assert.notDeepEqual(ids[0]![0], ids[0]![1], 'epochs differ');
  });

  it("2 ranks, 'pad': every sample at least once; resume after 5 batches delivers exactly the rest", async () => {
    const full = await launch(2, ['--samples', '999', '--batch', '16', '--epochs', '1']);
    const c = counts(full.ids.flatMap((r) => r[0]!));
    assert.deepEqual(sorted([...c.keys()]), range(999));
    assert.equal([...c.values()].filter((v) => v === 2).length, 1);

    const dir = mkdtempSync(join(tmpdir(), 'stoker-state-'));
    const stateFile = join(dir, 'state.json');
    const before = await launch(2, ['--samples', '999', '--batch', '16', '--epochs', '1', '--stop-after', '5', '--state', stateFile]);
    const after = await launch(2, ['--samples', '999', '--batch', '16', '--epochs', '1', '--resume', stateFile]);
    rmSync(dir, { recursive: true, force: true });
    for (let r = 0; r < 2; r++) assert.deepEqual([...before.ids[r]![0]!, ...after.ids[r]![0]!], full.ids[r]![0], `rank ${r}: before + after = uninterrupted`);
  });

  for (const [from, to] of [[4, 2], [2, 3]] as const) {
    it(`elastic ${from} → ${to} processes: each remaining pick exactly once`, async () => {
      const dir = mkdtempSync(join(tmpdir(), 'stoker-state-'));
      const stateFile = join(dir, 'state.json');
      // 1160 picks: what is left after 4 steps (1000 after 4 × 10 × 4, 1080 after 4 × 10 × 2) divides over the new world, so 'drop' loses nothing.
      const args = ['--samples', '1160', '--batch', '10', '--shards', 'drop', '--epochs', '1'];
      const before = await launch(from, [...args, '--stop-after', '4', '--state', stateFile]);
      const after = await launch(to, [...args, '--resume', stateFile]);
      rmSync(dir, { recursive: true, force: true });
      const all = [...before.ids.flatMap((r) => r[0]!), ...after.ids.flatMap((r) => r[0]!)];
      assert.deepEqual(sorted(all), range(1160));
    });
  }
});
