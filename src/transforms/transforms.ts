// Built-in transforms: keyed per pick, the same values on every device.

import { imageTransform } from './image.js';

export const transforms = {
  /**
   * The common image pipeline in one pass — random crop with zero padding, horizontal flip,
   * per-channel normalize, cast — on uint8 [N, C, H, W] images, on the CPU or the GPU:
   * `transform: transforms.image({ crop: { padding: 4 }, flip: true, normalize: { mean, std }, output: 'float16' })`.
   */
  image: imageTransform,
};
