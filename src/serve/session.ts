// Internal: not exported from the package entry.
// One client of `stoker serve`: its loader, the batches it holds, and the epoch being streamed to
// it. The rule: a batch is pulled from the loader only while the client holds fewer than `slots`
// batches, and everything it holds is freed when it leaves — by `close`, by disconnecting, or by
// holding every slot without a word for `idleMs` — so a dead consumer never leaks memory or hangs
// the loader. See NOTE [Serve leases].
//
// NOTE [Serve leases]
// CPU: each batch is copied into a shared-memory slot and released to the loader at once; the slot
// comes back with the client's release. CUDA: the batch itself is held (`retain()`) until the
// client's release, whose interprocess event the loader's stream waits on first, so the loader's
// own release event (and the reuse of the memory) comes after the client's last kernel on it.
// `epoch` and `stop` take back every batch the client holds but those it names in `keep`: batches
// its loop still holds (NOTE [Kept batches], python/stoker/torch.py), which stay leased, across
// epochs too, until a release line names them or the client leaves.
//
// NOTE [Client gather]
// A resident loader whose batches are just its rows (pipeline/client-gather.ts) need not hand over
// batches at all: when the client offers (`open` with `gather: true`), the session exports the
// resident columns once — CUDA IPC memory on the GPU, one shared-memory file on the CPU (its fields
// in `opened.gather`) — and answers each `epoch` with its plan (this rank's sample ids in order and
// the batch bounds). The client gathers every batch itself, on its own stream; nothing is sent per
// batch and nothing is leased (its batches are its own memory), so there is no slot to wait for and
// none to free when it dies. `state` with `{epoch, taken}` asks the loader's state once the client
// took that many batches of the epoch, for either of the last two plans sent: the client asks for
// the next epoch's plan as soon as it has this one's, so that the plan (tens of µs a batch of this
// process's CPU: the sampler's order, base64) is made while the client gathers, not while it waits
// at the start of the next epoch (H200 run 15: ~10 ms an epoch of 195 batches, a tenth of a
// model-free epoch). The columns stay valid until the loader closes.

import type { Socket } from 'node:net';
import { DataLoader } from '../loader.js';
import type { Batch } from '../batch.js';
import type { AnyTensor } from '../device/device-tensor.js';
import { DeviceTensor } from '../device/device-tensor.js';
import { closeDataset } from '../dataset/dataset.js';
import { BatchError, LoaderError, describeCause, invalidOption, invalidTensorError } from '../errors.js';
import { readSwitch } from '../base/env.js';
import { CudaExport } from './cuda-export.js';
import { LineChannel, type Message, NEXT_EPOCH, PROTOCOL_VERSION, ProtocolError, UNTRACKED, encodeFrame } from './protocol.js';
import type { LoaderState } from '../distributed/resume.js';
import { FIELD_ALIGN, ShmRing } from './shm-ring.js';
import { StoreFile } from './store-file.js';
import { type ClientEpoch, type ClientGather, kClientGather } from '../pipeline/client-gather.js';
import { openServeSource } from './source.js';

export interface SessionConfig {
  /** The CLI's source, used when `open` names none. */
  readonly source: unknown;
  /** The CLI's loader options; `open`'s options override them key by key. */
  readonly options: Readonly<Record<string, unknown>>;
  /** Batches the client may hold at once. */
  readonly slots: number;
  /** A client holding every slot and silent this long is dropped. */
  readonly idleMs: number;
  readonly log: (line: string) => void;
}

interface Held {
  readonly batch?: Batch<AnyTensor>;
  readonly slab?: number;
  readonly slot?: number;
  readonly ready?: number;
}

/** Layouts the server remembers before it tells the client to forget them all ({op: 'layout-reset'}). */
const MAX_LAYOUTS = 256;

