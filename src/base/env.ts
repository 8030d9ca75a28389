// Internal: not exported from the package entry.
// Every environment switch Stoker reads, in one table: its variable, what it does, its default, its
// kind ('user': a setting a user may need; 'bench': a benchmark or diagnostic knob) and its parser.
// The rules:
// - This is the only file of src/ (tests aside) that names a switch (env.test.ts checks it);
//   docs/env.md lists the same table (checked too).
// - A switch is read where and when its user reads it, through `readSwitch`, which looks at the
//   environment at that moment: some are read at module load (once per thread or process), others
//   per call (a test may set process.env between calls). The table says which.
// - A parser takes the raw string (undefined when unset) and returns the typed value, or throws the
//   typed error the reading site always threw for a bad value.
// - Worker threads and child processes inherit process.env, so they read the same switches.

import { invalidOption } from '../errors.js';

export type SwitchKind = 'user' | 'bench';

export interface Switch<T> {
  /** The environment variable. */
  readonly name: string;
  readonly kind: SwitchKind;
  /** The default, in words (docs/env.md). */
  readonly default: string;
  /** The loader or source option doing the same, if any, and which one wins. */
  readonly option?: string;
  /** What it does, and when it is read. */
  readonly doc: string;
  readonly parse: (raw: string | undefined) => T;
}

const knob = <T>(s: Switch<T>): Switch<T> => s;

/** An integer in [lo, hi]; unset or empty: undefined; anything else: `bad(raw)` is thrown. */
function intIn(lo: number, hi: number, bad: (raw: string) => Error): (raw: string | undefined) => number | undefined {
  return (raw) => {
    if (raw === undefined || raw === '') return undefined;
    const n = Number(raw);
    if (!Number.isInteger(n) || n < lo || n > hi) throw bad(raw);
    return n;
  };
}

/** On unless the value is exactly `off`. */
const unlessOff = (raw: string | undefined): boolean => raw !== 'off';

const HELD = 'STOKER_DECODE_HELD';
const NICE = 'STOKER_DECODE_NICE';
const CHILD_FLAGS = 'STOKER_DECODE_CHILD_FLAGS';

