// The real servers the remote-dataset tests run against (test/fixtures/servers/) behave as the loader
// needs: Swift's S3 (signed GET, ranges, HEAD, paged listings), nginx (ranges, ETags) and the fault
// proxy in front of either. Never skipped: CI installs Swift and nginx (.ci/run); without them the
// start fails naming the apt packages. Every wait is bounded; the servers stop in `after`.

import { GetObjectCommand, HeadObjectCommand, ListObjectsV2Command, type S3Client } from '@aws-sdk/client-s3';
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { CHILD_MS, HANG_MS, SUITE_MS, within } from '../fixtures.js';
import { type FaultProxy, startFaultProxy } from '../fixtures/servers/fault-proxy.js';
import { type Nginx, startNginx } from '../fixtures/servers/nginx.js';
import { createBucket, putObjects, s3Client, startSwiftS3, type SwiftS3 } from '../fixtures/servers/swift.js';

const dir = mkdtempSync(join(tmpdir(), 'stoker-servers-'));
const childrenAtStart = children();
after(() => rmSync(dir, { recursive: true, force: true }));

/** `n` bytes that differ at every offset a range test might pick (a 32-bit LCG). */
function bytes(n: number, seed: number): Buffer {
  const out = Buffer.alloc(n);
  let x = seed >>> 0;
  for (let i = 0; i < n; i++) {
    x = (Math.imul(x, 1664525) + 1013904223) >>> 0;
    out[i] = x >>> 24;
  }
  return out;
}

const BLOB = bytes(300_000, 1);
const md5 = (b: Uint8Array) => createHash('md5').update(b).digest('hex');
const SHARDS = Array.from({ length: 12 }, (_, i) => `shards/part-${String(i).padStart(3, '0')}.bin`);

/** This process's children now (their pids), from /proc. */
function children(): number[] {
  return readdirSync('/proc')
    .filter((d) => /^\d+$/.test(d))
    .filter((pid) => {
      try {
        const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
        return Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]) === process.pid;
      } catch {
        return false; // Gone meanwhile.
      }
    })
    .map(Number);
}

/** Processes whose command line mentions `text`. */
function processesMentioning(text: string): number[] {
  return readdirSync('/proc')
    .filter((d) => /^\d+$/.test(d))
    .filter((pid) => {
      try {
        return readFileSync(`/proc/${pid}/cmdline`, 'utf8').includes(text);
      } catch {
        return false;
      }
    })
    .map(Number);
}

