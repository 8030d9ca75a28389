// Internal: not exported from the package entry.
// Row-level reads of Arrow IPC record batches, straight from the file: the rows a batch of ids asks
// for are read at their place in each column's buffers (the record batch's buffer table, vetted by
// the index), with positioned reads that merge neighbouring rows, instead of decoding the whole
// record batch. Shuffled ids touch most record batches in every batch of ids, so this is what makes
// a shuffled epoch over a file larger than the decode cache cost rows, not record batches.
//
// The rule: what comes out is byte for byte what apache-arrow's decode of the record batch gives to
// arrow-columns.ts (`gather`, `rowBytes`), and each row is checked as those check it and refused
// with the same errors. Every offset read from the file is checked against its buffer before it is
// used; a record batch whose layout apache-arrow would refuse (a buffer missing from the table, one
// not aligned for its typed array) is marked for the decode path, which reports it.

import { type DataType, type Field, type Schema, Type } from 'apache-arrow';
import { show } from '../../../errors.js';
import { type Storage, elementSize } from '../../../tensor/dtype.js';
import type { BatchHeaders } from './arrow-index.js';
import { type BytesColumn, type BytesKind, type ColumnPlan, type TensorColumn, type Where, corrupt, nullInTensor, nullRow, raggedRow, uint64Row } from './arrow-columns.js';
import type { PositionedFile } from '../file.js';

/**
 * Where the selected columns' rows are, per record batch: structured-cloneable, so reader workers
 * receive it with the index. For column c and record batch k, `slots[c]` holds `nodes[c]` nodes of
 * `SLOTS` numbers from `(k * nodes[c]) * SLOTS`: the field node's length and null count, then
 * (offset, length) in the body of its validity bitmap and of up to two more buffers (list or value
 * offsets, values). Tensor columns: one node per list level, then the leaf (A = offsets of a list
 * level, A = values at the leaf). Decoder columns: the column (A = offsets, B = bytes; or A = bytes
 * for fixed-size binary); Hugging Face structs: the struct, its bytes child, its path child.
 */
export interface RowTable {
  readonly nodes: readonly number[];
  readonly slots: readonly Float64Array[];
  /** Per record batch: 1 when every selected column can be read by row, 0 when it goes to the decode path. */
  readonly direct: Uint8Array;
}

export const SLOTS = 8;
const LENGTH = 0;
const NULLS = 1;
const VALIDITY = 2;
const VALIDITY_LENGTH = 3;
const A = 4;
const A_LENGTH = 5;
const B = 6;
const B_LENGTH = 7;

/**
 * Reads closer than this are merged into one: a positioned read costs ~3 µs through readSync
 * (measured), copying 4 KiB more from the page cache a fraction of that.
 */
const MERGE_GAP = 4096;
/** Most bytes one merged read covers (a single row larger than this is still one read). */
const MAX_MERGED = 4 * 2 ** 20;
const EMPTY = new Uint8Array(0);

// ---- the table ---------------------------------------------------------------------------------

/** Where a field's node and buffers sit in a record batch's tables, children included. */
interface FieldLayout {
  readonly node: number;
  readonly buffers: readonly number[];
  readonly children: readonly FieldLayout[];
}

/**
 * The row table for `plans`, or undefined when a selected column has no fixed place per row (view
 * types), or a type before one (a union) takes buffers this walk does not count.
 */