export class Session {
  readonly id: number;
  readonly done: Promise<void>;
  readonly #config: SessionConfig;
  readonly #channel: LineChannel;
  #loader: DataLoader<AnyTensor> | undefined;
  #owned: unknown;
  #ring: ShmRing | undefined;
  #export: CudaExport | undefined;
  /** NOTE [Client gather]: the loader's plans, the epoch the client gathers now, the CPU columns' file. */
  #gather: ClientGather | undefined;
  /** The plans sent, by epoch: the one gathered and the one the client asked ahead for (the last two). */
  readonly #gatherEpochs = new Map<number, ClientEpoch>();
  #storeFile: StoreFile | undefined;
  readonly #held = new Map<number, Held>();
  /** loader.state() right after each of the last batches sent, by seq (NOTE [Lean frames], protocol.ts). */
  readonly #states = new Map<number, unknown>();
  /** Field layouts sent to the client, by a key of their descriptors. */
  readonly #layouts = new Map<string, number>();
  #nextLayout = 0;
  /** The epoch of the last `state-base` sent (NOTE [Known state], protocol.ts). */
  #baseSent: number | undefined;
  /** Whether frames carry sample ids and picks (`open` with `ids: true`). */
  #ids = false;
  readonly #timing: Timing | undefined = readSwitch('serveTiming') ? new Timing() : undefined;
  #seq = 0;
  #run: { abort: AbortController; finished: Promise<void> } | undefined;
  #queue: Promise<void> = Promise.resolve();
  #waiters: (() => void)[] = [];
  #lastHeard = Date.now();
  #ended = false;
  #resolveDone!: () => void;

  constructor(id: number, socket: Socket, config: SessionConfig) {
    this.id = id;
    this.#config = config;
    this.done = new Promise((r) => (this.#resolveDone = r));
    this.#channel = new LineChannel(socket, (m) => this.#receive(m), (why) => void this.#end(why));
  }

  /**
   * Disconnect the client (the server is shutting down); `done` settles once its loader closed.
   * With `why`, the client is told first (an `error` it raises at its next batch), then the socket closes.
   */
  drop(why?: LoaderError): void {
    if (why === undefined) {
      this.#channel.destroy();
      return;
    }
    this.#sendError(why);
    this.#channel.close();
  }

  #receive(m: Message): void {
    this.#lastHeard = Date.now();
    // Releases and event handles act at once (the epoch pump may be waiting on them); the rest in order.
    if (m.op === 'release-many') return this.#release(m.seqs as number[], m.event as number | undefined);
    if (m.op === 'release') return this.#release([m.seq as number], m.event as number | undefined);
    if (m.op === 'event') return this.#guard(() => this.#export?.openClientEvent(m.id as number, m.handle as string));
    if (m.op === 'slab-open') return this.#ring?.unlink(m.slab as number);
    if (m.op === 'store-open') return this.#storeFile?.unlink();
    this.#queue = this.#queue.then(() => this.#request(m)).catch((e: unknown) => this.#sendError(e, m.op));
  }

  async #request(m: Message): Promise<void> {
    switch (m.op) {
      case 'open':
        return this.#open(m.source, objectOf(m.options), objectOf(m.defaults), m.ids === true, m.gather === true);
      case 'epoch': {
        const loader = this.#needLoader();
        if (this.#gather !== undefined) return this.#plan(m.epoch);
        await this.#stop(keepOf(m));
        const abort = new AbortController();
        this.#run = { abort, finished: this.#pump(loader, m.epoch as number, abort.signal) };
        return;
      }
      case 'state': {
        const loader = this.#needLoader();
        if (m.taken !== undefined) return this.#channel.send({ op: 'state', state: this.#gatherState(m.epoch, m.taken), epoch: m.epoch, taken: m.taken });
        if (m.seq === undefined || m.seq === null) return this.#channel.send({ op: 'state', state: loader.state() });
        const state = this.#states.get(m.seq as number);
        if (state === undefined) {
          throw new ProtocolError(`stoker serve: no state kept for batch ${JSON.stringify(m.seq)}: the server keeps the state after each of the last ${this.#config.slots + 2} batches it sent; ask for the batch the client took last`);
        }
        return this.#channel.send({ op: 'state', state, seq: m.seq });
      }
      case 'stop':
        await this.#stop(keepOf(m));
        return this.#channel.send({ op: 'stopped' });
      case 'close':
        try {
          await this.#teardown();
          this.#channel.send({ op: 'closed' });
        } catch (e) {
          // Still an answer: a client waiting for `closed` must never wait forever.
          this.#config.log(`stoker serve: closing client ${this.id}'s loader failed: ${describeCause(e)}`);
          this.#channel.send({ op: 'closed', error: describeCause(e) });
        }
        this.#channel.end();
        // Done with this client whether or not it closes its end.
        void this.#end('closed');
        return;
      default:
        throw new ProtocolError(`stoker serve: unknown op ${JSON.stringify(m.op)}`);
    }
  }

  async #open(source: unknown, options: Record<string, unknown>, defaults: Record<string, unknown>, ids: boolean, gather: boolean): Promise<void> {
    await this.#teardown();
    this.#ids = ids;
    this.#baseSent = undefined;
    // The client's defaults (torch's, for the Python client) under the command line's, under what it asked for.
    const opts = { ...defaults, ...this.#config.options, ...options };
    // A 64-bit seed crosses JSON as a decimal string (a JSON number loses what is past 2^53).
    if (typeof opts.seed === 'string' && /^\d{1,20}$/.test(opts.seed)) opts.seed = BigInt(opts.seed);
    const device = String(opts.device ?? 'cpu');
    if (device === 'sim') throw invalidOption('device', "'cpu' or 'cuda[:N]' (a simulated GPU's memory cannot leave the process)", device, "Serve with device 'cpu' or 'cuda'");
    const opened = await openServeSource(source ?? this.#config.source);
    let loader: DataLoader<AnyTensor>;
    try {
      loader = await DataLoader.create(opened.dataset, opts as never);
    } catch (e) {
      if (opened.owned) await closeDataset(opened.dataset);
      throw e;
    }
    this.#loader = loader;
    this.#owned = opened.owned ? opened.dataset : undefined;
    if (loader.device.startsWith('cuda')) this.#export = new CudaExport(loader.cudaStream!, loader.device);
    else this.#ring = new ShmRing(this.#config.slots);
    const exported = gather ? this.#exportColumns(loader) : undefined;
    this.#channel.send({
      op: 'opened', protocol: PROTOCOL_VERSION, names: loader.names, length: loader.length, numBatches: loader.numBatches,
      batchSize: loader.batchSize, device: loader.device, world: loader.world, state: loader.state(), slots: this.#config.slots,
      ...(exported === undefined ? {} : { gather: exported }),
    });
  }

