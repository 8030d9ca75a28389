import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { describe, it } from 'node:test';
import { LoaderError } from '../errors.js';
import { PickKey } from '../sampler/pick-key.js';
import { Rng } from '../sampler/rng.js';
import { type BoxDraws, type CropBox, boxFor, boxFromDraws, roundHalfEven, viewFrom } from './crop-box.js';

const PYTHON = '/usr/bin/python3';
const numpyMissing = (() => {
  const r = spawnSync(PYTHON, ['-c', 'import numpy'], { encoding: 'utf8', timeout: 30_000 });
  return r.status === 0 ? false : `${PYTHON} with numpy is not installed here; the torchvision transcription is not checked`;
})();

/** Records every draw, so that a Python transcription can replay the same values. */
class Recorder implements BoxDraws {
  readonly log: Array<['f', number] | ['i', number, number]> = [];
  constructor(private readonly rng: Rng) {}
  f64(): number {
    const v = this.rng.f64();
    this.log.push(['f', v]);
    return v;
  }
  below(n: number): number {
    const v = this.rng.below(n);
    this.log.push(['i', n, v]);
    return v;
  }
}

// torchvision.transforms.RandomResizedCrop.get_params (v0.14), with torch's draws replaced by the
// recorded ones, and torchvision's Resize(int) + CenterCrop(int) offsets; numpy does the float64 math.
const TRANSCRIPTION = String.raw`
import json, math, sys
import numpy as np
cases = json.load(sys.stdin)
out = []
for c in cases:
    draws = list(c['draws'])
    def uniform(a, b):
        kind, u = draws.pop(0)
        assert kind == 'f'
        return a + (b - a) * u
    def randint(lo, hi):
        kind, n, v = draws.pop(0)
        assert kind == 'i' and n == hi - lo, (n, hi - lo)
        return lo + v
    width, height = c['width'], c['height']
    flip = False
    if c['flip']:
        flip = uniform(0.0, 1.0) < 0.5
    if c['kind'] == 'rrc':
        scale, ratio = c['scale'], c['ratio']
        area = height * width
        log_ratio = np.log(np.array(ratio, dtype=np.float64))
        box = None
        for _ in range(10):
            target_area = area * uniform(scale[0], scale[1])
            aspect_ratio = float(np.exp(uniform(log_ratio[0], log_ratio[1])))
            w = int(round(math.sqrt(target_area * aspect_ratio)))
            h = int(round(math.sqrt(target_area / aspect_ratio)))
            if 0 < w <= width and 0 < h <= height:
                i = randint(0, height - h + 1)
                j = randint(0, width - w + 1)
                box = (i, j, h, w)
                break
        if box is None:
            in_ratio = float(width) / float(height)
            if in_ratio < min(ratio):
                w = width
                h = int(round(w / min(ratio)))
            elif in_ratio > max(ratio):
                h = height
                w = int(round(h * max(ratio)))
            else:
                w = width
                h = height
            box = ((height - h) // 2, (width - w) // 2, h, w)
    else:
        size, crop = c['resize'], c['crop']
        short, long = (width, height) if width <= height else (height, width)
        new_short, new_long = size, int(size * long / short)
        new_w, new_h = (new_short, new_long) if width <= height else (new_long, new_short)
        top = int(round((new_h - crop) / 2.0))
        left = int(round((new_w - crop) / 2.0))
        sx, sy = width / new_w, height / new_h
        bw = min(width, max(1, int(round(crop * sx))))
        bh = min(height, max(1, int(round(crop * sy))))
        box = (min(height - bh, max(0, int(round(top * sy)))), min(width - bw, max(0, int(round(left * sx)))), bh, bw)
    assert not draws, 'unused draws'
    i, j, h, w = box
    out.append({'left': j, 'top': i, 'width': w, 'height': h, 'flip': flip})
print(json.dumps(out))
`;

function inside(box: CropBox, width: number, height: number): boolean {
  return [box.left, box.top, box.width, box.height].every(Number.isInteger) && box.left >= 0 && box.top >= 0 && box.width >= 1 && box.height >= 1 && box.left + box.width <= width && box.top + box.height <= height;
}

