// Load TensorFlow.js for the demo and pick its backend. The rule: 'auto' takes the WASM backend
// when it initializes (measured here: about 7× the pure-JS CPU backend on the demo's MLP) and falls
// back to the CPU backend; tfjs is imported only by commands that train, so `stoker inspect` and
// `stoker bench` work without it.

import type * as tfjs from '@tensorflow/tfjs';

export type TfBackendChoice = 'auto' | 'wasm' | 'cpu';
export const TF_BACKENDS: readonly TfBackendChoice[] = ['auto', 'wasm', 'cpu'];

export interface LoadedTf {
  readonly tf: typeof tfjs;
  /** The backend in use: 'wasm' or 'cpu'. */
  readonly backend: string;
  /** Why 'auto' did not get WASM, when it did not. */
  readonly note: string | undefined;
}

const INSTALL = 'npm install @tensorflow/tfjs @tensorflow/tfjs-backend-wasm';

export async function loadTf(choice: TfBackendChoice): Promise<LoadedTf> {
  let tf: typeof tfjs;
  try {
    tf = await import('@tensorflow/tfjs');
  } catch (cause) {
    throw new Error(`training needs TensorFlow.js, which did not load (${(cause as Error).message.split('\n')[0]}). Install it: ${INSTALL}`, { cause });
  }
  // Production mode: no debug checks, and no "install tfjs-node" banner on the CPU backend.
  tf.enableProdMode();
  let note: string | undefined;
  if (choice !== 'cpu') {
    try {
      await import('@tensorflow/tfjs-backend-wasm');
      if (await tf.setBackend('wasm')) {
        await tf.ready();
        return { tf, backend: 'wasm', note };
      }
      note = 'the WASM backend did not initialize';
    } catch (cause) {
      note = `the WASM backend did not load (${(cause as Error).message.split('\n')[0]})`;
    }
    if (choice === 'wasm') throw new Error(`--backend wasm: ${note}. Install it (${INSTALL}) or pass --backend cpu`);
  }
  await tf.setBackend('cpu');
  await tf.ready();
  return { tf, backend: 'cpu', note };
}