  /** NOTE [Client gather]: the resident columns, exported once; undefined when the loader's batches are more than its rows. */
  #exportColumns(loader: DataLoader<AnyTensor>): Record<string, unknown> | undefined {
    const g = loader[kClientGather]();
    if (g === undefined || g.columns.length === 0) return undefined;
    const rows = g.columns[0]!.rows;
    this.#gather = g;
    if (this.#export !== undefined) {
      const send = (m: Message) => this.#channel.send(m);
      const fields = g.columns.map((c) => {
        const { mem, offset } = this.#export!.place(c.ptr!, send);
        return { name: c.name, dtype: c.dtype, shape: c.shape, mem, offset, bytes: c.bytes };
      });
      return { rows, fields };
    }
    const file = new StoreFile(g.columns.map((c) => c.data!), this.id);
    this.#storeFile = file;
    const fields = g.columns.map((c, i) => ({ name: c.name, dtype: c.dtype, shape: c.shape, offset: file.offsets[i]!, bytes: c.bytes }));
    return { rows, fields, path: file.path, fileBytes: file.bytes };
  }

  /** NOTE [Client gather]: start epoch `epoch` and send its plan. */
  #plan(epoch: unknown): void {
    const e = this.#gather!.epoch(epoch as number);
    this.#gatherEpochs.delete(e.plan.epoch);
    this.#gatherEpochs.set(e.plan.epoch, e);
    for (const old of this.#gatherEpochs.keys()) if (this.#gatherEpochs.size > 2) this.#gatherEpochs.delete(old);
    const p = e.plan;
    const b64 = (a: Uint32Array) => Buffer.from(a.buffer, a.byteOffset, a.byteLength).toString('base64');
    const known = e.track();
    this.#channel.send({
      op: 'plan', epoch: p.epoch, batches: p.batches, batchSize: p.batchSize, rows: p.samples.length, samples: b64(p.samples),
      ...(p.bounds === undefined ? {} : { bounds: b64(p.bounds) }),
      ...(this.#ids && p.picks !== p.samples ? { picks: b64(p.picks) } : {}),
      positions: b64(Uint32Array.from(known.positions, (x) => (x < 0 ? NEXT_EPOCH : Math.min(x, UNTRACKED)))), bases: [known.base, known.next],
    });
  }

  #gatherState(epoch: unknown, taken: unknown): unknown {
    const e = this.#gatherEpochs.get(epoch as number);
    if (e === undefined) {
      const sent = [...this.#gatherEpochs.keys()];
      throw new ProtocolError(`stoker serve: no plan of epoch ${JSON.stringify(epoch)} is being gathered (${sent.length === 0 ? 'none is' : `plans sent: epoch ${sent.join(', ')}`}); ask for the state of the epoch the client gathers`);
    }
    return e.at(taken as number);
  }

  async #pump(loader: DataLoader<AnyTensor>, epoch: number, signal: AbortSignal): Promise<void> {
    const it = loader.epoch(epoch, { signal })[Symbol.asyncIterator]();
    const t = this.#timing;
    t?.begin();
    let n = 0;
    try {
      for (;;) {
        let t0 = t?.now() ?? 0;
        await this.#credit(signal);
        if (t !== undefined) t0 = t.add('waiting for a release', t0);
        const r = await it.next();
        if (t !== undefined) t0 = t.add('the loader (it.next)', t0);
        if (r.done) break;
        await this.#deliver(r.value, loader.state(), signal);
        if (t !== undefined) t.add('deliver (copy / export, frame)', t0);
        n++;
      }
      this.#export?.sweep((m) => this.#channel.send(m));
      this.#channel.send({ op: 'end', epoch, batches: n });
      if (t !== undefined) this.#config.log(`stoker serve: client ${this.id} epoch ${epoch}: ${t.report(n)}; ${this.#nextLayout} layouts sent so far`);
    } catch (e) {
      if (signal.aborted) return;
      this.#sendError(e);
    } finally {
      try {
        await it.return?.();
      } catch {
        // the epoch is over either way
      }
    }
  }

  async #deliver(batch: Batch<AnyTensor>, state: LoaderState, signal: AbortSignal): Promise<void> {
    const seq = this.#seq++;
    const send = (m: Message) => this.#channel.send(m);
    const tensors = batch.tensors;
    // The layout's key: every descriptor of every field (a new shape, slab or allocation is a new layout).
    let key = '';
    const fields: Record<string, unknown>[] = [];
    let held: Held;
    let slotIndex = 0;
    let stride = 0;
    if (this.#export !== undefined) {
      batch.retain();
      const waits: bigint[] = [];
      for (let i = 0; i < tensors.length; i++) {
        const t = tensors[i] as DeviceTensor;
        const ev = t.readyEvent;
        if (ev !== undefined) waits.push(ev.handle);
        const { mem, offset } = this.#export.place(t.ptr, send);
        key += `${batch.names[i]}|${t.dtype}|${t.shape.join(',')}|${mem}|${offset}|${t.byteLength};`;
        fields.push({ name: batch.names[i], dtype: t.dtype, shape: t.shape, mem, offset, bytes: t.byteLength });
      }
      held = { batch, ready: this.#export.ready(waits, send) };
    } else {
      const layout: number[] = [];
      let bytes = 0;
      for (const t of tensors) {
        layout.push(bytes);
        bytes += Math.ceil(t.byteLength / FIELD_ALIGN) * FIELD_ALIGN;
      }
      const { slab, slot, fresh } = await this.#ring!.acquire(bytes, signal);
      if (fresh) {
        send({ op: 'slab', slab: slab.id, path: slab.path, bytes: slab.slotBytes * slab.slots, slotBytes: slab.slotBytes });
        // Layouts name their slab: the old slab's are gone with it (the client drops them at `slab`).
        this.#layouts.clear();
      }
      for (let i = 0; i < tensors.length; i++) {
        const t = tensors[i]!;
        if (t instanceof DeviceTensor) throw invalidTensorError('stoker serve: a device tensor reached the CPU route');
        this.#ring!.write(slot, layout[i]!, t.data);
        key += `${batch.names[i]}|${t.dtype}|${t.shape.join(',')}|${layout[i]}|${t.byteLength};`;
        fields.push({ name: batch.names[i], dtype: t.dtype, shape: t.shape, slab: slab.id, offset: layout[i]!, bytes: t.byteLength });
      }
      batch.release();
      held = { slab: slab.id, slot };
      slotIndex = slot;
      stride = slab.slotBytes;
    }
    let layoutId = this.#layouts.get(key);
    if (layoutId === undefined) {
      if (this.#layouts.size >= MAX_LAYOUTS) {
        this.#layouts.clear();
        send({ op: 'layout-reset' });
      }
      layoutId = this.#nextLayout++;
      this.#layouts.set(key, layoutId);
      send({ op: 'layout', id: layoutId, stride, fields });
    }
    this.#held.set(seq, held);
    this.#states.set(seq, state);
    this.#states.delete(seq - (this.#config.slots + 2));
    let ids: Uint32Array | undefined;
    let picks: Uint32Array | undefined;
    if (this.#ids) {
      ids = batch.sampleIds;
      if (!batch.picks.every((p, i) => p === batch.sampleIds[i])) picks = batch.picks;
    }
    this.#channel.sendFrame(encodeFrame({
      seq, epoch: batch.epoch, index: batch.index, rows: batch.rows, layout: layoutId, slot: slotIndex, position: this.#position(batch.epoch, state),
      ...(held.ready === undefined ? {} : { event: held.ready }), ...(ids === undefined ? {} : { ids }), ...(picks === undefined ? {} : { picks }),
    }));
  }

  /**
   * NOTE [Known state] (protocol.ts): the frame's position of `state`, the loader's state right after a batch
   * of `epoch`; the base state it is a position in goes out first when the client does not have it yet.
   */
  #position(epoch: number, state: LoaderState): number {
    const next = state.epoch === epoch + 1 && state.position === 0;
    if (!next && (state.epoch !== epoch || state.position >= UNTRACKED)) return UNTRACKED;
    if (this.#baseSent !== state.epoch) {
      this.#channel.send({ op: 'state-base', state: { ...state, position: 0 } });
      this.#baseSent = state.epoch;
    }
    return next ? NEXT_EPOCH : state.position;
  }

  /** The client is done with batches `seqs` (after its IPC event `clientEvent`, on CUDA). */
  #release(seqs: readonly number[], clientEvent: number | undefined): void {
    let any = false;
    this.#guard(() => {
      let waited = false;
      for (const seq of seqs) {
        const h = this.#held.get(seq);
        if (h === undefined) continue;
        this.#held.delete(seq);
        any = true;
        if (h.ready !== undefined && this.#export !== undefined) {
          // Once for all of them: the client recorded its event after its last use of each.
          if (!waited) this.#export.waitClient(clientEvent);
          waited = true;
          this.#export.settled(h.ready);
        }
        h.batch?.release();
        if (h.slab !== undefined) this.#ring?.release(h.slab, h.slot!);
      }
    });
    if (any) this.#wake();
  }

  /** Wait until the client holds fewer than `slots` batches; drop a client that holds them all in silence. */
  async #credit(signal: AbortSignal): Promise<void> {
    while (this.#held.size >= this.#config.slots) {
      signal.throwIfAborted();
      await new Promise<void>((resolve, reject) => {
        const check = () => {
          const quiet = Date.now() - this.#lastHeard;
          if (quiet < this.#config.idleMs) {
            timer = setTimeout(check, this.#config.idleMs - quiet + 1);
            return;
          }
          this.#config.log(`stoker serve: client ${this.id} holds all ${this.#config.slots} slots and sent nothing for ${Math.round(quiet / 1000)} s; dropping it`);
          this.#channel.destroy();
          reject(new Error('client dropped'));
        };
        let timer = setTimeout(check, this.#config.idleMs);
        const onAbort = () => {
          clearTimeout(timer);
          reject(signal.reason);
        };
        signal.addEventListener('abort', onAbort, { once: true });
        this.#waiters.push(() => {
          clearTimeout(timer);
          signal.removeEventListener('abort', onAbort);
          resolve();
        });
      });
    }
  }

  #wake(): void {
    const w = this.#waiters;
    this.#waiters = [];
    for (const f of w) f();
  }

  #releaseHeld(keep: ReadonlySet<number>): void {
    this.#release([...this.#held.keys()].filter((seq) => !keep.has(seq)), undefined);
  }

  /** End the epoch being streamed and take back every batch the client holds but those in `keep` (NOTE [Serve leases]). */
  async #stop(keep: ReadonlySet<number> = NONE): Promise<void> {
    const run = this.#run;
    this.#run = undefined;
    if (run !== undefined) {
      run.abort.abort(new Error('stopped'));
      // Take the client's batches back before waiting for the pump: on CUDA they are the loader's
      // device memory, which the pump's in-flight batch may be waiting for (the client synchronized
      // its stream before asking to stop, or is gone).
      this.#releaseHeld(keep);
      this.#wake();
      await run.finished;
    }
    this.#releaseHeld(keep);
    // What is still held now is what the client keeps: every other slot and ready event is free.
    const kept = [...this.#held.values()];
    this.#ring?.reclaim(kept);
    this.#export?.settleAll(kept.flatMap((h) => (h.ready === undefined ? [] : [h.ready])));
  }

  async #teardown(): Promise<void> {
    await this.#stop();
    this.#states.clear();
    // A new ring or export numbers its slabs and allocations from 0 again: no old layout may match.
    this.#layouts.clear();
    this.#ring?.close();
    this.#ring = undefined;
    this.#storeFile?.unlink();
    this.#storeFile = undefined;
    this.#gather = undefined;
    this.#gatherEpochs.clear();
    // The interprocess events live in the loader's CUDA context: destroy them while it exists (a
    // destroy after the loader closed failed, the close request answered an error the client never
    // read, and both sides waited forever). An event still waited on is freed once the wait is done.
    this.#export?.close();
    this.#export = undefined;
    if (this.#loader !== undefined) {
      // Work the client queued may still read the memory: the loader's close synchronizes the device first.
      await this.#loader.close();
      this.#loader = undefined;
    }
    if (this.#owned !== undefined) await closeDataset(this.#owned);
    this.#owned = undefined;
  }

  async #end(why: string): Promise<void> {
    if (this.#ended) return;
    this.#ended = true;
    const holding = this.#held.size;
    if (this.#loader !== undefined || holding > 0) {
      this.#config.log(`stoker serve: client ${this.id} ${why}${holding > 0 ? ` holding ${holding} batch${holding === 1 ? '' : 'es'}; freed them` : ''}`);
    }
    // A `close` request ends the session from inside the queue: do not wait for the queue then.
    if (why !== 'closed') await this.#queue.catch(() => {});
    try {
      await this.#teardown();
    } catch (e) {
      this.#config.log(`stoker serve: closing client ${this.id}'s loader failed: ${describeCause(e)}`);
    }
    this.#resolveDone();
  }

  #guard(f: () => void): void {
    try {
      f();
    } catch (e) {
      this.#sendError(e);
    }
  }

  #needLoader(): DataLoader<AnyTensor> {
    if (this.#loader === undefined) throw new ProtocolError("stoker serve: no loader yet; send {op: 'open'} first");
    return this.#loader;
  }

  /** `request`: the op the error answers (a client waiting for that answer takes it; others belong to the epoch). */
  #sendError(e: unknown, request?: string): void {
    const req = request === undefined ? {} : { request };
    if (e instanceof BatchError) {
      this.#channel.send({ op: 'error', code: e.code, message: e.message, epoch: e.epoch, batch: e.batchIndex, ids: [...e.sampleIds], ...req });
    } else if (e instanceof LoaderError || e instanceof ProtocolError) {
      this.#channel.send({ op: 'error', code: e.code, message: e.message, ...req });
    } else {
      this.#channel.send({ op: 'error', code: 'ERR_SERVE', message: describeCause(e), ...req });
    }
  }
}

