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

import type { Socket } from 'node:net';
import { DataLoader } from '../loader.js';
import type { Batch } from '../batch.js';
import type { AnyTensor } from '../device/device-tensor.js';
import { DeviceTensor } from '../device/device-tensor.js';
import { closeDataset } from '../dataset/dataset.js';
import { BatchError, LoaderError, describeCause, invalidOption } from '../errors.js';
import { CudaExport } from './cuda-export.js';
import { LineChannel, type Message, PROTOCOL_VERSION, ProtocolError, encodeIds } from './protocol.js';
import { FIELD_ALIGN, ShmRing } from './shm-ring.js';
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

export class Session {
  readonly id: number;
  readonly done: Promise<void>;
  readonly #config: SessionConfig;
  readonly #channel: LineChannel;
  #loader: DataLoader<AnyTensor> | undefined;
  #owned: unknown;
  #ring: ShmRing | undefined;
  #export: CudaExport | undefined;
  readonly #held = new Map<number, Held>();
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

  /** Disconnect the client (the server is shutting down); `done` settles once its loader closed. */
  drop(): void {
    this.#channel.destroy();
  }

  #receive(m: Message): void {
    this.#lastHeard = Date.now();
    // Releases and event handles act at once (the epoch pump may be waiting on them); the rest in order.
    if (m.op === 'release') return this.#release(m.seq as number, m.event as number | undefined);
    if (m.op === 'event') return this.#guard(() => this.#export?.openClientEvent(m.id as number, m.handle as string));
    if (m.op === 'slab-open') return this.#ring?.unlink(m.slab as number);
    this.#queue = this.#queue.then(() => this.#request(m)).catch((e: unknown) => this.#sendError(e));
  }

  async #request(m: Message): Promise<void> {
    switch (m.op) {
      case 'open':
        return this.#open(m.source, (m.options ?? {}) as Record<string, unknown>);
      case 'epoch': {
        const loader = this.#needLoader();
        await this.#stop();
        const abort = new AbortController();
        this.#run = { abort, finished: this.#pump(loader, m.epoch as number, abort.signal) };
        return;
      }
      case 'state':
        return this.#channel.send({ op: 'state', state: this.#needLoader().state() });
      case 'stop':
        await this.#stop();
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

  async #open(source: unknown, options: Record<string, unknown>): Promise<void> {
    await this.#teardown();
    const opts = { ...this.#config.options, ...options };
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
    this.#channel.send({
      op: 'opened', protocol: PROTOCOL_VERSION, names: loader.names, length: loader.length, numBatches: loader.numBatches,
      batchSize: loader.batchSize, device: loader.device, world: loader.world, state: loader.state(), slots: this.#config.slots,
    });
  }

  async #pump(loader: DataLoader<AnyTensor>, epoch: number, signal: AbortSignal): Promise<void> {
    const it = loader.epoch(epoch, { signal })[Symbol.asyncIterator]();
    let n = 0;
    try {
      for (;;) {
        await this.#credit(signal);
        const r = await it.next();
        if (r.done) break;
        await this.#deliver(r.value, loader.state(), signal);
        n++;
      }
      this.#export?.sweep((m) => this.#channel.send(m));
      this.#channel.send({ op: 'end', epoch, batches: n });
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

  async #deliver(batch: Batch<AnyTensor>, state: unknown, signal: AbortSignal): Promise<void> {
    const seq = this.#seq++;
    const send = (m: Message) => this.#channel.send(m);
    const tensors = batch.tensors;
    const fields: Record<string, unknown>[] = [];
    let held: Held;
    if (this.#export !== undefined) {
      batch.retain();
      const waits: bigint[] = [];
      for (let i = 0; i < tensors.length; i++) {
        const t = tensors[i] as DeviceTensor;
        const ev = t.readyEvent;
        if (ev !== undefined) waits.push(ev.handle);
        const { mem, offset } = this.#export.place(t.ptr, send);
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
      if (fresh) send({ op: 'slab', slab: slab.id, path: slab.path, bytes: slab.slotBytes * slab.slots, slotBytes: slab.slotBytes });
      for (let i = 0; i < tensors.length; i++) {
        const t = tensors[i]!;
        if (t instanceof DeviceTensor) throw new LoaderError('ERR_INVALID_TENSOR', 'stoker serve: a device tensor reached the CPU route');
        this.#ring!.write(slot, layout[i]!, t.data);
        fields.push({ name: batch.names[i], dtype: t.dtype, shape: t.shape, slab: slab.id, offset: slot * slab.slotBytes + layout[i]!, bytes: t.byteLength });
      }
      batch.release();
      held = { slab: slab.id, slot };
    }
    this.#held.set(seq, held);
    const same = batch.picks.every((p, i) => p === batch.sampleIds[i]);
    send({
      op: 'batch', seq, epoch: batch.epoch, index: batch.index, rows: batch.rows, ids: encodeIds(batch.sampleIds),
      ...(same ? {} : { picks: encodeIds(batch.picks) }), fields, ...(held.ready === undefined ? {} : { event: held.ready }), state,
    });
  }

  #release(seq: number, clientEvent: number | undefined): void {
    const h = this.#held.get(seq);
    if (h === undefined) return;
    this.#held.delete(seq);
    this.#guard(() => {
      if (h.ready !== undefined) this.#export?.released(h.ready, clientEvent);
      h.batch?.release();
      if (h.slab !== undefined) this.#ring?.release(h.slab, h.slot!);
    });
    this.#wake();
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

  #releaseHeld(): void {
    for (const seq of [...this.#held.keys()]) this.#release(seq, undefined);
  }

  /** End the epoch being streamed and take back every batch the client holds. */
  async #stop(): Promise<void> {
    const run = this.#run;
    this.#run = undefined;
    if (run !== undefined) {
      run.abort.abort(new Error('stopped'));
      // Take the client's batches back before waiting for the pump: on CUDA they are the loader's
      // device memory, which the pump's in-flight batch may be waiting for (the client synchronized
      // its stream before asking to stop, or is gone).
      this.#releaseHeld();
      this.#wake();
      await run.finished;
    }
    this.#releaseHeld();
    this.#ring?.releaseAll();
    this.#export?.settleAll();
  }

  async #teardown(): Promise<void> {
    await this.#stop();
    this.#ring?.close();
    this.#ring = undefined;
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

  #sendError(e: unknown): void {
    if (e instanceof BatchError) {
      this.#channel.send({ op: 'error', code: e.code, message: e.message, epoch: e.epoch, batch: e.batchIndex, ids: [...e.sampleIds] });
    } else if (e instanceof LoaderError || e instanceof ProtocolError) {
      this.#channel.send({ op: 'error', code: e.code, message: e.message });
    } else {
      this.#channel.send({ op: 'error', code: 'ERR_SERVE', message: describeCause(e) });
    }
  }
}