export const SWITCHES = {
  vramPool: knob({
    name: 'STOKER_VRAM_POOL',
    kind: 'user',
    default: 'on',
    option: '`vramPool: false` (either one turns the pool off)',
    doc: '`off` or `0` (any case, spaces trimmed) turns the VRAM sample pool off in every loader of the process. Read at each loader create.',
    parse: (raw): boolean => {
      const v = raw?.trim().toLowerCase();
      return !(v === 'off' || v === '0');
    },
  }),
  cacheDir: knob({
    name: 'STOKER_CACHE_DIR',
    kind: 'user',
    default: '$XDG_CACHE_HOME/stoker, else ~/.cache/stoker',
    option: '`remoteFiles(…, { dir })` (the option wins)',
    doc: 'The node cache of remote datasets (s3://, http(s)://; docs/remote.md): one folder shared by every process of the machine. Read when a node cache is made.',
    parse: (raw): string | undefined => raw || undefined,
  }),
  cacheBytes: knob({
    name: 'STOKER_CACHE_BYTES',
    kind: 'user',
    default: 'half the free space of the cache\'s disk, when first needed',
    option: '`remoteFiles(…, { bytes })` (the option wins)',
    doc: 'Most bytes of remote files the node cache keeps; past it, files whose next use is furthest away are evicted first. Read when a node cache first needs its budget.',
    parse: intIn(1, Number.MAX_SAFE_INTEGER, (raw) => invalidOption('STOKER_CACHE_BYTES', 'a whole number of bytes ≥ 1', raw)),
  }),
  remoteDeadline: knob({
    name: 'STOKER_REMOTE_DEADLINE_MS',
    kind: 'user',
    default: '120000',
    option: '`remoteFiles(…, { retry: { deadlineMs } })` (the option wins)',
    doc: 'How long a remote request that keeps failing for a reason retrying can fix (503 SlowDown, 5xx, a reset, a cut body) is retried before ERR_REMOTE. Read when a node cache is made.',
    parse: intIn(0, Number.MAX_SAFE_INTEGER, (raw) => invalidOption('STOKER_REMOTE_DEADLINE_MS', 'a whole number of milliseconds ≥ 0', raw)),
  }),
  nvjpeg: knob({
    name: 'STOKER_NVJPEG',
    kind: 'user',
    default: 'unset: $CUDA_HOME/lib64, $CUDA_PATH/lib64, /usr/local/cuda/lib64, then the dynamic loader',
    doc: 'The path of libnvjpeg.so, tried first when GPU JPEG decoding loads nvJPEG (once per process, at its first use; a failure is remembered).',
    parse: (raw): string | undefined => raw || undefined,
  }),
  turboJpeg: knob({
    name: 'STOKER_TURBOJPEG',
    kind: 'user',
    default: "unset: the prebuilt libturbojpeg.so.0 of @julusian/jpeg-turbo (Linux)",
    doc: 'The path of a libjpeg-turbo ≥ 3.0 for the crop decode of the CPU image route, or `off` to turn that route off (libvips then decodes). Read at module load, in each thread and decode process.',
    parse: (raw): string | false | undefined => (raw === 'off' ? false : raw === undefined || raw === '' ? undefined : raw),
  }),
  jpegSlots: knob({
    name: 'STOKER_JPEG_SLOTS',
    kind: 'user',
    default: '2',
    doc: 'GPU JPEG decodes in flight (decode slots, each with its own nvJPEG state and scratch), 1 to 8. Read each time a GPU JPEG decoder opens; the decoder\'s own `slots` (internal) wins.',
    parse: intIn(1, 8, (raw) => invalidOption('STOKER_JPEG_SLOTS', 'an integer from 1 to 8 (decodes in flight)', raw)),
  }),
  decodeReaders: knob({
    name: 'STOKER_DECODE_READERS',
    kind: 'user',
    default: 'cores − 1, at least 2, at most 4',
    doc: 'Reader threads of the GPU decode route (they read the files into page-locked memory), 1 to 64. Read each time the route starts its readers.',
    parse: intIn(1, 64, (raw) => invalidOption('STOKER_DECODE_READERS', 'an integer from 1 to 64 (reader threads of the GPU decode route)', raw)),
  }),
  walkThreads: knob({
    name: 'STOKER_WALK_THREADS',
    kind: 'bench',
    default: 'one per core, at most 8; 1 on 2 cores or fewer',
    doc: 'Threads of a cold image-folder walk (1: the one-thread walk); a value that is not an integer ≥ 1 is ignored. Read at each walk.',
    parse: (raw): number | undefined => {
      const n = Number(raw);
      return Number.isInteger(n) && n >= 1 ? n : undefined;
    },
  }),
  jpegWorkers: knob({
    name: 'STOKER_JPEG_WORKERS',
    kind: 'bench',
    default: 'the decoder\'s: worker threads',
    doc: '`1` runs the GPU JPEG decode slots on worker threads, `0` inline on the calling thread (no overlap); anything else: the default. Read each time a decoder opens.',
    parse: (raw): boolean | undefined => (raw === '0' ? false : raw === '1' ? true : undefined),
  }),
  decodeAhead: knob({
    name: 'STOKER_DECODE_AHEAD',
    kind: 'bench',
    default: '4 (0 with STOKER_DECODE_LEGACY=1)',
    doc: 'Batches of the GPU decode route reading or holding their files at once, 0 to 64 (0: no bound). Read each time the route is built.',
    parse: intIn(0, 64, (raw) => invalidOption('STOKER_DECODE_AHEAD', 'an integer from 0 to 64 (batches of the GPU decode route reading or holding their files at once; 0: no bound)', raw)),
  }),
  decodeLegacy: knob({
    name: 'STOKER_DECODE_LEGACY',
    kind: 'bench',
    default: 'off',
    doc: '`1`: the GPU decode route as of H200 run 12 (the launch-turn chain, no read-ahead bound), for A/B runs. Read each time the route is built.',
    parse: (raw): boolean => raw === '1',
  }),
  decodeTiming: knob({
    name: 'STOKER_DECODE_TIMING',
    kind: 'bench',
    default: 'off',
    doc: 'Any value but empty or `0`: the GPU decode route logs where a batch\'s time goes to stderr at each epoch\'s end. Read each time the route is built.',
    parse: (raw): boolean => raw !== undefined && raw !== '' && raw !== '0',
  }),
  serveTiming: knob({
    name: 'STOKER_SERVE_TIMING',
    kind: 'bench',
    default: 'off',
    doc: 'Any non-empty value (even `0`): `stoker serve` logs where its time per batch goes at each epoch\'s end. Read at each session\'s start.',
    parse: (raw): boolean => Boolean(raw),
  }),
  decodeHeld: knob({
    name: HELD,
    kind: 'bench',
    default: '2',
    doc: 'Requests one image decode process holds at once, 1 to 8. Read at module load by the parent and its decode processes alike.',
    parse: (raw): number => {
      if (raw === undefined || raw === '') return 2;
      const n = Number(raw);
      if (!Number.isInteger(n) || n < 1 || n > 8) throw new TypeError(`${HELD}=${JSON.stringify(raw)}: give the requests a decode process holds at once, an integer from 1 to 8 (default 2), or unset it`);
      return n;
    },
  }),
  decodeNice: knob({
    name: NICE,
    kind: 'bench',
    default: '0',
    doc: 'How much nicer (lower CPU priority) than the parent the image decode processes run, 0 to 19. Read at module load.',
    parse: (raw): number => {
      if (raw === undefined || raw === '') return 0;
      const n = Number(raw);
      if (!Number.isInteger(n) || n < 0 || n > 19) throw new TypeError(`${NICE}=${JSON.stringify(raw)}: give how much lower than the parent's the decode processes' CPU priority is, an integer from 0 to 19, or unset it`);
      return n;
    },
  }),
  decodeChildFlags: knob({
    name: CHILD_FLAGS,
    kind: 'bench',
    default: 'none',
    doc: 'Extra Node/V8 flags for every image decode process, space-separated, each starting with `--` (e.g. `--single-threaded-gc`). Read at each spawn.',
    parse: (raw): string[] => {
      const flags = (raw ?? '').split(/\s+/).filter((f) => f !== '');
      for (const f of flags) {
        if (!f.startsWith('--')) throw new TypeError(`${CHILD_FLAGS}=${JSON.stringify(raw)}: ${JSON.stringify(f)} is not a flag; give Node/V8 flags that start with "--", separated by spaces (e.g. "--single-threaded-gc"), or unset it`);
      }
      return flags;
    },
  }),
  decodeSlab: knob({
    name: 'STOKER_DECODE_SLAB',
    kind: 'bench',
    default: 'set by the decode pool',
    doc: 'Internal, not to be set by hand: the decode pool names a child\'s slab file (its replies\' pixels) in the child\'s environment; the child reads it at start.',
    parse: (raw): string | undefined => raw,
  }),
  wasm: knob({
    name: 'STOKER_WASM',
    kind: 'bench',
    default: 'on',
    doc: '`off` turns the WebAssembly resampler off (the JavaScript loops run). Read at module load, in each thread and decode process.',
    parse: unlessOff,
  }),
  vipsDirect: knob({
    name: 'STOKER_VIPS_DIRECT',
    kind: 'bench',
    default: 'on',
    doc: '`off` turns the direct libvips decode route off (the sharp path decodes every image). Read at module load, in each thread and decode process.',
    parse: unlessOff,
  }),
  shmMmap: knob({
    name: 'STOKER_SHM_MMAP',
    kind: 'bench',
    default: 'on (Linux)',
    doc: '`off`: `stoker serve` writes its shared-memory slabs with pwrite instead of mapping them. Read once per process, at the first slab.',
    parse: unlessOff,
  }),
  nativeCopy: knob({
    name: 'STOKER_NATIVE_COPY',
    kind: 'bench',
    default: 'on (Linux)',
    doc: '`off`: large copies in shared memory are done in JavaScript instead of libc\'s memcpy. Read once per thread, at the first large copy.',
    parse: unlessOff,
  }),
};

