// Remote datasets (src/remote/, docs/remote.md) against real servers started here on loopback:
// OpenStack Swift with its S3 layer (SigV4, ranges, paged listings) and nginx (plain HTTP ranges),
// with a fault-injecting proxy in front for the retry paths. What it asserts: a tar-shard set, an
// Arrow file, a JSONL file and an image folder read remotely give the same batches as the local
// copies; each object is downloaded once per node however many processes want it, and a downloader
// killed mid-file is taken over; throttling, resets and cut bodies are retried to the same bytes,
// refusals fail at once naming the fix; a changed object is fetched again; eviction under a budget
// goes by next use.

import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { tableFromArrays, tableToIPC } from 'apache-arrow';
import sharp from 'sharp';
import { create } from 'tar';
import { DataLoader, LoaderError, sources, type AnyDataset } from '../../src/index.js';
import { openPath } from '../../src/dataset/open-path.js';
import { NodeCache } from '../../src/remote/node-cache.js';
import { remoteFiles } from '../../src/remote/remote.js';
import { HANG_MS } from '../fixtures.js';
import { startFaultProxy, type FaultProxy } from '../fixtures/servers/fault-proxy.js';
import { startNginx, type Nginx } from '../fixtures/servers/nginx.js';
import { createBucket, putObjects, startSwiftS3, type SwiftS3 } from '../fixtures/servers/swift.js';

const BUCKET = 'data';
const SHARDS = 3;
const PER_SHARD = 5;
const TAR = { decoders: { bin: 'raw' } } as const;
/** A request's path without its query (the SDK adds `?x-id=GetObject`). */
const pathOf = (r: { path: string }) => r.path.split('?')[0]!;

/** Every batch of one in-order epoch, as a hash of each field's bytes in batch order. */
async function epochDigest(ds: AnyDataset): Promise<string> {
  const loader = await DataLoader.create(ds, { batchSize: 4, shuffle: false, mode: 'streaming', workers: 0, sampleCache: false });
  const h = createHash('sha256');
  let rows = 0;
  for await (const b of loader.epoch(0)) {
    for (const name of b.names) {
      const t = b.get(name) as { data: ArrayBufferView; shape: readonly number[] };
      h.update(name).update(JSON.stringify(t.shape)).update(new Uint8Array(t.data.buffer, t.data.byteOffset, t.data.byteLength));
    }
    rows += b.sampleIds.length;
    b.release();
  }
  await loader.close();
  return `${rows}:${h.digest('hex')}`;
}