export function buildRowTable(schema: Schema, plans: readonly ColumnPlan[], headers: BatchHeaders): RowTable | undefined {
  if (plans.length === 0 || plans.some((p) => !rowReadable(p))) return undefined;
  const last = Math.max(...plans.map((p) => p.field));
  const count = headers.nodes.length;
  const nodes = plans.map(nodesOf);
  const slots = plans.map((_, c) => new Float64Array(count * nodes[c]! * SLOTS));
  const direct = new Uint8Array(count);
  const layouts = new Map<string, FieldLayout[] | undefined>();
  for (let k = 0; k < count; k++) {
    const variadic = headers.variadic[k]!;
    const key = variadic.join(',');
    if (!layouts.has(key)) layouts.set(key, layoutFields(schema.fields, last, variadic));
    const fields = layouts.get(key);
    if (fields === undefined) return undefined;
    const table = { nodes: headers.nodes[k]!, buffers: headers.buffers[k]! };
    // A compressed record batch's rows have no place in the file: it is read whole and decompressed.
    direct[k] = !headers.compressed[k] && plans.every((p, c) => fill(p, fields[p.field]!, table, slots[c]!, k * nodes[c]! * SLOTS)) ? 1 : 0;
  }
  return { nodes, slots, direct };
}

/** Nodes a column takes in the row table per record batch. */
export function nodesOf(p: ColumnPlan): number {
  return p.kind === 'tensor' ? p.levels.length + 1 : p.struct === undefined ? 1 : 3;
}

function rowReadable(p: ColumnPlan): boolean {
  if (p.kind === 'tensor') return true;
  return p.bytes !== 'view' && p.struct?.pathKind !== 'view';
}

/** Walk fields [0, last] as apache-arrow's VectorLoader consumes nodes and buffers. */
function layoutFields(fields: readonly Field[], last: number, variadic: readonly number[]): FieldLayout[] | undefined {
  const at = { node: 0, buffer: 0, variadic: 0 };
  const out: FieldLayout[] = [];
  for (let i = 0; i <= last; i++) {
    const l = walk(fields[i]!.type, at, variadic);
    if (l === undefined) return undefined;
    out.push(l);
  }
  return out;
}

function walk(type: DataType, at: { node: number; buffer: number; variadic: number }, variadic: readonly number[]): FieldLayout | undefined {
  const node = at.node++;
  const take = (n: number) => {
    const b = Array.from({ length: n }, (_, i) => at.buffer + i);
    at.buffer += n;
    return b;
  };
  const nested = (buffers: number[], children: readonly Field[]): FieldLayout | undefined => {
    const out: FieldLayout[] = [];
    for (const c of children) {
      const l = walk(c.type, at, variadic);
      if (l === undefined) return undefined;
      out.push(l);
    }
    return { node, buffers, children: out };
  };
  switch (type.typeId) {
    case Type.Null:
      return { node, buffers: [], children: [] };
    case Type.Int:
    case Type.Float:
    case Type.Bool:
    case Type.Decimal:
    case Type.Date:
    case Type.Time:
    case Type.Timestamp:
    case Type.Interval:
    case Type.Duration:
    case Type.FixedSizeBinary:
    case Type.Dictionary:
      return { node, buffers: take(2), children: [] };
    case Type.Binary:
    case Type.Utf8:
    case Type.LargeBinary:
    case Type.LargeUtf8:
      return { node, buffers: take(3), children: [] };
    case Type.BinaryView:
    case Type.Utf8View:
      return { node, buffers: take(2 + (variadic[at.variadic++] ?? 0)), children: [] };
    case Type.List:
    case Type.LargeList:
    case Type.Map:
      return nested(take(2), type.children as Field[]);
    case Type.FixedSizeList:
    case Type.Struct:
      return nested(take(1), type.children as Field[]);
    default:
      return undefined; // unions (their buffers depend on the metadata version), and types this walk does not know
  }
}

/**
 * Fill column `plan`'s nodes for one record batch at `at` in `slots`; false when a buffer it needs
 * is missing from the table or not aligned for the typed array apache-arrow would view it with.
 */