describe('crop boxes (RandomResizedCrop, eval recipe, flip)', () => {
  it('the same pick and image size always give the same box, and another epoch gives another', () => {
    const view = viewFrom('train');
    const a = boxFor(view, new PickKey(17, 0, 3, 42), 500, 375);
    const b = boxFor(view, new PickKey(17, 0, 3, 42), 500, 375);
    assert.deepEqual(a, b);
    const others = [1, 2, 4, 5, 6].map((epoch) => boxFor(view, new PickKey(17, 0, epoch, 42), 500, 375));
    assert.ok(others.some((o) => JSON.stringify(o) !== JSON.stringify(a)), 'five other epochs all gave the same box');
  });

  it('every box lies inside its image, for tiny, narrow, wide and large images', () => {
    const view = viewFrom({ randomResizedCrop: true, flip: true });
    const evalView = viewFrom('eval');
    const sizes: Array<[number, number]> = [[1, 1], [1, 40], [40, 1], [3, 2], [500, 375], [375, 500], [4000, 30], [2048, 2048]];
    for (const [w, h] of sizes) {
      for (let s = 0; s < 200; s++) {
        const key = new PickKey(s, s % 3, 1, 7);
        assert.ok(inside(boxFor(view, key, w, h), w, h), `${w}×${h} sample ${s}`);
        assert.ok(inside(boxFor(evalView, key, w, h), w, h), `eval ${w}×${h}`);
      }
    }
  });

  it('RandomResizedCrop boxes cover the scale range and keep the ratio range on a large image', () => {
    const view = viewFrom({ randomResizedCrop: { scale: [0.08, 1], ratio: [3 / 4, 4 / 3] } });
    let minArea = 1;
    let maxArea = 0;
    for (let s = 0; s < 2000; s++) {
      const box = boxFor(view, new PickKey(s, 0, 0, 1), 1000, 1000);
      const area = (box.width * box.height) / 1e6;
      minArea = Math.min(minArea, area);
      maxArea = Math.max(maxArea, area);
      const r = box.width / box.height;
      // Rounding w and h to whole pixels moves the ratio a little past the range on small boxes.
      assert.ok(r > 0.74 && r < 1.35, `ratio ${r}`);
      assert.equal(box.flip, false);
    }
    assert.ok(minArea < 0.1 && minArea >= 0.079, `smallest area fraction ${minArea}`);
    assert.ok(maxArea > 0.9, `largest area fraction ${maxArea}`);
  });

  it('a flip view flips about half of the picks', () => {
    const view = viewFrom({ flip: true });
    let flips = 0;
    for (let s = 0; s < 4000; s++) {
      const box = boxFor(view, new PickKey(s, 0, 0, 9), 64, 48);
      assert.deepEqual([box.left, box.top, box.width, box.height], [0, 0, 64, 48]);
      if (box.flip) flips++;
    }
    assert.ok(flips > 1800 && flips < 2200, `${flips} flips of 4000`);
  });

  it('an image too thin for any try falls back to the central crop clamped to the ratio range', () => {
    // 1000 × 10: any box of ≥ 8 % of the area with ratio ≤ 4/3 is taller than 10, so all ten tries fail.
    const view = viewFrom({ randomResizedCrop: true });
    const box = boxFor(view, new PickKey(0, 0, 0, 0), 1000, 10);
    assert.deepEqual(box, { left: Math.floor((1000 - 13) / 2), top: 0, width: 13, height: 10, flip: false });
    const tall = boxFor(view, new PickKey(0, 0, 0, 0), 10, 1000);
    assert.deepEqual(tall, { left: 0, top: Math.floor((1000 - 13) / 2), width: 10, height: 13, flip: false });
  });

  it('the eval box is Resize(256) + CenterCrop(224) in source pixels', () => {
    const view = viewFrom('eval');
    // 512 × 512 → 256 × 256, crop offset 16: source box 32..480.
    assert.deepEqual(boxFor(view, new PickKey(0, 0, 0, 0), 512, 512), { left: 32, top: 32, width: 448, height: 448, flip: false });
    // 500 × 375 → 341 × 256 (int(256·500/375)), left = round(58.5) = 58 (ties to even), scale 500/341.
    const b = boxFor(view, new PickKey(0, 0, 0, 0), 500, 375);
    assert.deepEqual(b, { left: roundHalfEven(58 * (500 / 341)), top: roundHalfEven(16 * (375 / 256)), width: roundHalfEven(224 * (500 / 341)), height: roundHalfEven(224 * (375 / 256)), flip: false });
  });

  it('Python rounding: ties go to the even integer', () => {
    assert.deepEqual([0.5, 1.5, 2.5, -0.5, -1.5, 2.4999, 2.5001].map(roundHalfEven), [0, 2, 2, -0, -2, 2, 3]);
  });

  it('bad views are LoaderErrors that name the knob', () => {
    const bad: unknown[] = ['training', 3, { randomResizedCrop: { scale: [0.5, 0.2] } }, { randomResizedCrop: { ratio: [0, 1] } }, { randomResizedCrop: { scale: [0.1, 2] } },
      { centerCrop: { resize: 256, crop: 300 } }, { randomResizedCrop: true, centerCrop: true }, { flip: 'yes' }, { randomResizedCrop: { scales: [0.1, 1] } }, { crop: true }];
    for (const v of bad) {
      assert.throws(() => viewFrom(v as never), (e: unknown) => e instanceof LoaderError && e.code === 'ERR_INVALID_OPTION' && e.message.includes('view'), JSON.stringify(v));
    }
  });

  it('boxes equal a numpy transcription of torchvision get_params fed the same draws', { skip: numpyMissing, timeout: 60_000 }, () => {
    const cases: unknown[] = [];
    const expected: CropBox[] = [];
    const views = [
      { opt: { randomResizedCrop: true, flip: true } as const, py: { kind: 'rrc', scale: [0.08, 1], ratio: [3 / 4, 4 / 3], flip: true } },
      { opt: { randomResizedCrop: { scale: [0.5, 1], ratio: [0.5, 2] } } as const, py: { kind: 'rrc', scale: [0.5, 1], ratio: [0.5, 2], flip: false } },
      { opt: { randomResizedCrop: { scale: [0.9, 1], ratio: [1, 1] } } as const, py: { kind: 'rrc', scale: [0.9, 1], ratio: [1, 1], flip: false } },
      { opt: 'eval' as const, py: { kind: 'eval', resize: 256, crop: 224, flip: false } },
      { opt: { centerCrop: { resize: 160, crop: 128 }, flip: true } as const, py: { kind: 'eval', resize: 160, crop: 128, flip: true } },
    ];
    const sizes: Array<[number, number]> = [[500, 375], [375, 500], [400, 350], [1000, 10], [10, 1000], [7, 5], [1, 1], [640, 480], [333, 333]];
    let s = 0;
    for (const { opt, py } of views) {
      const view = viewFrom(opt);
      for (const [width, height] of sizes) {
        for (let r = 0; r < 40; r++, s++) {
          const rec = new Recorder(new PickKey(s, r % 2, 5, 1234).rng());
          const box = boxFromDraws(view, rec, width, height);
          assert.deepEqual(box, boxFor(view, new PickKey(s, r % 2, 5, 1234), width, height));
          expected.push(box);
          cases.push({ ...py, width, height, draws: rec.log });
        }
      }
    }
    const run = spawnSync(PYTHON, ['-c', TRANSCRIPTION], { input: JSON.stringify(cases), encoding: 'utf8', timeout: 50_000, maxBuffer: 64 << 20 });
    assert.equal(run.status, 0, run.stderr);
    const got = JSON.parse(run.stdout) as CropBox[];
    assert.equal(got.length, expected.length);
    for (let k = 0; k < got.length; k++) assert.deepEqual(expected[k], got[k], `case ${k}: ${JSON.stringify(cases[k]).slice(0, 200)}`);
  });
});