describe('Swift with s3api', { timeout: SUITE_MS }, () => {
  let s3: SwiftS3 | undefined;
  let client: S3Client;
  // Waits for: the rings (once per process), the four servers' /healthcheck (bounded inside), the PUTs.
  before(async () => {
    s3 = await startSwiftS3({ parent: dir });
    client = s3Client(s3);
    await createBucket(s3, 'data');
    await putObjects(s3, 'data', { 'blob.bin': BLOB, 'other/x.bin': 'x', ...Object.fromEntries(SHARDS.map((k, i) => [k, bytes(100 + i, i)])) });
  }, { timeout: CHILD_MS });
  after(async () => {
    client?.destroy();
    await s3?.stop();
  });

  test('a signed GET returns the bytes PUT', { timeout: HANG_MS }, async () => {
    const res = await client.send(new GetObjectCommand({ Bucket: 'data', Key: 'blob.bin' }));
    assert.ok(Buffer.from(await res.Body!.transformToByteArray()).equals(BLOB));
  });

  test('a ranged GET answers 206 with exactly the bytes asked for', { timeout: HANG_MS }, async () => {
    const res = await client.send(new GetObjectCommand({ Bucket: 'data', Key: 'blob.bin', Range: 'bytes=1000-1999' }));
    assert.equal(res.$metadata.httpStatusCode, 206);
    assert.equal(res.ContentRange, `bytes 1000-1999/${BLOB.length}`);
    assert.ok(Buffer.from(await res.Body!.transformToByteArray()).equals(BLOB.subarray(1000, 2000)));
  });

  test('a suffix range answers the last n bytes', { timeout: HANG_MS }, async () => {
    const res = await client.send(new GetObjectCommand({ Bucket: 'data', Key: 'blob.bin', Range: 'bytes=-100' }));
    assert.equal(res.$metadata.httpStatusCode, 206);
    assert.ok(Buffer.from(await res.Body!.transformToByteArray()).equals(BLOB.subarray(-100)));
  });

  test('HEAD gives the size, and an ETag that is the MD5 of the body', { timeout: HANG_MS }, async () => {
    const res = await client.send(new HeadObjectCommand({ Bucket: 'data', Key: 'blob.bin' }));
    assert.equal(res.ContentLength, BLOB.length);
    assert.equal(res.ETag, `"${md5(BLOB)}"`);
  });

  test('ListObjectsV2 pages through a prefix with continuation tokens', { timeout: HANG_MS }, async () => {
    const pages: string[][] = [];
    let token: string | undefined;
    do {
      const page = await client.send(new ListObjectsV2Command({ Bucket: 'data', Prefix: 'shards/', MaxKeys: 5, ContinuationToken: token }));
      pages.push((page.Contents ?? []).map((o) => o.Key!));
      assert.equal(page.IsTruncated, page.NextContinuationToken !== undefined);
      token = page.NextContinuationToken;
    } while (token !== undefined && pages.length < 10);
    assert.deepEqual(pages.map((p) => p.length), [5, 5, 2]);
    assert.deepEqual(pages.flat(), SHARDS);
  });

  test('a missing key is NoSuchKey', { timeout: HANG_MS }, async () => {
    await assert.rejects(client.send(new GetObjectCommand({ Bucket: 'data', Key: 'nope' })), { name: 'NoSuchKey' });
  });

  test('a wrong secret is refused with SignatureDoesNotMatch', { timeout: HANG_MS }, async () => {
    const wrong = s3Client(s3!, { secretAccessKey: 'not-the-secret' });
    try {
      await assert.rejects(wrong.send(new GetObjectCommand({ Bucket: 'data', Key: 'blob.bin' })), { name: 'SignatureDoesNotMatch' });
    } finally {
      wrong.destroy();
    }
  });

  test('a second instance runs beside the first, and stop() leaves none of its processes or files', { timeout: CHILD_MS }, async (t) => {
    const started = performance.now();
    const other = await startSwiftS3({ parent: dir });
    t.diagnostic(`a second Swift started in ${Math.round(performance.now() - started)} ms (rings already built)`);
    try {
      assert.notEqual(other.endpoint, s3!.endpoint);
      assert.ok(processesMentioning(other.dir).length >= 4, 'its four servers run');
      await createBucket(other, 'data');
      const list = s3Client(other);
      assert.equal((await list.send(new ListObjectsV2Command({ Bucket: 'data' }))).KeyCount, 0, 'its bucket is its own');
      list.destroy();
    } finally {
      await other.stop();
    }
    assert.deepEqual(processesMentioning(other.dir), []);
    assert.equal(existsSync(other.dir), false);
  });
});