function fill(plan: ColumnPlan, field: FieldLayout, table: { nodes: Float64Array; buffers: Float64Array }, slots: Float64Array, at: number): boolean {
  /** Buffer `i` of the table into `slot`, if it is there and aligned to `width`. */
  const buffer = (slot: number, i: number | undefined, width: number): boolean => {
    if (i === undefined || 2 * i + 1 >= table.buffers.length) return false;
    const offset = table.buffers[2 * i]!;
    const length = table.buffers[2 * i + 1]!;
    if (length > 0 && offset % width !== 0) return false;
    slots[slot] = offset;
    slots[slot + 1] = length;
    return true;
  };
  /** Node `f` into the slots at `s`: its validity bitmap, and its buffers `a` and `b` (-1: none) as A and B. */
  const put = (s: number, f: FieldLayout, a: number, aWidth: number, b = -1, bWidth = 1): boolean => {
    slots[s + LENGTH] = table.nodes[2 * f.node]!;
    slots[s + NULLS] = table.nodes[2 * f.node + 1]!;
    return buffer(s + VALIDITY, f.buffers[0], 1) && (a < 0 || buffer(s + A, f.buffers[a], aWidth)) && (b < 0 || buffer(s + B, f.buffers[b], bWidth));
  };
  if (plan.kind === 'tensor') {
    let f = field;
    for (const [level, lv] of plan.levels.entries()) {
      const s = at + level * SLOTS;
      if (!(lv.kind === 'fixed' ? put(s, f, -1, 1) : put(s, f, 1, lv.large ? 8 : 4))) return false;
      const child = f.children[0];
      if (child === undefined) return false;
      f = child;
    }
    return put(at + plan.levels.length * SLOTS, f, 1, leafWidth(plan));
  }
  const binary = (s: number, f: FieldLayout, kind: BytesKind) =>
    typeof kind === 'object' ? put(s, f, 1, 1) : put(s, f, 1, kind === 'offsets64' ? 8 : 4, 2, 1);
  if (plan.struct === undefined) return binary(at, field, plan.bytes);
  if (!put(at, field, -1, 1)) return false;
  const bytes = field.children[plan.struct.bytes];
  if (bytes === undefined || !binary(at + SLOTS, bytes, plan.bytes)) return false;
  if (plan.struct.path < 0 || plan.struct.pathKind === undefined) return true;
  const path = field.children[plan.struct.path];
  return path !== undefined && binary(at + 2 * SLOTS, path, plan.struct.pathKind);
}

/** Bytes per element of the typed array apache-arrow views a tensor column's values with. */
function leafWidth(plan: TensorColumn): number {
  return plan.leaf === 'bool' || typeof plan.leaf === 'object' ? 1 : elementSize(plan.dtype);
}

// ---- reading -----------------------------------------------------------------------------------

/** The rows of one record batch that a batch of ids asks for. */
export interface RowGroup {
  readonly k: number;
  /** File offsets of the record batch's message (for messages) and of its body. */
  readonly offset: number;
  readonly body: number;
  /** Dataset row of the record batch's row 0. */
  readonly first: number;
  /** Distinct batch-local rows, ascending. */
  readonly rows: readonly number[];
  /** The output positions of rows[u]: pos[at[u]] … pos[at[u + 1] - 1]. */
  readonly at: readonly number[];
  readonly pos: readonly number[];
}

/** Group batch-local rows (with their output positions) into a RowGroup. */
export function rowGroup(k: number, offset: number, body: number, first: number, local: readonly number[], pos: readonly number[]): RowGroup {
  const order = Array.from(local.keys()).sort((a, b) => local[a]! - local[b]! || a - b);
  const rows: number[] = [];
  const at: number[] = [];
  const out: number[] = [];
  for (const j of order) {
    if (rows.length === 0 || rows[rows.length - 1] !== local[j]) {
      rows.push(local[j]!);
      at.push(out.length);
    }
    out.push(pos[j]!);
  }
  at.push(out.length);
  return { k, offset, body, first, rows, at, pos: out };
}

/** Reads rows for one source instance (one thread) and counts what it read. */
export class RowReader {
  /** Positioned reads made, and the bytes they read. */
  preads = 0;
  preadBytes = 0;
  readonly #path: string;
  readonly #plans: readonly ColumnPlan[];
  readonly #table: RowTable;

