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
// The rule: an index is used only if the sequences tile the .bin end to end in order (pointer[s+1]
// = pointer[s] + length[s] × itemsize, the last ending at the .bin's size, as every Megatron writer
// and merger lays them out) and the document boundaries rise from 0 to S; so a document is one
// contiguous byte range, and a sample read is two small index reads and one data read.

import { badFile } from '../../../errors.js';
import { PositionedFile } from '../file.js';
import type { TokenDType } from './token-file.js';

const MAGIC = 'MMIDIDX\x00\x00';
const HEADER = 9 + 8 + 1 + 8 + 8;
/** Entries per read of the streaming check. */
const CHUNK = 1 << 16;
/** Megatron's dtype codes; only the token widths Stoker reads are accepted. */
const CODES: Record<number, string> = { 1: 'uint8', 2: 'int8', 3: 'int16', 4: 'int32', 5: 'int64', 6: 'float64', 7: 'float32', 8: 'uint16' };

export interface MegatronIndex {
  /** Absolute path of the .idx. */
  readonly path: string;
  readonly fileSize: number;
  readonly binSize: number;
  readonly dtype: TokenDType;
  readonly sequences: number;
  /** Documents (D − 1). */
  readonly documents: number;
  /** Tokens in the longest document. */
  readonly longest: number;
  /** Tokens per document, in shared memory (reader workers share one copy): the loader's `lengths` for token budgets. */
  readonly lengths: Uint32Array;
  /** Byte offsets in the .idx of the pointer table and of the document boundaries. */
  readonly pointersAt: number;
  readonly documentsAt: number;
}

/** Read and check `idxPath` against `binPath` (ERR_BAD_FILE naming the file and the byte). */
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
    if (dtype !== 'uint16' && dtype !== 'int32') {
      throw badFile(idxPath, 17, `dtype code ${code} (${dtype ?? 'unknown'}): Stoker reads token files of uint16 (code 8) or int32 (code 4)`, 'Write the tokens with a vocabulary-sized integer dtype');
    }
    const S = safe(idxPath, 18, 'the sequence count', dv.getBigUint64(18, true));
    const D = safe(idxPath, 26, 'the document index count', dv.getBigUint64(26, true));
    if (D < 1) throw badFile(idxPath, 26, 'the document index count is 0; it holds at least the leading 0');
    const pointersAt = HEADER + 4 * S;
    const documentsAt = pointersAt + 8 * S;
    const plain = documentsAt + 8 * D;
    if (file.size !== plain && file.size !== plain + S) {
      throw badFile(idxPath, Math.min(plain, file.size), `the header says ${S} sequences and ${D} document indices, so the file should hold ${plain} bytes (or ${plain + S} with sequence modes), but it holds ${file.size}`, 'The index is truncated or corrupt');
    }
    const size = dtype === 'uint16' ? 2 : 4;
    // Lengths and pointers, checked to tile the .bin.
    let expect = 0;
    for (let s = 0; s < S; s += CHUNK) {
      const n = Math.min(CHUNK, S - s);
      const lens = view(file, HEADER + 4 * s, 4 * n, 'the sequence lengths');
      const ptrs = view(file, pointersAt + 8 * s, 8 * n, 'the sequence pointers');
      for (let k = 0; k < n; k++) {
        const len = lens.getInt32(4 * k, true);
        const ptr = ptrs.getBigInt64(8 * k, true);
        if (len < 0) throw badFile(idxPath, HEADER + 4 * (s + k), `sequence ${s + k} has length ${len}`);
        if (ptr !== BigInt(expect)) {
          throw badFile(idxPath, pointersAt + 8 * (s + k), `sequence ${s + k} starts at .bin byte ${ptr}, but the sequences before it end at ${expect}; Stoker reads indexes whose sequences lie end to end, as Megatron writes them`);
        }
        expect += len * size;
      }
    }
    if (expect !== binSize) {
      throw badFile(binPath, Math.min(expect, binSize), `the index ${idxPath} lays out ${expect} bytes of tokens but the .bin holds ${binSize}`, 'The .bin and .idx do not belong together, or one is truncated');
    }
    // Document boundaries: rising from 0 to S. The longest document from the pointers at its ends.
    let previous = -1;
    let longest = 0;
    const lengths = new Uint32Array(new SharedArrayBuffer(4 * (D - 1)));
    let startByte = 0;
    const pointer = pointerReader(file, pointersAt, S, binSize);
    for (let d = 0; d < D; d += CHUNK) {
      const n = Math.min(CHUNK, D - d);
      const docs = view(file, documentsAt + 8 * d, 8 * n, 'the document indices');
      for (let k = 0; k < n; k++) {
        const at = documentsAt + 8 * (d + k);
        const s = docs.getBigInt64(8 * k, true);
        if (d + k === 0 && s !== 0n) throw badFile(idxPath, at, `the document indices start at ${s}, not 0`);
        if (s < BigInt(previous) || s > BigInt(S)) throw badFile(idxPath, at, `document index ${d + k} is ${s}; the indices must rise from 0 to the sequence count ${S}`);
        const byte = pointer(Number(s));
        if (d + k > 0) {
          const tokens = (byte - startByte) / size;
          lengths[d + k - 1] = tokens;
          longest = Math.max(longest, tokens);
        }
        startByte = byte;
        previous = Number(s);
      }
    }
    if (previous !== S) throw badFile(idxPath, documentsAt + 8 * (D - 1), `the last document index is ${previous}, not the sequence count ${S}: sequences after it belong to no document`);
    return { path: idxPath, fileSize: file.size, binSize, dtype, sequences: S, documents: D - 1, longest, lengths, pointersAt, documentsAt };
  } finally {
    file.close();
  }
}

/** The .bin byte where sequence `s` starts (`binSize` for s = S), through a window of the pointer table: boundaries rise, so reads are sequential. */
function pointerReader(file: PositionedFile, at: number, S: number, binSize: number): (s: number) => number {
  let start = 0;
  let window: DataView | undefined;
  return (s) => {
    if (s === S) return binSize;
    if (window === undefined || s < start || s >= start + window.byteLength / 8) {
      start = s;
      window = view(file, at + 8 * s, 8 * Math.min(CHUNK, S - s), 'the sequence pointers');
    }
    return Number(window.getBigInt64(8 * (s - start), true));
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
