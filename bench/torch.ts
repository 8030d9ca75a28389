// `npm run bench -- torch [flags]`: bench/torch_bench.py (PyTorch fed through stoker.torch against
// torch's DataLoader and a resident loop; docs/torch.md) run by the python that has torch. The rule:
// the flags go to the script as they are, and its exit code is this bench's.
//
//   npm run bench -- torch --steps 100 --workers 4,8 --server-timing      # on a GPU
//   npm run bench -- torch --device cpu                                    # model-free over shared memory

import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';

const SCRIPT = fileURLToPath(new URL('./torch_bench.py', import.meta.url));

export function main(args: readonly string[]): void {
  const python = process.env.STOKER_PYTHON ?? 'python3';
  const r = spawnSync(python, [SCRIPT, ...args], { stdio: 'inherit' });
  if (r.error !== undefined) throw new Error(`bench torch: could not run ${python} (set STOKER_PYTHON to a python with torch): ${r.error.message}`);
  process.exitCode = r.status ?? 1;
}