  constructor(path: string, plans: readonly ColumnPlan[], table: RowTable) {
    this.#path = path;
    this.#plans = plans;
    this.#table = table;
  }

  /** Whether record batch `k` is read by row. */
  direct(k: number): boolean {
    return this.#table.direct[k] === 1;
  }

  /** Copy the group's rows of tensor column `c` into `out` (row-major, at each row's positions). */
  readTensor(file: PositionedFile, g: RowGroup, c: number, out: Storage): void {
    const plan = this.#plans[c] as TensorColumn;
    const slots = this.#table.slots[c]!;
    const base = g.k * this.#table.nodes[c]! * SLOTS;
    const w = { path: this.#path, offset: g.offset, column: plan.name, row: 0 };
    const where = (u: number): Where => ((w.row = g.first + g.rows[u]!), w);
    const read = this.#reader(file, g, plan.name);
    const n = g.rows.length;
    /** Per row: its first element at the current level; `per`: its elements there. */
    const starts = g.rows.slice();
    let per = 1;
    for (let level = 0; ; level++) {
      const s = base + level * SLOTS;
      const length = slots[s + LENGTH]!;
      for (let u = 0; u < n; u++) {
        if (starts[u]! < 0 || starts[u]! + per > length) throw corrupt(where(u), `elements [${starts[u]}, ${starts[u]! + per}) lie outside the ${length} values of level ${level}`);
      }
      if (slots[s + NULLS]! > 0 && slots[s + VALIDITY_LENGTH]! > 0) {
        this.#checkBits(read, slots, s, starts, per, (u) => corrupt(where(u), `the validity bitmap holds ${slots[s + VALIDITY_LENGTH]! * 8} bits, fewer than its ${length} values`), (u) => nullInTensor(where(u)));
      }
      const lv = plan.levels[level];
      if (lv === undefined) return this.#copyLeaf(read, plan, slots, s, starts, per, g, out, where);
      if (lv.kind === 'fixed') {
        for (let u = 0; u < n; u++) starts[u] = starts[u]! * lv.size;
        per *= lv.size;
        continue;
      }
      const width = lv.large ? 8 : 4;
      const offsetsAt = slots[s + A]!;
      const available = Math.floor(slots[s + A_LENGTH]! / width);
      const from: number[] = new Array(n);
      const to: number[] = new Array(n);
      for (let u = 0; u < n; u++) {
        if (available < starts[u]! + per + 1) throw corrupt(where(u), 'the list offsets buffer is shorter than its rows');
        from[u] = offsetsAt + starts[u]! * width;
        to[u] = offsetsAt + (starts[u]! + per + 1) * width;
      }
      const views = read(from, to);
      for (let u = 0; u < n; u++) {
        const v = views[u]!;
        const dv = new DataView(v.buffer, v.byteOffset, v.byteLength);
        const first = offsetValue(dv, 0, width);
        let previous = first;
        for (let i = 1; i <= per; i++) {
          const next = offsetValue(dv, i, width);
          if (previous < 0 || next < previous) throw corrupt(where(u), `list offsets go from ${previous} to ${next}`);
          if (next - previous !== lv.size) throw raggedRow(where(u), plan, level, next - previous);
          previous = next;
        }
        starts[u] = first;
      }
      per *= lv.size;
    }
  }

  #copyLeaf(read: Read, plan: TensorColumn, slots: Float64Array, s: number, starts: number[], per: number, g: RowGroup, out: Storage, where: (u: number) => Where): void {
    const n = starts.length;
    const length = slots[s + LENGTH]!;
    const valuesAt = slots[s + A]!;
    const valuesLength = slots[s + A_LENGTH]!;
    const from: number[] = new Array(n);
    const to: number[] = new Array(n);
    if (plan.leaf === 'bool') {
      for (let u = 0; u < n; u++) {
        const end = Math.floor((starts[u]! + per + 7) / 8);
        if (end > valuesLength) throw corrupt(where(u), `the data buffer holds ${valuesLength * 8} booleans, fewer than its ${length} values`);
        from[u] = valuesAt + Math.floor(starts[u]! / 8);
        to[u] = valuesAt + end;
      }
      if (per === 0) return;
      const views = read(from, to);
      const dst = out as Uint8Array;
      for (let u = 0; u < n; u++) {
        const v = views[u]!;
        const first = Math.floor(starts[u]! / 8) * 8;
        for (let j = g.at[u]!; j < g.at[u + 1]!; j++) {
          const p = g.pos[j]! * per;
          for (let t = 0; t < per; t++) {
            const bit = starts[u]! + t - first;
            dst[p + t] = (v[bit >>> 3]! >>> (bit & 7)) & 1;
          }
        }
      }
      return;
    }
    const elementBytes = leafWidth(plan);
    const width = typeof plan.leaf === 'object' ? plan.leaf.bytesPerElement : 1;
    const elements = Math.floor(valuesLength / elementBytes);
    const bytes = width * elementBytes;
    for (let u = 0; u < n; u++) {
      if ((starts[u]! + per) * width > elements) throw corrupt(where(u), `the data buffer holds ${Math.floor(elements / width)} values, fewer than its ${length}`);
      from[u] = valuesAt + starts[u]! * bytes;
      to[u] = valuesAt + (starts[u]! + per) * bytes;
    }
    const rowBytes = per * bytes;
    if (rowBytes === 0) return;
    const views = read(from, to);
    const dst = new Uint8Array(out.buffer, out.byteOffset, out.byteLength);
    for (let u = 0; u < n; u++) {
      const v = views[u]!;
      if (plan.leaf === 'uint64') {
        const dv = new DataView(v.buffer, v.byteOffset, v.byteLength);
        for (let i = 0; i < per; i++) {
          const x = dv.getBigUint64(i * 8, true);
          if (x >= 2n ** 63n) throw uint64Row(where(u), x);
        }
      }
      for (let j = g.at[u]!; j < g.at[u + 1]!; j++) dst.set(v, g.pos[j]! * rowBytes);
    }
  }