describe('nginx', { timeout: SUITE_MS }, () => {
  const root = join(dir, 'www');
  let nginx: Nginx | undefined;
  // Waits for: nginx answering GET / (bounded inside).
  before(async () => {
    mkdirSync(join(root, 'sub'), { recursive: true });
    writeFileSync(join(root, 'sub', 'blob.bin'), BLOB);
    nginx = await startNginx(root);
  }, { timeout: HANG_MS });
  after(() => nginx?.stop());

  test('a ranged GET answers 206 with exactly the bytes asked for, and the file ETag', { timeout: HANG_MS }, async () => {
    const res = await fetch(`${nginx!.url}/sub/blob.bin`, { headers: { range: 'bytes=5-299999' } });
    assert.equal(res.status, 206);
    assert.equal(res.headers.get('content-range'), `bytes 5-299999/${BLOB.length}`);
    assert.ok(Buffer.from(await res.arrayBuffer()).equals(BLOB.subarray(5)));
    // nginx's ETag: "<mtime in s, hex>-<size, hex>".
    const st = statSync(join(root, 'sub', 'blob.bin'));
    assert.equal(res.headers.get('etag'), `"${Math.floor(st.mtimeMs / 1000).toString(16)}-${st.size.toString(16)}"`);
  });

  test('a suffix range answers the last n bytes', { timeout: HANG_MS }, async () => {
    const res = await fetch(`${nginx!.url}/sub/blob.bin`, { headers: { range: 'bytes=-7' } });
    assert.equal(res.status, 206);
    assert.ok(Buffer.from(await res.arrayBuffer()).equals(BLOB.subarray(-7)));
  });

  test('a directory lists as JSON', { timeout: HANG_MS }, async () => {
    const res = await fetch(`${nginx!.url}/sub/`);
    assert.deepEqual(
      ((await res.json()) as { name: string; type: string; size: number }[]).map(({ name, type, size }) => ({ name, type, size })),
      [{ name: 'blob.bin', type: 'file', size: BLOB.length }],
    );
  });
});