const NONE: ReadonlySet<number> = new Set();

/** The seqs of `keep` in an `epoch` or `stop` request (NOTE [Serve leases]): the batches the client keeps. */
function keepOf(m: Message): ReadonlySet<number> {
  if (m.keep === undefined) return NONE;
  if (!Array.isArray(m.keep) || !m.keep.every((seq) => Number.isSafeInteger(seq) && (seq as number) >= 0)) {
    throw new ProtocolError(`stoker serve: \`keep\` of ${m.op} must be an array of batch seqs, got ${JSON.stringify(m.keep).slice(0, 80)}`);
  }
  return new Set(m.keep as number[]);
}

/** The env switch `serveTiming` (base/env.ts): where the server's time per batch goes, logged at each epoch's end. */
class Timing {
  readonly #total = new Map<string, number>();
  #start = performance.now();

  begin(): void {
    this.#total.clear();
    this.#start = performance.now();
  }

  now(): number {
    return performance.now();
  }

  /** Adds the time since `t0` to `what`; returns now. */
  add(what: string, t0: number): number {
    const t = performance.now();
    this.#total.set(what, (this.#total.get(what) ?? 0) + (t - t0));
    return t;
  }

  report(batches: number): string {
    const wall = performance.now() - this.#start;
    const per = (ms: number) => `${((ms * 1000) / Math.max(1, batches)).toFixed(1)} µs`;
    const parts = [...this.#total].map(([what, ms]) => `${what} ${per(ms)}`);
    return `${batches} batches, ${per(wall)} a batch: ${parts.join(', ')}`;
  }
}

/** An object field of a message, or {} when it is absent (a malformed one is the loader's to refuse). */
function objectOf(v: unknown): Record<string, unknown> {
  return (v ?? {}) as Record<string, unknown>;
}