describe('remote datasets: s3:// on Swift, http:// on nginx', { timeout: HANG_MS * 6 }, () => {
  let dir: string;
  let data: string;
  let swift: SwiftS3;
  let nginx: Nginx;
  let proxy: FaultProxy;
  const files: Record<string, Uint8Array> = {};
  const s3 = () => ({ endpoint: proxy.url, region: swift.region, credentials: { accessKeyId: swift.accessKeyId, secretAccessKey: swift.secretAccessKey } });
  /** A node cache of its own folder, reaching Swift through the proxy. */
  const cacheOptions = (name: string, extra: object = {}) => ({ dir: join(dir, `cache-${name}`), s3: s3(), ...extra });

  before(async () => {
    dir = mkdtempSync(join(tmpdir(), 'stoker-remote-'));
    data = join(dir, 'data');
    // Tar shards: sample k of shard s holds cls = s*PER_SHARD+k and a bin field of 300 bytes.
    for (let s = 0; s < SHARDS; s++) {
      const src = join(dir, `src-${s}`);
      mkdirSync(src, { recursive: true });
      const names: string[] = [];
      for (let k = 0; k < PER_SHARD; k++) {
        const id = s * PER_SHARD + k;
        const key = String(id).padStart(6, '0');
        writeFileSync(join(src, `${key}.cls`), String(id));
        writeFileSync(join(src, `${key}.bin`), Uint8Array.from({ length: 300 }, (_, j) => (id * 7 + j) & 255));
        names.push(`${key}.cls`, `${key}.bin`);
      }
      const shard = join(data, 'shards', `train-${s}.tar`);
      mkdirSync(dirname(shard), { recursive: true });
      create({ file: shard, cwd: src, sync: true, portable: true }, names);
    }
    writeFileSync(join(data, 'table.arrow'), tableToIPC(tableFromArrays({ x: Float32Array.from({ length: 40 }, (_, i) => i / 4), y: Int32Array.from({ length: 40 }, (_, i) => i * 3) }), 'file'));
    writeFileSync(join(data, 'rows.jsonl'), Array.from({ length: 30 }, (_, i) => JSON.stringify({ a: i, b: i * 2.5 })).join('\n') + '\n');
    for (const c of ['cat', 'dog']) {
      mkdirSync(join(data, 'images', c), { recursive: true });
      for (let i = 0; i < 3; i++) {
        await sharp({ create: { width: 20 + i, height: 16, channels: 3, background: { r: 40 * i, g: c === 'cat' ? 200 : 50, b: 90 } } }).png().toFile(join(data, 'images', c, `${i}.png`));
      }
    }
    const walk = (d: string, rel = ''): void => {
      for (const e of readdirSync(d, { withFileTypes: true })) {
        if (e.isDirectory()) walk(join(d, e.name), `${rel}${e.name}/`);
        else files[`${rel}${e.name}`] = readFileSync(join(d, e.name));
      }
    };
    walk(data);
    [swift, nginx] = await Promise.all([startSwiftS3({ parent: dir }), startNginx(data)]);
    await createBucket(swift, BUCKET);
    await putObjects(swift, BUCKET, files);
    proxy = await startFaultProxy(swift.endpoint);
  });

  after(async () => {
    await Promise.allSettled([proxy?.stop(), swift?.stop(), nginx?.stop()]);
    rmSync(dir, { recursive: true, force: true });
  });

  it('tar shards, an Arrow file, a JSONL file and an image folder read over s3:// give the local copies\' batches', async () => {
    process.env.STOKER_CACHE_DIR = join(dir, 'cache-default');
    process.env.AWS_ENDPOINT_URL_S3 = proxy.url;
    process.env.AWS_ACCESS_KEY_ID = swift.accessKeyId;
    process.env.AWS_SECRET_ACCESS_KEY = swift.secretAccessKey;
    process.env.AWS_REGION = swift.region;
    try {
      const local = await epochDigest(await sources.tarShards(join(data, 'shards', 'train-{0..2}.tar'), TAR));
      assert.equal(await epochDigest(await sources.tarShards(`s3://${BUCKET}/shards/train-{0..2}.tar`, TAR)), local, 'a brace pattern');
      assert.equal(await epochDigest(await sources.tarShards(`s3://${BUCKET}/shards/train-*.tar`, TAR)), local, 'a wildcard, by listing');
      assert.equal(await epochDigest(await sources.tarShards(`s3://${BUCKET}/shards/`, TAR)), local, 'a folder of shards');
      assert.equal(await epochDigest((await openPath(`s3://${BUCKET}/table.arrow`)).dataset), await epochDigest(sources.arrow(join(data, 'table.arrow'))));
      assert.equal(await epochDigest(sources.arrow((await remoteFiles(`s3://${BUCKET}/table.arrow`)).files)), await epochDigest(sources.arrow(join(data, 'table.arrow'))));
      const jsonl = (p: string) => sources.jsonl(p, { fields: { a: 'int32', b: 'float32' } });
      assert.equal(await epochDigest(jsonl((await remoteFiles(`s3://${BUCKET}/rows.jsonl`)).files[0]!)), await epochDigest(jsonl(join(data, 'rows.jsonl'))));
      const images = (p: string) => sources.imageFolderAsync(p, { size: 8, decode: 'threads' });
      assert.equal(await epochDigest(await images(`s3://${BUCKET}/images`)), await epochDigest(await images(join(data, 'images'))), 'an image folder under a prefix');
      const loader = await DataLoader.create(await sources.tarShards(`s3://${BUCKET}/shards/train-{0..2}.tar`, TAR), { batchSize: 5 });
      const { remote } = loader.stats();
      assert.ok(remote.downloads >= SHARDS + 3 && remote.hits >= 2 * SHARDS && remote.bytes > 0 && remote.requests > remote.downloads, JSON.stringify(remote));
      assert.match(loader.describe(), /remote +\d+ requests, \d+ files downloaded \(.+\), \d+ found in the node cache/);
      await loader.close();
      // The cache folder is the one the environment names when a source opens, in every thread.
      process.env.STOKER_CACHE_DIR = join(dir, 'cache-other');
      const other = await sources.tarShards(`s3://${BUCKET}/shards/train-{0..2}.tar`, TAR);
      assert.ok(other.shardOf(0).startsWith(join(dir, 'cache-other')), other.shardOf(0));
      assert.equal(await epochDigest(other), local);
      await other.close();
    } finally {
      for (const k of ['STOKER_CACHE_DIR', 'AWS_ENDPOINT_URL_S3', 'AWS_ACCESS_KEY_ID', 'AWS_SECRET_ACCESS_KEY', 'AWS_REGION']) delete process.env[k];
    }
  });

  it('the same over http:// from nginx: ranged reads of named files and brace patterns; listing refused naming the fix', async () => {
    const o = cacheOptions('http');
    const local = await epochDigest(await sources.tarShards(join(data, 'shards', 'train-{0..2}.tar'), TAR));
    const shards = await remoteFiles(`${nginx.url}/shards/train-{0..2}.tar`, o);
    assert.equal(await epochDigest(await sources.tarShards([...shards.files], TAR)), local);
    assert.equal(await epochDigest(sources.arrow((await remoteFiles(`${nginx.url}/table.arrow`, o)).files)), await epochDigest(sources.arrow(join(data, 'table.arrow'))));
    await assert.rejects(remoteFiles(`${nginx.url}/shards/train-*.tar`, o), { code: 'ERR_INVALID_OPTION', message: /no listing.*brace pattern/s });
  });

  it('a synchronous source refuses a remote path, naming remoteFiles', () => {
    assert.throws(() => sources.arrow(`s3://${BUCKET}/table.arrow`), { code: 'ERR_INVALID_OPTION', message: /remoteFiles\("s3:\/\/data\/table\.arrow"\)/ });
    assert.throws(() => sources.imageFolder(`s3://${BUCKET}/images`, { size: 8 }), { message: /imageFolderAsync/ });
  });

  it('the node cache and store options are checked where they are given, naming the key', async () => {
    const tar = (remote: unknown) => sources.tarShards(`s3://${BUCKET}/shards/train-*.tar`, { ...TAR, remote } as never);
    await assert.rejects(tar({ bytes: -1 }), { code: 'ERR_INVALID_OPTION', message: /`remote\.bytes` must be an integer ≥ 1, got -1/ });
    await assert.rejects(tar({ s3: { adressing: 'path' } }), { code: 'ERR_INVALID_OPTION', message: /unknown `remote\.s3` option "adressing"; did you mean `addressing`\?/ });
    await assert.rejects(tar({ s3: { endpoint: 'not a url' } }), { message: /`remote\.s3\.endpoint` must be a URL/ });
    await assert.rejects(tar({ retry: { deadlineMs: 0 } }), { message: /`remote\.retry\.deadlineMs` must be an integer ≥ 1/ });
    await assert.rejects(sources.tarShards(join(data, 'shards', 'train-0.tar'), { ...TAR, remote: { dir: '' } }), { message: /`remote\.dir` must be a non-empty string/ }, 'checked for local shards too');
    await assert.rejects(remoteFiles(`s3://${BUCKET}/table.arrow`, { byte: 10 } as never), { message: /unknown option "byte"; did you mean `bytes`\?/ });
  });

  it('one download per object per node: three processes asking at once make one GET each, and the same bytes', async () => {
    proxy.reset();
    const cache = join(dir, 'cache-shared');
    const script = join(dir, 'fetch.mts');
    writeFileSync(script, `
      import { createHash } from 'node:crypto';
      import { readFileSync } from 'node:fs';
      import { remoteFiles } from ${JSON.stringify(new URL('../../src/remote/remote.ts', import.meta.url).pathname)};
      const { files } = await remoteFiles(process.argv[2], JSON.parse(process.argv[3]));
      console.log(JSON.stringify(files.map((f) => createHash('sha256').update(readFileSync(f)).digest('hex'))));
    `);
    proxy.inject({ delayMs: 300 }, { times: 3, match: (r) => r.method === 'GET' && !r.path.includes('list-type') });
    const run = () =>
      new Promise<string>((res, rej) => {
        const child = spawn(process.execPath, ['--import', 'tsx', script, `s3://${BUCKET}/shards/train-{0..2}.tar`, JSON.stringify({ dir: cache, s3: s3() })], { stdio: ['ignore', 'pipe', 'inherit'] });
        let out = '';
        child.stdout.on('data', (d) => (out += d));
        child.on('exit', (code) => (code === 0 ? res(out.trim()) : rej(new Error(`fetch child exited ${code}`))));
      });
    const outs = await Promise.all([run(), run(), run()]);
    const want = JSON.stringify([0, 1, 2].map((s) => createHash('sha256').update(files[`shards/train-${s}.tar`]!).digest('hex')));
    for (const o of outs) assert.equal(o, want);
    assert.equal(proxy.count((r) => r.method === 'GET' && r.path.includes('/shards/train-') && !r.path.includes('list-type')), SHARDS, 'one GET per shard for the node');
  });

  it('a downloader killed mid-file is taken over: its lock is broken, the file is published whole', async () => {
    proxy.reset();
    const cache = join(dir, 'cache-killed');
    const script = join(dir, 'fetch-one.mts');
    writeFileSync(script, `
      import { remoteFiles } from ${JSON.stringify(new URL('../../src/remote/remote.ts', import.meta.url).pathname)};
      await remoteFiles(process.argv[2], JSON.parse(process.argv[3]));
    `);
    // The first GET stalls 60 s after its headers: the child holds the lock mid-download when killed.
    proxy.inject({ delayMs: 60_000 }, { times: 1, match: (r) => r.method === 'GET' && pathOf(r).endsWith('/table.arrow') });
    const child = spawn(process.execPath, ['--import', 'tsx', script, `s3://${BUCKET}/table.arrow`, JSON.stringify({ dir: cache, s3: s3() })], { stdio: 'ignore' });
    const lockDir = join(cache, 's3');
    // NOTE: waits (bounded by HANG_MS) for the child's lock file and its GET.
    const t0 = Date.now();
    const findLock = (): boolean => {
      const walk = (d: string): boolean => {
        try {
          return readdirSync(d, { withFileTypes: true }).some((e) => (e.isDirectory() ? walk(join(d, e.name)) : e.name.endsWith('.stoker.lock')));
        } catch {
          return false;
        }
      };
      return walk(lockDir);
    };
    // The child holds the lock and its GET reached the proxy (else the 60 s stall would be ours).
    const childGet = () => proxy.count((r) => r.method === 'GET' && pathOf(r).endsWith('/table.arrow')) >= 1;
    while (!findLock() || !childGet()) {
      assert.ok(Date.now() - t0 < HANG_MS, 'the child never took the lock and sent its GET');
      await new Promise((r) => setTimeout(r, 50));
    }
    child.kill('SIGKILL');
    await new Promise((r) => child.once('exit', r));
    const { files: [path] } = await remoteFiles(`s3://${BUCKET}/table.arrow`, cacheOptions('killed'));
    assert.deepEqual(readFileSync(path!), Buffer.from(files['table.arrow']!));
    assert.deepEqual(readdirSync(dirname(path!)).filter((n) => n.includes('.stoker.lock') || n.includes('.stoker.part')), [], 'no lock or part file left');
  });

  it('throttling, 5xx, a reset and a cut body are retried to the same bytes; refusals fail at once, naming the fix', async () => {
    proxy.reset();
    const cache = new NodeCache(cacheOptions('faults'));
    const get = (r: { method: string; path: string }) => r.method === 'GET' && pathOf(r).endsWith('/shards/train-1.tar');
    proxy.inject('slow-down', { times: 2, match: get });
    proxy.inject('internal-error', { times: 1, match: get });
    proxy.inject('reset', { times: 1, match: get });
    proxy.inject({ truncateAfter: 1000 }, { times: 1, match: get });
    const path = await cache.ensure(`s3://${BUCKET}/shards/train-1.tar`);
    assert.deepEqual(readFileSync(path), Buffer.from(files['shards/train-1.tar']!));
    assert.equal(cache.counters.retries, 5);
    assert.ok(proxy.requests.some((r) => get(r) && r.range === 'bytes=1000-'), 'the cut body resumed from where it stopped');
    await assert.rejects(cache.ensure(`s3://${BUCKET}/nope.tar`), (e: unknown) => e instanceof LoaderError && e.code === 'ERR_REMOTE' && /nope\.tar.*no such object/s.test(e.message));
    const wrong = new NodeCache({ dir: join(dir, 'cache-wrong'), s3: { ...s3(), credentials: { accessKeyId: swift.accessKeyId, secretAccessKey: 'wrong' } } });
    await assert.rejects(wrong.ensure(`s3://${BUCKET}/rows.jsonl`), { code: 'ERR_REMOTE', message: /rows\.jsonl.*credentials/s });
    assert.equal(wrong.counters.retries, 0, 'a refused signature is not retried');
    const impatient = new NodeCache(cacheOptions('deadline', { retry: { deadlineMs: 400, baseDelayMs: 50 } }));
    proxy.inject('slow-down', { times: 1000, match: (r) => pathOf(r).endsWith('/rows.jsonl') });
    await assert.rejects(impatient.ensure(`s3://${BUCKET}/rows.jsonl`), { code: 'ERR_REMOTE', message: /still failing after \d+ attempts/ });
    proxy.reset();
    // A server that goes silent (here: no answer for 5 s) is abandoned after stallMs and asked again.
    const stalling = new NodeCache(cacheOptions('stall', { retry: { stallMs: 1500, baseDelayMs: 10 } }));
    proxy.inject({ delayMs: 5000 }, { times: 1, match: (r) => r.method === 'GET' && pathOf(r).endsWith('/shards/train-2.tar') });
    assert.deepEqual(readFileSync(await stalling.ensure(`s3://${BUCKET}/shards/train-2.tar`)), Buffer.from(files['shards/train-2.tar']!));
    assert.ok(stalling.counters.retries >= 1, 'the stalled GET was abandoned and asked again');
    proxy.reset();
    await cache.close();
    await wrong.close();
    await impatient.close();
    await stalling.close();
  });

  it('a changed object is fetched again; a cached one costs a HEAD and no GET', async () => {
    proxy.reset();
    const o = cacheOptions('changed');
    const url = `s3://${BUCKET}/mutable.bin`;
    await putObjects(swift, BUCKET, { 'mutable.bin': 'first version' });
    assert.equal(readFileSync((await remoteFiles(url, o)).files[0]!, 'utf8'), 'first version');
    const gets = () => proxy.count((r) => r.method === 'GET' && pathOf(r).endsWith('/mutable.bin'));
    assert.equal(gets(), 1);
    assert.equal(readFileSync((await new NodeCache(o).ensure(url)), 'utf8'), 'first version');
    assert.equal(gets(), 1, 'a hit: no second GET');
    await putObjects(swift, BUCKET, { 'mutable.bin': 'second, longer version' });
    assert.equal(readFileSync((await new NodeCache(o).ensure(url)), 'utf8'), 'second, longer version');
    assert.equal(gets(), 2);
  });

  it('eviction under a budget removes the file used furthest ahead first (next use), never one pinned', async () => {
    const sizes = [0, 1, 2].map((s) => files[`shards/train-${s}.tar`]!.length);
    const cache = new NodeCache(cacheOptions('evict', { bytes: sizes[0]! + sizes[1]! + 10 }));
    const url = (s: number) => `${nginx.url}/shards/train-${s}.tar`;
    const p0 = await cache.ensure(url(0));
    const p1 = await cache.ensure(url(1));
    // Next uses: shard 0 soon, shard 1 far: fetching shard 2 must evict shard 1, though 0 is older.
    cache.nextUse = (p) => (p === p0 ? 1 : p === p1 ? 100 : 50);
    const p2 = await cache.ensure(url(2));
    assert.equal(cache.counters.evictions, 1);
    assert.ok(readdirSync(dirname(p0)).includes('train-0.tar') && !readdirSync(dirname(p0)).includes('train-1.tar'), 'shard 1 (next used furthest away) went');
    cache.pin(p0);
    cache.pin(p2);
    cache.nextUse = undefined;
    await assert.rejects(cache.ensure(url(1)), { code: 'ERR_REMOTE', message: /do not fit the node cache's budget/ }, 'shards 0 and 2 pinned: no room');
    cache.unpin(p2);
    await cache.ensure(url(1));
    assert.equal(cache.counters.evictions, 2, 'unpinned, shard 2 makes room');
    // Two datasets' plans followed at once: a file's next use is the sooner of theirs.
    const both = new NodeCache(cacheOptions('evict-plans', { bytes: sizes[0]! + sizes[1]! + 10 }));
    const [q0, q1] = [await both.ensure(url(0)), await both.ensure(url(1))];
    both.followNextUse((p) => (p === q0 ? 100 : p === q1 ? 50 : Infinity));
    const unfollow = both.followNextUse((p) => (p === q0 ? 1 : Infinity));
    await both.ensure(url(2));
    assert.ok(readdirSync(dirname(q0)).includes('train-0.tar') && !readdirSync(dirname(q0)).includes('train-1.tar'), 'shard 1 went: the second plan wants shard 0 next');
    unfollow();
  });

  /** Sample ids of every batch of one epoch (a rejected batch: its error code), and the loader's state after `stopAfter` batches. */
  async function epochIds(ds: AnyDataset, options: object, epoch = 0): Promise<(number[] | string)[]> {
    const loader = await DataLoader.create(ds, { batchSize: PER_SHARD, mode: 'streaming', sampleCache: false, ...options });
    const out: (number[] | string)[] = [];
    const it = loader.epoch(epoch)[Symbol.asyncIterator]();
    for (;;) {
      try {
        const r = await it.next();
        if (r.done === true) break;
        out.push([...r.value.sampleIds]);
        r.value.release();
      } catch (error) {
        out.push((error as { code?: string }).code ?? String(error));
        break;
      }
    }
    await loader.close();
    return out;
  }

  const shardGets = () => proxy.count((r) => r.method === 'GET' && /\/shards\/train-\d\.tar$/.test(pathOf(r)));

  it('remote tar shards: the manifest is built once and published beside them; a fresh node opens with no shard download and fetches each shard as the plan reaches it, within its budget', async () => {
    const local = await sources.tarShards(join(data, 'shards', 'train-{0..2}.tar'), TAR);
    const url = `s3://${BUCKET}/shards/train-*.tar`;
    const built = await sources.tarShards(url, { ...TAR, index: 'beside', remote: cacheOptions('lazy-a') });
    assert.equal(await epochDigest(built), await epochDigest(local));
    assert.ok(built.contentId !== undefined && /^[0-9a-f]{32}$/.test(built.contentId));
    await built.close();
    proxy.reset();
    const shard = files['shards/train-0.tar']!.length;
    const budget = Math.floor(2.5 * shard);
    const o = cacheOptions('lazy-b', { bytes: budget });
    const ds = await sources.tarShards(url, { ...TAR, remote: o });
    assert.equal(shardGets(), 0, 'opening read the manifest published beside the shards, no shard');
    assert.equal(proxy.count((r) => r.method === 'GET' && /\/shards\/\.stoker\/tar-[0-9a-f]{32}\.json$/.test(pathOf(r))), 1);
    assert.equal(ds.contentId, built.contentId);
    // In order, two shards of budget: each shard fetched once, the used one evicted for the next.
    assert.deepEqual(await epochIds(ds, { shuffle: false, workers: 1 }), await epochIds(local, { shuffle: false, workers: 1 }));
    assert.equal(shardGets(), SHARDS, 'each shard once');
    // Shuffled, reader threads: the local copy's batches, epoch after epoch; the cache stays within its budget.
    for (const epoch of [0, 1]) assert.deepEqual(await epochIds(ds, { seed: 7, workers: 2 }, epoch), await epochIds(local, { seed: 7, workers: 2 }, epoch));
    let held = 0;
    const walk = (d: string): void => {
      for (const e of readdirSync(d, { withFileTypes: true })) {
        if (e.isDirectory()) walk(join(d, e.name));
        else if (e.name.endsWith('.tar')) held += readFileSync(join(d, e.name)).length;
      }
    };
    walk(join(o.dir, 's3'));
    assert.ok(held <= budget, `the cache holds ${held} bytes of shards, over its budget of ${budget}`);
    await ds.close();
    // index: 'off' reads no manifest and keeps none, as for local shards.
    proxy.reset();
    const off = await sources.tarShards(url, { ...TAR, index: 'off', remote: cacheOptions('lazy-off') });
    assert.equal(shardGets(), SHARDS, 'indexed from the shards');
    assert.equal(existsSync(join(dir, 'cache-lazy-off', 'manifests')), false);
    await off.close();
  });

  it('a shard that stays unreachable fails only its batches; the others arrive', async () => {
    proxy.reset();
    const o = cacheOptions('unreachable', { retry: { deadlineMs: 1500, baseDelayMs: 20 } });
    const ds = await sources.tarShards(`s3://${BUCKET}/shards/train-*.tar`, { ...TAR, remote: o });
    proxy.inject('internal-error', { times: 1e9, match: (r) => r.method === 'GET' && pathOf(r).endsWith('/shards/train-1.tar') });
    try {
      const loader = await DataLoader.create(ds, { batchSize: PER_SHARD, shuffle: false, mode: 'streaming', errors: 'skip', workers: 1 });
      const got: number[][] = [];
      for await (const b of loader.epoch(0)) {
        got.push([...b.sampleIds]);
        b.release();
      }
      assert.deepEqual(got, [[0, 1, 2, 3, 4], [10, 11, 12, 13, 14]]);
      assert.deepEqual(loader.stats().epochs[0]!.skipped.map((k) => [...k.sampleIds]), [[5, 6, 7, 8, 9]]);
      assert.match(loader.stats().epochs[0]!.skipped[0]!.reason, /train-1\.tar.*500.*attempts/);
      await loader.close();
    } finally {
      proxy.reset();
      await ds.close();
    }
  });

  it('a resume state names the shards\' content hash: the same shards in another bucket resume exactly; changed shards are refused', async () => {
    const opts = { seed: 3, workers: 0, batchSize: 2 } as const;
    const whole = await epochIds(await sources.tarShards(join(data, 'shards', 'train-{0..2}.tar'), TAR), opts);
    const ds = await sources.tarShards(`s3://${BUCKET}/shards/train-*.tar`, { ...TAR, remote: cacheOptions('resume') });
    const loader = await DataLoader.create(ds, { ...opts, mode: 'streaming' });
    const it = loader.epoch(0)[Symbol.asyncIterator]();
    for (let i = 0; i < 3; i++) (await it.next()).value!.release();
    const state = loader.state();
    await loader.close();
    assert.equal(state.content, ds.contentId);
    const copy = (bucket: string, change: boolean) => putObjects(swift, bucket, Object.fromEntries([0, 1, 2].map((s) => {
      const bytes = Buffer.from(files[`shards/train-${s}.tar`]!);
      if (change && s === 2) bytes[bytes.length - 1024 - 1]! ^= 1; // one byte of a field's padding: same samples, other content
      return [`shards/train-${s}.tar`, bytes];
    })));
    await createBucket(swift, 'moved');
    await copy('moved', false);
    const moved = await sources.tarShards('s3://moved/shards/train-*.tar', { ...TAR, remote: cacheOptions('resume') });
    assert.deepEqual(await epochIds(moved, { ...opts, resume: state }), whole.slice(3), 'the rest of the epoch, from the moved copy');
    await createBucket(swift, 'changed');
    await copy('changed', true);
    const changed = await sources.tarShards('s3://changed/shards/train-*.tar', { ...TAR, remote: cacheOptions('resume') });
    await assert.rejects(DataLoader.create(changed, { ...opts, resume: state }), { code: 'ERR_RESUME_MISMATCH', message: /content hash.*files changed/s });
    await Promise.all([ds.close(), moved.close(), changed.close()]);
  });
});