describe('the fault proxy', { timeout: SUITE_MS }, () => {
  let s3: SwiftS3 | undefined;
  let nginx: Nginx | undefined;
  let s3Proxy: FaultProxy | undefined;
  let webProxy: FaultProxy | undefined;
  let client: S3Client;
  const isBlob = (r: { path: string }) => r.path.startsWith('/data/blob.bin');
  // Waits for: Swift's four servers and nginx answering (bounded inside), the PUT.
  before(async () => {
    const root = join(dir, 'www-proxied');
    mkdirSync(root);
    writeFileSync(join(root, 'blob.bin'), BLOB);
    [s3, nginx] = await Promise.all([startSwiftS3({ parent: dir }), startNginx(root)]);
    await createBucket(s3, 'data');
    await putObjects(s3, 'data', { 'blob.bin': BLOB });
    s3Proxy = await startFaultProxy(s3.endpoint);
    webProxy = await startFaultProxy(nginx.url);
    // The client signs for the proxy's address; the proxy keeps that Host header.
    client = s3Client(s3, { endpoint: s3Proxy.url });
  }, { timeout: CHILD_MS });
  after(async () => {
    client?.destroy();
    await Promise.all([s3Proxy?.stop(), webProxy?.stop()]);
    await Promise.all([s3?.stop(), nginx?.stop()]);
  });

  test('signed requests pass through unchanged, counted by method, path and Range', { timeout: HANG_MS }, async () => {
    s3Proxy!.reset();
    const res = await client.send(new GetObjectCommand({ Bucket: 'data', Key: 'blob.bin', Range: 'bytes=0-9' }));
    assert.ok(Buffer.from(await res.Body!.transformToByteArray()).equals(BLOB.subarray(0, 10)));
    await client.send(new HeadObjectCommand({ Bucket: 'data', Key: 'blob.bin' }));
    assert.equal(s3Proxy!.count(), 2);
    assert.equal(s3Proxy!.count((r) => r.method === 'GET' && isBlob(r) && r.range === 'bytes=0-9'), 1);
    assert.equal(s3Proxy!.count((r) => r.method === 'HEAD' && r.range === undefined), 1);
  });

  test('503 SlowDown: the S3 client sees it and retries', { timeout: HANG_MS }, async () => {
    s3Proxy!.reset();
    const rule = s3Proxy!.inject('slow-down', { times: 1, match: isBlob });
    const res = await client.send(new GetObjectCommand({ Bucket: 'data', Key: 'blob.bin' }));
    assert.ok(Buffer.from(await res.Body!.transformToByteArray()).equals(BLOB));
    assert.equal(res.$metadata.attempts, 2);
    assert.equal(rule.left, 0);
    assert.equal(s3Proxy!.count(isBlob), 2);
    const once = s3Client(s3!, { endpoint: s3Proxy!.url, maxAttempts: 1 });
    s3Proxy!.inject('slow-down');
    try {
      await assert.rejects(once.send(new GetObjectCommand({ Bucket: 'data', Key: 'blob.bin' })), (e: Error & { $metadata?: { httpStatusCode?: number } }) => e.name === 'SlowDown' && e.$metadata?.httpStatusCode === 503);
    } finally {
      once.destroy();
    }
  });

  test('a reset connection: fetch fails with ECONNRESET, the S3 client retries', { timeout: HANG_MS }, async () => {
    webProxy!.inject('reset');
    await assert.rejects(fetch(`${webProxy!.url}/blob.bin`), (e: Error & { cause?: { code?: string } }) => e.cause?.code === 'ECONNRESET');
    s3Proxy!.reset();
    s3Proxy!.inject('reset', { match: isBlob });
    const res = await client.send(new GetObjectCommand({ Bucket: 'data', Key: 'blob.bin', Range: 'bytes=-3' }));
    assert.ok(Buffer.from(await res.Body!.transformToByteArray()).equals(BLOB.subarray(-3)));
    assert.equal(s3Proxy!.count(isBlob), 2);
  });

  test('500 and 503 reach fetch with their S3 error bodies, for the matching requests only', { timeout: HANG_MS }, async () => {
    webProxy!.inject('internal-error', { match: (r) => r.range !== undefined });
    webProxy!.inject('slow-down', { match: (r) => r.range !== undefined });
    const whole = await fetch(`${webProxy!.url}/blob.bin`);
    assert.equal(whole.status, 200);
    await whole.arrayBuffer();
    const ranged = () => fetch(`${webProxy!.url}/blob.bin`, { headers: { range: 'bytes=0-0' } });
    const first = await ranged();
    assert.equal(first.status, 500);
    assert.match(await first.text(), /<Code>InternalError<\/Code>/);
    const second = await ranged();
    assert.equal(second.status, 503);
    assert.match(await second.text(), /<Code>SlowDown<\/Code>/);
    assert.equal((await ranged()).status, 206);
  });

  test('a truncated body: the full Content-Length, then exactly K bytes and the end of the connection', { timeout: HANG_MS }, async () => {
    webProxy!.inject({ truncateAfter: 70_000 });
    const res = await fetch(`${webProxy!.url}/blob.bin`);
    assert.equal(res.headers.get('content-length'), String(BLOB.length));
    const got: Buffer[] = [];
    const reader = res.body!.getReader();
    await assert.rejects(
      within(HANG_MS, 'the truncated body failing', (async () => {
        for (let r = await reader.read(); !r.done; r = await reader.read()) got.push(Buffer.from(r.value));
      })()),
    );
    assert.ok(Buffer.concat(got).equals(BLOB.subarray(0, 70_000)));
    s3Proxy!.inject({ truncateAfter: 1000 }, { match: isBlob });
    const s3res = await client.send(new GetObjectCommand({ Bucket: 'data', Key: 'blob.bin' }));
    await assert.rejects(s3res.Body!.transformToByteArray());
  });

  test('a delayed request arrives no sooner than its delay', { timeout: HANG_MS }, async () => {
    webProxy!.inject({ delayMs: 300 });
    const started = performance.now();
    const res = await fetch(`${webProxy!.url}/blob.bin`, { headers: { range: 'bytes=0-0' } });
    assert.equal(res.status, 206);
    await res.arrayBuffer();
    assert.ok(performance.now() - started >= 290, "the proxy held the request for its delay (less 10 ms of timer slack)");
  });
});

describe('after the servers stop', () => {
  test('no process this file started is left', () => {
    assert.deepEqual(children().filter((pid) => !childrenAtStart.includes(pid)), []);
  });
});
