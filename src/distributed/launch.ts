// Which rank this process is, read from the launcher that started it. One process per GPU is the
// model (reference §9): torchrun, SLURM's srun, Open MPI's mpirun and MPICH's hydra each export
// the rank and world size under their own names. The rule: explicit options win only when they
// agree with the environment; a launcher whose variables are partial or contradict each other is an
// error naming the variables, never a silent single-process run that trains on the whole dataset
// in every rank.

import { LoaderError, invalidOption, launchEnvError, show } from '../errors.js';

export type Launcher = 'torchrun' | 'openmpi' | 'mpich' | 'slurm' | 'options' | 'single';

export interface World {
  readonly rank: number;
  readonly worldSize: number;
  /** Rank among the processes of this host: picks the GPU for `device: 'cuda'`. Undefined when the launcher does not say. */
  readonly localRank: number | undefined;
  readonly localWorldSize: number | undefined;
  /** Where the values came from. */
  readonly launcher: Launcher;
}

interface Family {
  readonly launcher: Exclude<Launcher, 'options' | 'single'>;
  readonly rank: string;
  readonly size: string;
  readonly localRank: string | undefined;
  readonly localSize: string | undefined;
}

/**
 * In precedence order: a launcher started inside another one (torchrun under srun, mpirun under
 * SLURM) sets the inner, more specific variables, and those describe this process.
 */
const FAMILIES: readonly Family[] = [
  { launcher: 'torchrun', rank: 'RANK', size: 'WORLD_SIZE', localRank: 'LOCAL_RANK', localSize: 'LOCAL_WORLD_SIZE' },
  { launcher: 'openmpi', rank: 'OMPI_COMM_WORLD_RANK', size: 'OMPI_COMM_WORLD_SIZE', localRank: 'OMPI_COMM_WORLD_LOCAL_RANK', localSize: 'OMPI_COMM_WORLD_LOCAL_SIZE' },
  { launcher: 'mpich', rank: 'PMI_RANK', size: 'PMI_SIZE', localRank: 'MPI_LOCALRANKID', localSize: 'MPI_LOCALNRANKS' },
  { launcher: 'slurm', rank: 'SLURM_PROCID', size: 'SLURM_NTASKS', localRank: 'SLURM_LOCALID', localSize: 'SLURM_NTASKS_PER_NODE' },
];

type Env = Readonly<Record<string, string | undefined>>;

/** The rank and world size a launcher exported, or undefined when none did. */
export function detectLaunch(env: Env = process.env): World | undefined {
  for (const f of FAMILIES) {
    const present = [f.rank, f.size, f.localRank, f.localSize].filter((k): k is string => k !== undefined && env[k] !== undefined && env[k] !== '');
    if (present.length === 0) continue;
    if (env[f.rank] === undefined || env[f.size] === undefined || env[f.rank] === '' || env[f.size] === '') {
      const missing = [f.rank, f.size].filter((k) => env[k] === undefined || env[k] === '');
      throw launchEnvError(
        `the ${f.launcher} environment is partial: ${present.map((k) => `${k}=${env[k]}`).join(', ')} is set but ${missing.join(' and ')} ${missing.length > 1 ? 'are' : 'is'} not. ` +
          'Start every process through the launcher, or unset the stray variables, or pass rank and worldSize explicitly',
      );
    }
    const worldSize = envInt(env, f.size, 1);
    const rank = envInt(env, f.rank, 0);
    if (rank >= worldSize) throw launchConflict(`${f.rank}=${rank} is not below ${f.size}=${worldSize}`);
    // SLURM_NTASKS_PER_NODE may read "2(x3)" on heterogeneous allocations; only a plain number is used.
    const localSize = f.localSize !== undefined && env[f.localSize] !== undefined && /^\d+$/.test(env[f.localSize]!) ? envInt(env, f.localSize, 1) : undefined;
    const localRank = f.localRank !== undefined && env[f.localRank] !== undefined && env[f.localRank] !== '' ? envInt(env, f.localRank, 0) : undefined;
    if (localRank !== undefined && localSize !== undefined && localRank >= localSize) {
      throw launchConflict(`${f.localRank}=${localRank} is not below ${f.localSize}=${localSize}`);
    }
    if (localSize !== undefined && localSize > worldSize) throw launchConflict(`${f.localSize}=${localSize} exceeds ${f.size}=${worldSize}`);
    if (localRank !== undefined && localRank > rank) throw launchConflict(`${f.localRank}=${localRank} exceeds ${f.rank}=${rank}`);
    return { rank, worldSize, localRank, localWorldSize: localSize, launcher: f.launcher };
  }
  return undefined;
}

