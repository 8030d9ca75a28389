import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { OrderAhead, ORDER_AHEAD_MIN } from './order-ahead.js';
import { RandomSampler } from './random-sampler.js';
import { epochPermutation, toU64 } from './rng.js';

describe('OrderAhead', () => {
  it('gives exactly epochPermutation(seed, epoch, n), whether the helper finished first or not', async () => {
    const n = ORDER_AHEAD_MIN + 17;
    const ahead = new OrderAhead(toU64(7), n);
    try {
      // Epoch 0 has no order ahead; epoch 1 is asked for at once (not ready yet, computed here);
      // later epochs wait long enough for the helper to have finished.
      assert.deepEqual(ahead.take(0), epochPermutation(7, 0, n));
      assert.deepEqual(ahead.take(1), epochPermutation(7, 1, n));
      let fromHelper = 0;
      for (let e = 2; e < 6; e++) {
        await sleep(300);
        const order = ahead.take(e);
        if (ahead.fromHelper > fromHelper) fromHelper = ahead.fromHelper;
        assert.deepEqual(order, epochPermutation(7, e, n), `epoch ${e}`);
      }
      assert.ok(fromHelper >= 1, 'the helper thread computed some orders');
      // Out of sequence: the order ahead is for another epoch, so this one is computed here.
      assert.deepEqual(ahead.take(9), epochPermutation(7, 9, n));
    } finally {
      ahead.close();
    }
    // Closed: still correct, computed on the calling thread.
    assert.deepEqual(ahead.take(3), epochPermutation(7, 3, n));
  });

  it('gives the loader sampler the same orders, large dataset or small', async () => {
    const small = new RandomSampler(100, 3).planAhead();
    assert.deepEqual(small.indices(0), epochPermutation(3, 0, 100));
    small.close();
    const big = new RandomSampler(ORDER_AHEAD_MIN, 3).planAhead();
    try {
      for (let e = 0; e < 3; e++) {
        assert.deepEqual(big.indices(e), epochPermutation(3, e, ORDER_AHEAD_MIN));
        await sleep(200);
      }
    } finally {
      big.close();
    }
  });
});