  /**
   * The group's rows of decoder column `c` into `out` (at each row's positions); a Hugging Face
   * struct row whose bytes are null gives the path it refers to, through `onPath(position, path)`.
   */
  readBytes(file: PositionedFile, g: RowGroup, c: number, out: Uint8Array[], onPath: (position: number, path: string) => void): void {
    const plan = this.#plans[c] as BytesColumn;
    const slots = this.#table.slots[c]!;
    const base = g.k * this.#table.nodes[c]! * SLOTS;
    const w = { path: this.#path, offset: g.offset, column: plan.name, row: 0 };
    const where = (row: number): Where => ((w.row = g.first + row), w);
    const read = this.#reader(file, g, plan.name);
    const rows = g.rows;
    const length = slots[base + LENGTH]!;
    for (const row of rows) if (row >= length) throw corrupt(where(row), `row ${row} lies outside the column's ${length} values`);
    if (slots[base + NULLS]! > 0 && slots[base + VALIDITY_LENGTH]! > 0) {
      this.#checkBits(read, slots, base, rows, 1, (u) => corrupt(where(rows[u]!), `the validity bitmap holds ${slots[base + VALIDITY_LENGTH]! * 8} bits, fewer than its ${length} values`), (u) => nullInTensor(where(rows[u]!)));
    }
    const put = (u: number, b: Uint8Array) => {
      for (let j = g.at[u]!; j < g.at[u + 1]!; j++) out[g.pos[j]!] = b;
    };
    if (plan.struct === undefined) {
      this.#values(read, plan.bytes, slots, base, rows, where).forEach((b, u) => put(u, b));
      return;
    }
    const s1 = base + SLOTS;
    const length1 = slots[s1 + LENGTH]!;
    for (const row of rows) if (row >= length1) throw corrupt(where(row), `the struct's "bytes" child holds ${length1} values, fewer than its rows`);
    const present = this.#present(read, slots, s1, rows, where);
    const withBytes = Array.from(rows.keys()).filter((u) => present[u] === 1);
    this.#values(read, plan.bytes, slots, s1, withBytes.map((u) => rows[u]!), where).forEach((b, i) => put(withBytes[i]!, b));
    const byPath = Array.from(rows.keys()).filter((u) => present[u] === 0);
    if (byPath.length === 0) return;
    const { path, pathKind } = plan.struct;
    if (path < 0 || pathKind === undefined) throw nullRow(where(rows[byPath[0]!]!));
    const s2 = base + 2 * SLOTS;
    for (const u of byPath) if (rows[u]! >= slots[s2 + LENGTH]!) throw nullRow(where(rows[u]!));
    const pathRows = byPath.map((u) => rows[u]!);
    const named = this.#present(read, slots, s2, pathRows, where);
    const i = named.indexOf(0);
    if (i >= 0) throw nullRow(where(pathRows[i]!));
    const text = new TextDecoder();
    this.#values(read, pathKind, slots, s2, pathRows, where).forEach((b, i) => {
      if (b.length === 0) throw nullRow(where(pathRows[i]!));
      const name = text.decode(b);
      const u = byPath[i]!;
      for (let j = g.at[u]!; j < g.at[u + 1]!; j++) onPath(g.pos[j]!, name);
    });
  }

  /** Per row: 1 when the validity bitmap of the node at `s` says it holds a value (bytesAt's test). */
  #present(read: Read, slots: Float64Array, s: number, rows: readonly number[], where: (row: number) => Where): Uint8Array {
    const present = new Uint8Array(rows.length).fill(1);
    const validityLength = slots[s + VALIDITY_LENGTH]!;
    if (!(slots[s + NULLS]! > 0 && validityLength > 0)) return present;
    const validityAt = slots[s + VALIDITY];
    const from: number[] = [];
    const to: number[] = [];
    for (const row of rows) {
      const byte = Math.floor(row / 8);
      if (byte >= validityLength) throw corrupt(where(row), 'the validity bitmap is shorter than its values');
      from.push(validityAt! + byte);
      to.push(validityAt! + byte + 1);
    }
    read(from, to).forEach((v, u) => (present[u] = (v[0]! >>> (rows[u]! & 7)) & 1));
    return present;
  }

  /** The bytes of `rows` of the binary node at `s` (offsets in A, bytes in B; fixed-size: bytes in A). */
  #values(read: Read, kind: BytesKind, slots: Float64Array, s: number, rows: readonly number[], where: (row: number) => Where): Uint8Array[] {
    const n = rows.length;
    if (n === 0) return [];
    const from: number[] = new Array(n);
    const to: number[] = new Array(n);
    if (typeof kind === 'object') {
      const size = kind.fixed;
      for (let u = 0; u < n; u++) {
        if ((rows[u]! + 1) * size > slots[s + A_LENGTH]!) throw corrupt(where(rows[u]!), 'the data buffer is shorter than its values');
        from[u] = slots[s + A]! + rows[u]! * size;
        to[u] = from[u]! + size;
      }
      return read(from, to);
    }
    if (kind === 'view') throw new Error('arrow-rows: view columns are not read by row');
    const width = kind === 'offsets64' ? 8 : 4;
    const available = Math.floor(slots[s + A_LENGTH]! / width);
    for (let u = 0; u < n; u++) {
      if (available < rows[u]! + 2) throw corrupt(where(rows[u]!), 'the offsets buffer is shorter than its values');
      from[u] = slots[s + A]! + rows[u]! * width;
      to[u] = from[u]! + 2 * width;
    }
    const offsets = read(from, to);
    const dataLength = slots[s + B_LENGTH]!;
    for (let u = 0; u < n; u++) {
      const v = offsets[u]!;
      const dv = new DataView(v.buffer, v.byteOffset, v.byteLength);
      const a = offsetValue(dv, 0, width);
      const b = offsetValue(dv, 1, width);
      if (a < 0 || b < a || b > dataLength) throw corrupt(where(rows[u]!), `the value spans bytes [${a}, ${b}) of a data buffer of ${dataLength}`);
      from[u] = slots[s + B]! + a;
      to[u] = slots[s + B]! + b;
    }
    return read(from, to);
  }

  /**
   * Throw unless every element [starts[u], starts[u] + per) is valid in the bitmap of the node at
   * `s` (checkValid's test, bit by bit in the same order).
   */
  #checkBits(read: Read, slots: Float64Array, s: number, starts: readonly number[], per: number, beyond: (u: number) => Error, isNull: (u: number) => Error): void {
    if (per === 0) return;
    const n = starts.length;
    const validityAt = slots[s + VALIDITY]!;
    const validityLength = slots[s + VALIDITY_LENGTH]!;
    const from: number[] = new Array(n);
    const to: number[] = new Array(n);
    for (let u = 0; u < n; u++) {
      const first = Math.floor(starts[u]! / 8);
      const end = Math.min(Math.floor((starts[u]! + per - 1) / 8) + 1, validityLength);
      from[u] = validityAt + Math.min(first, end);
      to[u] = validityAt + end;
    }
    const views = read(from, to);
    for (let u = 0; u < n; u++) {
      const v = views[u]!;
      const first = Math.floor(starts[u]! / 8);
      const end = starts[u]! + per;
      for (let bit = starts[u]!; bit < end; ) {
        const byte = Math.floor(bit / 8);
        if (byte >= validityLength) throw beyond(u);
        const bits = v[byte - first]!;
        if ((bit & 7) === 0 && bit + 8 <= end && bits === 0xff) {
          bit += 8;
          continue;
        }
        if (((bits >>> (bit & 7)) & 1) === 0) throw isNull(u);
        bit++;
      }
    }
  }

  /** A reader of body ranges of the group's record batch: `read(from, to)` gives a view per range. */
  #reader(file: PositionedFile, g: RowGroup, column: string): Read {
    const what = `record batch ${g.k} column ${show(column)}`;
    return (from, to) => this.#fetch(file, g.body, what, from, to);
  }

  /**
   * Read body ranges [from[i], to[i]) of the record batch whose body starts at file offset `body`,
   * merging each range with the previous ones when it starts at most MERGE_GAP bytes after them.
   */
  #fetch(file: PositionedFile, body: number, what: string, from: readonly number[], to: readonly number[]): Uint8Array[] {
    const n = from.length;
    const out: Uint8Array[] = new Array(n);
    for (let i = 0; i < n; ) {
      const lo = from[i]!;
      let hi = to[i]!;
      let j = i + 1;
      while (j < n && from[j]! >= lo && from[j]! <= hi + MERGE_GAP && Math.max(hi, to[j]!) - lo <= MAX_MERGED) hi = Math.max(hi, to[j++]!);
      if (hi > lo) {
        const block = file.read(body + lo, hi - lo, what);
        this.preads++;
        this.preadBytes += hi - lo;
        for (let m = i; m < j; m++) out[m] = block.subarray(from[m]! - lo, to[m]! - lo);
      } else {
        for (let m = i; m < j; m++) out[m] = EMPTY;
      }
      i = j;
    }
    return out;
  }
}

type Read = (from: readonly number[], to: readonly number[]) => Uint8Array[];

/** Offset `i` of an int32 or int64 offsets view, as a safe number, or -1 (arrow-columns' offsetAt). */
function offsetValue(dv: DataView, i: number, width: number): number {
  if (width === 4) return dv.getInt32(i * 4, true);
  const v = dv.getBigInt64(i * 8, true);
  return v >= 0n && v <= BigInt(Number.MAX_SAFE_INTEGER) ? Number(v) : -1;
}
