// Internal: not exported from the package entry.
// Megatron-LM's MMIDIDX document index (megatron/core/datasets/indexed_dataset.py, `_IndexWriter`),
// parsed exactly and checked whole in one streaming pass before any sample is read. Layout, all
// little-endian:
//   9 bytes  b"MMIDIDX\x00\x00"
//   u64      version, 1
//   u8       dtype code (1 uint8, 2 int8, 3 int16, 4 int32, 5 int64, 6 float64, 7 float32, 8 uint16)
//   u64      S, the number of sequences
//   u64      D, the number of document indices (documents + 1: the list starts with 0)
//   i32[S]   tokens per sequence
//   i64[S]   byte offset of each sequence in the .bin
//   i64[D]   document boundaries: sequence indices [0, …, S]; document d is sequences [doc[d], doc[d+1])
//   i8[S]    (multimodal indexes only) the mode of each sequence
// The rule: read as Megatron's IndexedDataset reads — every dtype code, each sequence `length`
// items of the dtype at its pointer, a byte offset taken as given (`numpy.frombuffer(bin, dtype,
// count=length, offset=pointer)`), so sequences may leave gaps or bytes after the last, as merges
// and filters can write them. What Megatron would fail on later is refused here, naming the file:
// a sequence past the end of the .bin, boundaries that do not rise from 0 to S, no document at all.
// Float dtypes (codes 6, 7) are read as the floats they are, as IndexedDataset returns them
// (GPTDataset casts them to int64 itself; Stoker leaves that to the caller).

import { badFile, emptyFile } from '../../../errors.js';
import { elementSize } from '../../../tensor/dtype.js';
import { PositionedFile } from '../file.js';
import type { TokenDType } from './token-file.js';

const MAGIC = 'MMIDIDX\x00\x00';
const HEADER = 9 + 8 + 1 + 8 + 8;
/** Entries per read of the streaming check. */
const CHUNK = 1 << 16;
/** Megatron's dtype codes (indexed_dataset.py's `DType`). */
const CODES: Record<number, TokenDType> = { 1: 'uint8', 2: 'int8', 3: 'int16', 4: 'int32', 5: 'int64', 6: 'float64', 7: 'float32', 8: 'uint16' };

export interface MegatronIndex {
  /** Absolute path of the .idx. */
  readonly path: string;
  readonly fileSize: number;
  readonly binSize: number;
  readonly dtype: TokenDType;
  readonly sequences: number;
  /** Documents (D − 1), at least 1. */
  readonly documents: number;
  /** Tokens in the longest document. */
  readonly longest: number;
  /** Tokens per document (the sum of its sequences' lengths), in shared memory (reader workers share one copy): the loader's `lengths` for token budgets. */
  readonly lengths: Uint32Array;
  /** Byte offsets in the .idx of the sequence lengths, the pointer table and the document boundaries. */
  readonly lengthsAt: number;
  readonly pointersAt: number;
  readonly documentsAt: number;
}

