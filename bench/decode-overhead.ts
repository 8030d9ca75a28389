// `bench decode-overhead`: what the loader costs around one image decode process. The same files
// and the ImageNet training view (RandomResizedCrop 224 + flip + normalize) three ways, one process
// decoding: (1) `decodeImage` in this thread, (2) a DecodePool of one child fed directly (a few
// requests in flight, the parent only collects the replies), (3) sources.imageFolder with
// decodeProcesses 1 through DataLoader, with one reader worker and with none. The rule: (3) against
// (2) is the loader's cost; (2) against (1) is the process boundary's. Figures are images/s over a
// pass after a warm-up pass, and the parent's CPU ms per image (process.cpuUsage: every thread of
// this process, reader workers included; the child's own time is not in it).
//
//   npm run bench -- decode-overhead [--files 1200] [--classes 20] [--take N (images per pass; default all)] [--output float32|bfloat16|uint8] [--batch 64]

import { parseArgs } from 'node:util';
import { DataLoader } from '../src/index.js';
import { DecodePool } from '../src/image/processes/decode-pool.js';
import { type DecodeImageOptions, decodeImage } from '../src/image/image-decode.js';
import { imageFolderSource } from '../src/dataset/formats/images/image-folder.js';
import { viewFrom } from '../src/image/crop-box.js';
import { fixture } from './images.js';
import { UsageError, fmtFixed, fmtInt, hardwareLine, table } from './util.js';

const MEAN = [0.485, 0.456, 0.406];
const STD = [0.229, 0.224, 0.225];
const USAGE = 'npm run bench -- decode-overhead [--files 1200] [--classes 20] [--take N] [--output float32|bfloat16|uint8] [--batch 64]';

interface Row {
  readonly how: string;
  readonly imagesPerS: number;
  readonly parentMs: number;
}

async function timed(how: string, images: number, run: () => Promise<void>): Promise<Row> {
  await run();
  const c0 = process.cpuUsage();
  const t0 = performance.now();
  await run();
  const s = (performance.now() - t0) / 1000;
  const c = process.cpuUsage(c0);
  return { how, imagesPerS: images / s, parentMs: (c.user + c.system) / 1000 / images };
}

export async function main(args: readonly string[]): Promise<void> {
  let v: Record<string, string | boolean | undefined>;
  try {
    ({ values: v } = parseArgs({ args: [...args], strict: true, options: { take: { type: 'string' }, files: { type: 'string', default: '1200' }, classes: { type: 'string', default: '20' }, output: { type: 'string', default: 'float32' }, batch: { type: 'string', default: '64' } } }));
  } catch (error) {
    throw new UsageError(`${(error as Error).message}\nusage: ${USAGE}`);
  }
  const output = v.output as 'float32' | 'bfloat16' | 'uint8';
  if (!['float32', 'bfloat16', 'uint8'].includes(output)) throw new UsageError(`bad --output\nusage: ${USAGE}`);
  const dir = await fixture(Number(v.files), Number(v.classes));
  const batch = Number(v.batch);
  const normalize = output === 'uint8' ? undefined : { mean: MEAN, std: STD };
  const source = imageFolderSource(dir, { size: 224, view: 'train', normalize, output, decode: 'processes', decodeProcesses: 1 });
  const batchesPerPass = v.take === undefined ? Infinity : Math.ceil(Number(v.take) / batch);
  const take = v.take === undefined ? source.length : Math.min(source.length, batchesPerPass * batch);
  if (!(Number.isInteger(take) && take >= 1)) throw new UsageError(`bad --take\nusage: ${USAGE}`);
  // Every file once, in a shuffled order, for the direct rows (the loader's rows shuffle too).
  const order = Array.from({ length: source.length }, (_, i) => i).sort((a, b) => ((a * 2654435761) >>> 0) - ((b * 2654435761) >>> 0));
  const paths = order.slice(0, take).map((i) => source.pathOf(i) as string);
  await source.close();
  const view = viewFrom('train');
  const options = (i: number): DecodeImageOptions => ({ size: [224, 224], source: paths[i]!, view: { view, sample: i, repeat: 0, epoch: 0, seed: { hi: 0, lo: 1 } }, normalize, output });
  console.log(`bench decode-overhead: ${hardwareLine()}; ${dir} (${paths.length} of ${source.length} files a pass); RandomResizedCrop(224) + flip${normalize ? ' + normalize' : ''}, ${output}`);
  const rows: Row[] = [];
  const { readFile } = await import('node:fs/promises');
  rows.push(await timed('decodeImage in this thread (file read included)', paths.length, async () => {
    for (let i = 0; i < paths.length; i++) await decodeImage(await readFile(paths[i]!), options(i));
  }));
  const pool = new DecodePool({ size: 1 });
  try {
    rows.push(await timed('DecodePool of 1 child, fed directly (4 in flight)', paths.length, async () => {
      let next = 0;
      await Promise.all(Array.from({ length: 4 }, async () => {
        for (let i = next++; i < paths.length; i = next++) await pool.decode({ path: paths[i]! }, options(i));
      }));
    }));
  } finally {
    await pool.close();
  }
  for (const workers of [1, 0]) {
    const src = imageFolderSource(dir, { size: 224, view: 'train', normalize, output, decode: 'processes', decodeProcesses: 1 });
    const loader = await DataLoader.create(src, { batchSize: batch, shuffle: true, workers });
    let epoch = 0;
    try {
      rows.push(await timed(`DataLoader, ${workers} reader worker${workers === 1 ? '' : 's'} × 1 decode process`, paths.length, async () => {
        let k = 0;
        for await (const b of loader.epoch(epoch++)) if (++k >= batchesPerPass && b !== undefined) break;
      }));
    } finally {
      await loader.close();
      await src.close();
    }
  }
  console.log(table(rows, [
    { title: 'how', cell: (r) => r.how },
    { title: 'images/s', align: 'right', cell: (r) => fmtInt(r.imagesPerS) },
    { title: 'parent CPU ms/image', align: 'right', cell: (r) => fmtFixed(r.parentMs, 2) },
  ]));
  const direct = rows[1]!;
  for (const r of rows.slice(2)) console.log(`${r.how}: ${((1 - r.imagesPerS / direct.imagesPerS) * 100).toFixed(1)} % below the pool fed directly`);
}