export type SwitchKey = keyof typeof SWITCHES;
export type SwitchValue<K extends SwitchKey> = ReturnType<(typeof SWITCHES)[K]['parse']>;

/** The switch's value in `env` now (process.env unless given), parsed; a bad value throws its typed error. */
export function readSwitch<K extends SwitchKey>(key: K, env: NodeJS.ProcessEnv = process.env): SwitchValue<K> {
  const s = SWITCHES[key] as Switch<SwitchValue<K>>;
  return s.parse(env[s.name]);
}

/** `raw` parsed as the switch's value would be (a bad value throws its typed error). */
export function parseSwitch<K extends SwitchKey>(key: K, raw: string | undefined): SwitchValue<K> {
  return (SWITCHES[key] as Switch<SwitchValue<K>>).parse(raw);
}

/** The switch's environment variable (for messages, and for a parent setting it in a child's environment). */
export function switchName(key: SwitchKey): string {
  return SWITCHES[key].name;
}

/** The table of docs/env.md, one row a switch in table order (env.test.ts checks the file holds exactly these rows). */
export function switchTableRows(): string[] {
  const cell = (s: string) => s.replace(/\|/g, '\\|');
  return Object.values(SWITCHES).map((s: Switch<unknown>) => `| \`${s.name}\` | ${s.kind} | ${cell(s.default)} | ${cell(s.option ?? '—')} | ${cell(s.doc)} |`);
}
