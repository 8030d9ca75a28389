import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { AheadGate, DEFAULT_DECODE_AHEAD, DecodeTiming, decodeRouteKnobs, newFigures } from './decode-timing.js';
import { JpegSlots } from '../../../device/jpeg/jpeg-slots.js';

describe('the decode route’s read-ahead gate, slot tickets and timing', () => {
  it('the gate hands places out in FIFO order, calling `granted` synchronously at the hand-over; 0 is unbounded', async () => {
    const gate = new AheadGate(2);
    const order: number[] = [];
    const waits = [0, 1, 2, 3].map((i) => gate.enter(() => order.push(i)));
    assert.deepEqual(order, [0, 1]);
    assert.equal(waits[0], undefined);
    assert.ok(waits[2] instanceof Promise);
    gate.leave();
    assert.deepEqual(order, [0, 1, 2]);
    gate.leave();
    assert.deepEqual(order, [0, 1, 2, 3]);
    await Promise.all(waits);
    gate.leave();
    gate.leave();
    assert.equal(gate.used, 0);
    const open = new AheadGate(0);
    for (let i = 0; i < 100; i++) assert.equal(open.enter(() => {}), undefined);
  });

  it('slot tickets: granted in reservation order, a cancelled ticket passes its slot on, a waiting one leaves the queue, taking twice is refused', async () => {
    const slots = new JpegSlots(1, false);
    const a = slots.reserve();
    const b = slots.reserve();
    const c = slots.reserve();
    assert.equal(slots.held, 3);
    b.cancel(); // waiting: leaves the queue
    assert.equal(slots.held, 2);
    const sa = await a.take();
    let cGot = false;
    const cTaken = c.take().then((s) => ((cGot = true), s));
    await new Promise((r) => setImmediate(r));
    assert.equal(cGot, false);
    a.cancel(); // taken: a no-op
    slots.release(sa);
    const sc = await cTaken;
    assert.equal(sc.index, 0);
    c.cancel(); // taken while waiting: still a no-op (the call releases)
    assert.equal(slots.held, 1);
    await assert.rejects(c.take(), /twice/);
    slots.release(sc);
    assert.equal(slots.held, 0);
    // A granted ticket cancelled before it is taken gives its slot to the next.
    const d = slots.reserve();
    const e = slots.reserve();
    d.cancel();
    assert.equal((await e.take()).index, 0);
    slots.release(sc);
    await slots.whenIdle();
    slots.close();
  });

  it('knobs: STOKER_DECODE_AHEAD (0 … 64; a bad value names it), STOKER_DECODE_LEGACY, STOKER_DECODE_TIMING; the report names every phase', () => {
    assert.deepEqual(decodeRouteKnobs({}), { ahead: DEFAULT_DECODE_AHEAD, legacy: false, timing: false });
    assert.deepEqual(decodeRouteKnobs({ STOKER_DECODE_LEGACY: '1', STOKER_DECODE_TIMING: '1' }), { ahead: 0, legacy: true, timing: true });
    assert.equal(decodeRouteKnobs({ STOKER_DECODE_AHEAD: '0' }).ahead, 0);
    assert.throws(() => decodeRouteKnobs({ STOKER_DECODE_AHEAD: '-1' }), /STOKER_DECODE_AHEAD/);
    const t = new DecodeTiming();
    t.begin();
    t.add({ ...newFigures(), readMs: 4, decodeMs: 10, totalMs: 20 });
    t.add({ ...newFigures(), readMs: 2, decodeMs: 10, totalMs: 20 });
    const line = t.report(3, 8, decodeRouteKnobs({}));
    assert.match(line, /epoch 3 \[ahead 4\]: 2 batches/);
    for (const phase of ['ahead', 'files memory', 'reads 3.00', 'turn', 'slot', 'prep', 'probe', 'decode 10.00', 'hand-off', 'launch', 'cpu fallback', 'total 20.00', 'consumer waited 4.00']) assert.ok(line.includes(phase), phase);
  });
});
