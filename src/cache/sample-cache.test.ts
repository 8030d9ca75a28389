import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { SampleCache } from './sample-cache.js';

const bytes = (v: number) => new Uint8Array(4).fill(v);

describe('the RAM sample cache (reference §3.1)', () => {
  it('is dormant (admits nothing) until a capacity is set', () => {
    const cache = SampleCache.create(10, 4);
    assert.equal(cache.admit(1, bytes(1)), false);
    assert.equal(cache.lookup(1), undefined);
  });

  it('admits until full, then serves hits and declines the rest', () => {
    const cache = SampleCache.create(10, 4);
    cache.setCapacity(2);
    assert.equal(cache.admit(3, bytes(3)), true);
    assert.equal(cache.admit(5, bytes(5)), true);
    assert.equal(cache.admit(7, bytes(7)), false, 'full: never evicts');
    assert.deepEqual(Array.from(cache.lookup(3)!), [3, 3, 3, 3]);
    assert.deepEqual(Array.from(cache.lookup(5)!), [5, 5, 5, 5]);
    assert.equal(cache.lookup(7), undefined);
    assert.equal(cache.heldBytes, 8);
  });

  it('admits a sample once: a second admit of the same id is declined and keeps the first bytes', () => {
    const cache = SampleCache.create(10, 4);
    cache.setCapacity(10);
    assert.equal(cache.admit(4, bytes(1)), true);
    assert.equal(cache.admit(4, bytes(2)), false);
    assert.deepEqual(Array.from(cache.lookup(4)!), [1, 1, 1, 1]);
  });

  it('a shrinking budget only stops admissions; retained samples keep serving', () => {
    const cache = SampleCache.create(10, 4);
    cache.setCapacity(5);
    for (const id of [0, 1, 2]) cache.admit(id, bytes(id + 10));
    cache.setCapacity(1);
    assert.equal(cache.admit(3, bytes(3)), false);
    for (const id of [0, 1, 2]) assert.deepEqual(Array.from(cache.lookup(id)!), new Array(4).fill(id + 10));
    cache.setCapacity(5);
    assert.equal(cache.admit(3, bytes(3)), true, 'admissions resume when the budget grows back');
  });

  it('ignores ids out of range, and rows of chunks this thread has not received', () => {
    const cache = SampleCache.create(4, 4);
    cache.setCapacity(4);
    assert.equal(cache.admit(-1, bytes(1)), false);
    assert.equal(cache.admit(4, bytes(1)), false);
    // A second handle that has not yet received the chunk the main thread allocated.
    const lagging = SampleCache.attach({ ...cache.shared, chunks: [] });
    assert.equal(lagging.admit(2, bytes(2)), false);
    cache.admit(1, bytes(9));
    assert.equal(lagging.lookup(1), undefined, 'a row in an unknown chunk reads as a miss');
    lagging.addChunks(cache.shared.chunks);
    assert.deepEqual(Array.from(lagging.lookup(1)!), [9, 9, 9, 9]);
  });

  it('grows its chunks with the capacity and returns them to post to the workers', () => {
    const cache = SampleCache.create(100, 2 ** 20);
    const first = cache.setCapacity(10);
    assert.equal(first?.length, 1);
    assert.equal(cache.setCapacity(10), undefined, 'no new chunk when the capacity did not grow past it');
    const more = cache.setCapacity(100);
    assert.equal(more?.length, 2, '64 rows of 1 MiB per chunk: 100 rows need two');
  });
});
