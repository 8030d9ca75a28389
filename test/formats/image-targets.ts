// Fuzz targets for image-folder.test.ts: read a mutated image file and decode it the way an image
// folder does (every layout and channel path taken once per mutant).

import { readFileSync } from 'node:fs';
import { decodeImage } from '../../src/image/image-decode.js';

async function decodeAll(path: string): Promise<void> {
  const bytes = readFileSync(path);
  await decodeImage(bytes, { size: [12, 12], source: path });
  await decodeImage(bytes, { size: [7, 5], channels: 1, layout: 'hwc', fit: 'resize', source: path });
}

export const decodeJpeg = decodeAll;
export const decodePng = decodeAll;
