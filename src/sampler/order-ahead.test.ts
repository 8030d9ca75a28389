import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { waitFor } from '../../test/fixtures.js';
import { OrderAhead, ORDER_AHEAD_MIN } from './order-ahead.js';
import { RandomSampler } from './random-sampler.js';
import { epochPermutation, toU64 } from './rng.js';

describe('OrderAhead', () => {
  it('gives exactly epochPermutation(seed, epoch, n), whether the helper finished first or not', async () => {
    const n = ORDER_AHEAD_MIN + 17;
    const ahead = new OrderAhead(toU64(7), n);
    try {
      // Epoch 0 has no order ahead; epoch 1 is asked for at once (not ready yet, computed here).
      // Then one epoch per poll until the helper thread (started on the first ask: seconds on a
      // loaded machine) has served two; every order is checked, whoever computed it.
      assert.deepEqual(ahead.take(0), epochPermutation(7, 0, n));
      assert.deepEqual(ahead.take(1), epochPermutation(7, 1, n));
      let e = 2;
      await waitFor(() => {
        assert.deepEqual(ahead.take(e), epochPermutation(7, e, n), `epoch ${e}`);
        e++;
        return ahead.fromHelper >= 2;
      }, { what: () => `the helper thread computing orders (${ahead.fromHelper} of ${e - 2} epochs)`, intervalMs: 50 });
      // Out of sequence: the order ahead is for another epoch, so this one is computed here.
      assert.deepEqual(ahead.take(e + 7), epochPermutation(7, e + 7, n));
    } finally {
      ahead.close();
    }
    // Closed: still correct, computed on the calling thread.
    assert.deepEqual(ahead.take(3), epochPermutation(7, 3, n));
  });

  it('gives the loader sampler the same orders, large dataset or small', () => {
    const small = new RandomSampler(100, 3).planAhead();
    assert.deepEqual(small.indices(0), epochPermutation(3, 0, 100));
    small.close();
    const big = new RandomSampler(ORDER_AHEAD_MIN, 3).planAhead();
    try {
      // Whether the helper (on ≥ ORDER_AHEAD_MIN_CORES cores) or this thread computed an order is
      // not this test's business (the test above pins the helper's orders): no wait between epochs.
      for (let e = 0; e < 3; e++) assert.deepEqual(big.indices(e), epochPermutation(3, e, ORDER_AHEAD_MIN));
    } finally {
      big.close();
    }
  });
});
