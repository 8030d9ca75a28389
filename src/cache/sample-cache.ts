// Internal: not exported from the package entry.
// The RAM sample cache: samples read from the source, kept in shared memory across epochs, keyed by
// sample id and shared by every reader thread (a sample read by one worker is served to all).
// Fill until full, never evict: under a fresh uniform shuffle each epoch any K retained samples of N
// serve K/N of reads, so eviction would only add churn. A shrinking budget only stops admissions.
//
// NOTE [Shared cache protocol]
// index[id]: 0 = absent, -1 = claimed by a writer, k+1 = stored at cache row k (published with
// Atomics.store after the bytes are written, so a reader that sees k+1 sees the whole row).
// control[NEXT] is the next free row, claimed by compare-and-swap below control[CAPACITY].
// Rows live in chunks of `rowsPerChunk` rows; the main thread allocates chunks and posts them to the
// workers before raising CAPACITY, and a thread only claims or reads rows of chunks it has received,
// so a message that has not arrived yet costs a miss, never a wrong read.

export interface SampleCacheShared {
  readonly length: number;
  readonly sampleBytes: number;
  readonly rowsPerChunk: number;
  readonly index: Int32Array;
  readonly control: Int32Array;
  readonly chunks: readonly SharedArrayBuffer[];
}

const NEXT = 0;
const CAPACITY = 1;
const CHUNK_TARGET_BYTES = 64 * 2 ** 20;

export class SampleCache {
  readonly shared: SampleCacheShared;
  readonly #chunks: Uint8Array[] = [];

  private constructor(shared: SampleCacheShared) {
    this.shared = shared;
    this.addChunks(shared.chunks);
  }

  /** Main thread: an empty cache for `length` samples of `sampleBytes` (dormant until a budget is set). */
  static create(length: number, sampleBytes: number): SampleCache {
    const rowsPerChunk = Math.max(1, Math.floor(CHUNK_TARGET_BYTES / Math.max(sampleBytes, 1)));
    return new SampleCache({
      length,
      sampleBytes,
      rowsPerChunk,
      index: new Int32Array(new SharedArrayBuffer(length * 4)),
      control: new Int32Array(new SharedArrayBuffer(4 * 4)),
      chunks: [],
    });
  }

  /** A reader thread's handle on a cache made elsewhere. */
  static attach(shared: SampleCacheShared): SampleCache {
    return new SampleCache(shared);
  }

  addChunks(chunks: readonly SharedArrayBuffer[]): void {
    for (let i = this.#chunks.length; i < chunks.length; i++) this.#chunks.push(new Uint8Array(chunks[i]!));
  }

  /** Rows this thread can address. */
  get #rows(): number {
    return this.#chunks.length * this.shared.rowsPerChunk;
  }

  /** Bytes retained (rows claimed × sample bytes). */
  get heldBytes(): number {
    return Math.min(Atomics.load(this.shared.control, NEXT), this.capacity) * this.shared.sampleBytes;
  }

  get capacity(): number {
    return Atomics.load(this.shared.control, CAPACITY);
  }

  get rowsHeld(): number {
    return Math.min(Atomics.load(this.shared.control, NEXT), this.capacity);
  }

  /**
   * Main thread: admit up to `rows` samples from now on (a lower value stops admissions; content
   * stays). Returns the chunks to post to workers when the capacity grew.
   */
  setCapacity(rows: number): SharedArrayBuffer[] | undefined {
    const target = Math.max(0, Math.min(Math.floor(rows), this.shared.length));
    const chunks = this.shared.chunks as SharedArrayBuffer[];
    let grew = false;
    while (chunks.length * this.shared.rowsPerChunk < target) {
      const rowsInChunk = Math.min(this.shared.rowsPerChunk, this.shared.length - chunks.length * this.shared.rowsPerChunk);
      chunks.push(new SharedArrayBuffer(rowsInChunk * this.shared.sampleBytes));
      grew = true;
    }
    this.addChunks(chunks);
    // Never lower below what is held: retained rows keep serving; NEXT ≥ CAPACITY stops admissions.
    Atomics.store(this.shared.control, CAPACITY, Math.max(target, 0));
    return grew ? chunks.slice() : undefined;
  }

  /** The cached bytes of sample `id`, or undefined. */
  lookup(id: number): Uint8Array | undefined {
    if (id < 0 || id >= this.shared.length) return undefined;
    const v = Atomics.load(this.shared.index, id);
    if (v <= 0) return undefined;
    return this.#row(v - 1);
  }

  /**
   * Keep `bytes` (one packed sample) for `id` if there is room. Returns false when full, when another
   * thread holds or is writing `id`, or when the row is in a chunk this thread has not received.
   */
  admit(id: number, bytes: Uint8Array): boolean {
    const { index, control } = this.shared;
    if (id < 0 || id >= this.shared.length) return false;
    if (Atomics.compareExchange(index, id, 0, -1) !== 0) return false;
    for (;;) {
      const next = Atomics.load(control, NEXT);
      if (next >= Atomics.load(control, CAPACITY) || next >= this.#rows) {
        Atomics.store(index, id, 0);
        return false;
      }
      if (Atomics.compareExchange(control, NEXT, next, next + 1) === next) {
        this.#row(next)!.set(bytes);
        Atomics.store(index, id, next + 1);
        return true;
      }
    }
  }

  #row(k: number): Uint8Array | undefined {
    const chunk = this.#chunks[Math.floor(k / this.shared.rowsPerChunk)];
    if (chunk === undefined) return undefined;
    const off = (k % this.shared.rowsPerChunk) * this.shared.sampleBytes;
    return chunk.subarray(off, off + this.shared.sampleBytes);
  }
}