/**
 * This process's place in the world: explicit `rank` / `worldSize` / `localRank` options, checked
 * against the launcher's variables when both are there; the launcher's alone; or rank 0 of 1.
 */
export function resolveWorld(options: { rank?: unknown; worldSize?: unknown; localRank?: unknown }, env: Env = process.env): World {
  const { rank, worldSize, localRank } = options;
  if ((rank === undefined) !== (worldSize === undefined)) {
    throw invalidOption(rank === undefined ? 'rank' : 'worldSize', 'given together with ' + (rank === undefined ? '`worldSize`' : '`rank`'), rank === undefined ? rank : worldSize, 'Pass both rank and worldSize, or neither (then they come from the launcher: torchrun, srun, mpirun)');
  }
  const launched = detectLaunch(env);
  if (worldSize === undefined) {
    if (localRank !== undefined) checkLocalRank(localRank);
    if (launched === undefined) return { rank: 0, worldSize: 1, localRank: localRank as number | undefined, localWorldSize: undefined, launcher: 'single' };
    if (localRank !== undefined && launched.localRank !== undefined && localRank !== launched.localRank) {
      throw launchConflict(`option localRank=${localRank} but the ${launched.launcher} launcher says local rank ${launched.localRank}`);
    }
    return localRank === undefined ? launched : { ...launched, localRank: localRank as number };
  }
  if (typeof worldSize !== 'number' || !Number.isSafeInteger(worldSize) || worldSize < 1) throw invalidOption('worldSize', 'an integer ≥ 1', worldSize);
  if (typeof rank !== 'number' || !Number.isSafeInteger(rank) || rank < 0 || rank >= worldSize) throw invalidOption('rank', `an integer in [0, worldSize = ${worldSize})`, rank);
  if (localRank !== undefined) checkLocalRank(localRank);
  if (launched !== undefined && (launched.rank !== rank || launched.worldSize !== worldSize)) {
    throw launchConflict(`options say rank ${rank} of ${worldSize} but the ${launched.launcher} launcher says rank ${launched.rank} of ${launched.worldSize}`);
  }
  return { rank, worldSize, localRank: (localRank as number | undefined) ?? launched?.localRank, localWorldSize: launched?.localWorldSize, launcher: 'options' };
}

/**
 * The device of this rank: `'cuda'` means `cuda:<localRank>` when several ranks run; other names
 * pass through.
 */
export function rankDevice(device: string, world: World): string {
  if (device !== 'cuda' || world.worldSize === 1) return device;
  if (world.localRank === undefined) {
    throw launchEnvError(
      `device 'cuda' with ${world.worldSize} ranks needs this rank's local rank to pick its GPU, and the ${world.launcher} launcher does not export one. Pass localRank, or device: 'cuda:N'`,
    );
  }
  return `cuda:${world.localRank}`;
}

function checkLocalRank(v: unknown): void {
  if (typeof v !== 'number' || !Number.isSafeInteger(v) || v < 0) throw invalidOption('localRank', 'an integer ≥ 0', v);
}

function envInt(env: Env, name: string, min: number): number {
  const raw = env[name]!;
  const n = /^\s*\d+\s*$/.test(raw) ? Number(raw) : Number.NaN;
  if (!Number.isSafeInteger(n) || n < min) throw launchEnvError(`environment variable ${name}=${show(raw)} must be an integer ≥ ${min}`);
  return n;
}

function launchConflict(what: string): LoaderError {
  return launchEnvError(`the launch environment contradicts itself: ${what}. Fix the launcher's variables or drop the conflicting options`);
}
