// Internal: not exported from the package entry.
// Turns the `device` option into a Device. The rule: CUDA is loaded lazily — only a loader that asks
// for 'cuda' touches the driver — so CPU and sim users never need libcuda.

import { invalidOption } from '../errors.js';
import { AcceleratorDevice } from './accelerator/accelerator-device.js';
import { CpuDevice } from './cpu-device.js';
import type { Device } from './device.js';
import { SimBackend, type SimOptions } from './sim/sim-backend.js';

export const DEVICE_PATTERN = /^(cpu|sim|cuda(:\d+)?)$/;

export async function openDevice(name: string, sim: SimOptions | undefined, localRank = 0): Promise<Device> {
  if (name === 'cpu') return new CpuDevice();
  if (name === 'sim') return new AcceleratorDevice(new SimBackend(sim));
  const m = /^cuda(?::(\d+))?$/.exec(name);
  if (m === null) throw invalidOption('device', "'cpu', 'cuda', 'cuda:N' or 'sim'", name);
  const ordinal = m[1] !== undefined ? Number(m[1]) : localRank;
  const { CudaBackend } = await import('./cuda/cuda-backend.js');
  return new AcceleratorDevice(CudaBackend.open(ordinal));
}