/** Read and check `idxPath` against `binPath` (ERR_BAD_FILE naming the file and the byte; ERR_EMPTY_DATASET for no documents). */
export function readMegatronIndex(idxPath: string, binPath: string): MegatronIndex {
  const bin = new PositionedFile(binPath);
  const binSize = bin.size;
  bin.close();
  const file = new PositionedFile(idxPath);
  try {
    if (file.size < HEADER) throw badFile(idxPath, 0, `the file holds ${file.size} bytes, fewer than the ${HEADER}-byte header of a Megatron index`, 'Is this a Megatron .idx file?');
    const head = file.read(0, HEADER, 'the header');
    const dv = new DataView(head.buffer, head.byteOffset, HEADER);
    if (Buffer.from(head.subarray(0, 9)).toString('latin1') !== MAGIC) throw badFile(idxPath, 0, 'the file does not start with MMIDIDX\\x00\\x00', 'Is this a Megatron .idx file (the mmap index format)?');
    const version = dv.getBigUint64(9, true);
    if (version !== 1n) throw badFile(idxPath, 9, `index version ${version}; Megatron's format is version 1`);
    const code = dv.getUint8(17);
    const dtype = CODES[code];
    if (dtype === undefined) throw badFile(idxPath, 17, `dtype code ${code} is none of Megatron's (1 uint8, 2 int8, 3 int16, 4 int32, 5 int64, 6 float64, 7 float32, 8 uint16)`);
    const S = safe(idxPath, 18, 'the sequence count', dv.getBigUint64(18, true));
    const D = safe(idxPath, 26, 'the document index count', dv.getBigUint64(26, true));
    if (D < 1) throw badFile(idxPath, 26, 'the document index count is 0; it holds at least the leading 0');
    const lengthsAt = HEADER;
    const pointersAt = lengthsAt + 4 * S;
    const documentsAt = pointersAt + 8 * S;
    const plain = documentsAt + 8 * D;
    if (file.size !== plain && file.size !== plain + S) {
      throw badFile(idxPath, Math.min(plain, file.size), `the header says ${S} sequences and ${D} document indices, so the file should hold ${plain} bytes (or ${plain + S} with sequence modes), but it holds ${file.size}`, 'The index is truncated or corrupt');
    }
    if (D === 1) throw emptyFile(idxPath, 'documents (its document index lists none)');
    const size = elementSize(dtype);
    // Every sequence inside the .bin, at its pointer as given.
    for (let s = 0; s < S; s += CHUNK) {
      const n = Math.min(CHUNK, S - s);
      const lens = view(file, lengthsAt + 4 * s, 4 * n, 'the sequence lengths');
      const ptrs = view(file, pointersAt + 8 * s, 8 * n, 'the sequence pointers');
      for (let k = 0; k < n; k++) {
        const len = lens.getInt32(4 * k, true);
        const ptr = ptrs.getBigInt64(8 * k, true);
        if (len < 0) throw badFile(idxPath, lengthsAt + 4 * (s + k), `sequence ${s + k} has length ${len}`);
        if (ptr < 0n) throw badFile(idxPath, pointersAt + 8 * (s + k), `sequence ${s + k} starts at .bin byte ${ptr}`);
        const end = ptr + BigInt(len * size);
        if (end > BigInt(binSize)) {
          throw badFile(idxPath, pointersAt + 8 * (s + k), `sequence ${s + k} (${len} ${dtype} from byte ${ptr}) ends at byte ${end}, past the end of ${binPath} (${binSize} bytes)`, 'The .bin and .idx do not belong together, or the .bin is truncated');
        }
      }
    }
    // Document boundaries: rising from 0 to S; a document's tokens are its sequences' lengths summed.
    let previous = 0;
    let longest = 0;
    const lengths = new Uint32Array(new SharedArrayBuffer(4 * (D - 1)));
    const lengthOf = windowReader(file, lengthsAt, 4, S, (v, at) => v.getInt32(at, true));
    for (let d = 0; d < D; d += CHUNK) {
      const n = Math.min(CHUNK, D - d);
      const docs = view(file, documentsAt + 8 * d, 8 * n, 'the document indices');
      for (let k = 0; k < n; k++) {
        const at = documentsAt + 8 * (d + k);
        const s = docs.getBigInt64(8 * k, true);
        if (d + k === 0) {
          if (s !== 0n) throw badFile(idxPath, at, `the document indices start at ${s}, not 0`);
          continue;
        }
        if (s < BigInt(previous) || s > BigInt(S)) throw badFile(idxPath, at, `document index ${d + k} is ${s}; the indices must rise from 0 to the sequence count ${S}`);
        let tokens = 0;
        for (let q = previous; q < Number(s); q++) tokens += lengthOf(q);
        if (tokens > 0xffffffff) throw badFile(idxPath, at, `document ${d + k - 1} holds ${tokens} tokens, more than one sample can (2³² − 1)`);
        lengths[d + k - 1] = tokens;
        longest = Math.max(longest, tokens);
        previous = Number(s);
      }
    }
    if (previous !== S) throw badFile(idxPath, documentsAt + 8 * (D - 1), `the last document index is ${previous}, not the sequence count ${S}: sequences after it belong to no document`);
    return { path: idxPath, fileSize: file.size, binSize, dtype, sequences: S, documents: D - 1, longest, lengths, lengthsAt, pointersAt, documentsAt };
  } finally {
    file.close();
  }
}

/** Entry `s` of a table of `width`-byte entries at `at`, through a window: boundaries rise, so reads are sequential. */
function windowReader(file: PositionedFile, at: number, width: number, count: number, get: (v: DataView, at: number) => number): (s: number) => number {
  let start = 0;
  let window: DataView | undefined;
  return (s) => {
    if (window === undefined || s < start || s >= start + window.byteLength / width) {
      start = s;
      window = view(file, at + width * s, width * Math.min(CHUNK, count - s), 'the sequence lengths');
    }
    return get(window, width * (s - start));
  };
}

function view(file: PositionedFile, offset: number, length: number, what: string): DataView {
  const b = file.read(offset, length, what);
  return new DataView(b.buffer, b.byteOffset, b.byteLength);
}

function safe(path: string, offset: number, what: string, v: bigint): number {
  if (v > BigInt(Number.MAX_SAFE_INTEGER)) throw badFile(path, offset, `${what} is ${v}, past any file this index could describe`);
  return Number(v);
}
