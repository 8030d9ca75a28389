// The host half of the device gather: which kernel and grid a gather gets. Pure, so it runs anywhere;
// the kernels themselves are checked against a CPU gather in test/cuda/driver.test.ts on a GPU.

import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { gatherPlan } from './gather.js';

const base = 1n << 40n; // cuMemAlloc pointers are 256-byte aligned

describe('gatherPlan', () => {
  it('takes the widest vector that divides the row size and both pointers', () => {
    assert.equal(gatherPlan(base, base, 150528, 64, 132).width, 16);
    assert.equal(gatherPlan(base, base, 3072, 64, 132).width, 16);
    assert.equal(gatherPlan(base, base, 24, 64, 132).width, 8);
    assert.equal(gatherPlan(base, base, 12, 64, 132).width, 4);
    assert.equal(gatherPlan(base, base, 4, 64, 132).width, 4);
    assert.equal(gatherPlan(base, base, 3, 64, 132).width, 1);
    assert.equal(gatherPlan(base, base, 1, 64, 132).width, 1);
    assert.equal(gatherPlan(base, base + 4n, 16, 64, 132).width, 4, 'a misaligned source narrows the vector');
    assert.equal(gatherPlan(base + 8n, base, 3072, 64, 132).width, 8, 'a misaligned destination narrows the vector');
    assert.equal(gatherPlan(base, base + 1n, 150528, 64, 132).kernel, 'stoker_gather_rows_w1');
  });

  it('small rows take the flat path, big rows the tiled path', () => {
    assert.equal(gatherPlan(base, base, 4, 4096, 132).path, 'flat');
    assert.equal(gatherPlan(base, base, 3072, 256, 132).path, 'flat');
    assert.equal(gatherPlan(base, base, 150528, 256, 132).path, 'tiled');
    assert.equal(gatherPlan(base, base, 3072, 256, 132).kernel, 'stoker_gather_rows_w16');
  });

  it('sizes the grid to the work, capped at a few blocks per SM', () => {
    assert.equal(gatherPlan(base, base, 4, 256, 132).grid, 1, '256 labels are one block of work');
    assert.equal(gatherPlan(base, base, 150528, 4096, 132).grid, 132 * 4);
    assert.equal(gatherPlan(base, base, 150528, 1, 132).grid, 10, 'one huge row still spreads over blocks (tiles)');
    assert.equal(gatherPlan(base, base, 4, 1, 0).grid, 1);
  });
});
