// Internal: not exported from the package entry.
// A correction of one hyparquet misread, narrowly scoped. NOTE [hyparquet's 32-bit first value]:
// a DELTA_BINARY_PACKED page starts with its first value as a zigzag varint. A writer may store an
// unsigned 32-bit value there as the 64-bit number it is (DuckDB does for UINTEGER: 3 000 000 000
// takes 33 zigzag bits), and only its low 32 bits matter to an INT32 column. hyparquet (≤ 1.33)
// reads that first value with its 32-bit varint reader, which drops bit 32 of the zigzag, so bit 31
// of the first value comes out wrong — and with it every value of the page (each is the previous
// plus a delta, modulo 2³²): the page reads exactly 2³¹ too small or too large. Arrow C++, DuckDB
// and Polars take the low 32 bits. Here, for uint32 columns whose chunks use DELTA_BINARY_PACKED,
// the pages are walked (headers through hyparquet's own parser), each page's first value is
// inspected, and the rows of a page whose zigzag had bit 32 set get bit 31 flipped back.
//
// The rule: the correction runs only while the installed hyparquet still has the bug, which is
// probed once by decoding a nine-byte page: when hyparquet is fixed, this file does nothing (and
// can go). Signed INT32 columns are not walked: the zigzag of an int32 fits in 32 bits, so a
// writer that follows the format never sets bit 32 there.

import type { ColumnMetaData, CompressionCodec, Compressors, SchemaElement, SchemaTree } from 'hyparquet';
import { parquetHeader } from 'hyparquet/src/column.js';
import { decompressPage } from 'hyparquet/src/datapage.js';
import { deltaBinaryUnpack } from 'hyparquet/src/delta.js';
import { readRleBitPackedHybrid } from 'hyparquet/src/encoding.js';
import { getMaxDefinitionLevel, getMaxRepetitionLevel, getSchemaPath } from 'hyparquet/src/schema.js';

/** True while hyparquet reads the first value of an INT32 delta page through 32 bits only. */
export const DROPS_FIRST_VALUE_BIT: boolean = probe();

function probe(): boolean {
  // Block size 128, 4 miniblocks, 1 value; first value 2³¹ as a zigzag varint (2³², five bytes).
  const page = new Uint8Array([0x80, 0x01, 0x04, 0x01, 0x80, 0x80, 0x80, 0x80, 0x10]);
  const out = new Int32Array(1);
  deltaBinaryUnpack({ view: new DataView(page.buffer), offset: 0 }, 1, out);
  return out[0] !== -(2 ** 31);
}

/** Rows [start, end) of a row group whose values hyparquet read with bit 31 flipped. */
export interface FlippedRows {
  readonly start: number;
  readonly end: number;
}

/** Whether column chunk `meta` may need the correction (an INT32 chunk with delta pages). */
export function mayNeedCorrection(meta: ColumnMetaData | undefined): boolean {
  return DROPS_FIRST_VALUE_BIT && meta?.type === 'INT32' && meta.encodings.includes('DELTA_BINARY_PACKED');
}

/**
 * The rows of the row group whose values hyparquet misread in column chunk `chunk` (its bytes, from
 * its first page to its end), found by walking its pages. Throws (an Error the caller turns into
 * ERR_BAD_FILE) when a page cannot be parsed, or when a misread page's rows cannot be placed. A
 * flat column's walk stops at the row group's `groupRows` (as hyparquet's does: a chunk's recorded
 * size may run past its pages when its dictionary page offset is missing).
 */
export function flippedRows(chunk: Uint8Array, meta: ColumnMetaData, schema: SchemaElement[], compressors: Compressors, groupRows: number): FlippedRows[] {
  const path: SchemaTree[] = getSchemaPath(schema, meta.path_in_schema);
  const maxRep = getMaxRepetitionLevel(path);
  const maxDef = getMaxDefinitionLevel(path);
  const codec: CompressionCodec = meta.codec;
  const reader = { view: new DataView(chunk.buffer, chunk.byteOffset, chunk.byteLength), offset: 0 };
  const out: FlippedRows[] = [];
  let row = 0;
  let lastFlipped = false;
  while (reader.offset < chunk.length && (maxRep > 0 || row < groupRows)) {
    const header = parquetHeader(reader);
    const start = reader.offset;
    const size = header.compressed_page_size;
    if (!(size >= 0 && start + size <= chunk.length)) throw new Error(`a page of ${size} bytes runs past the end of its column chunk`);
    reader.offset += size;
    const body = chunk.subarray(start, start + size);
    const v2 = header.data_page_header_v2;
    const v1 = header.data_page_header;
    let rows: number;
    let flipped = false;
    let continuesRow = false;
    if (v2 !== undefined) {
      rows = v2.num_rows;
      if (v2.encoding === 'DELTA_BINARY_PACKED' && v2.num_values > v2.num_nulls) {
        const levels = v2.repetition_levels_byte_length + v2.definition_levels_byte_length;
        let values = body.subarray(levels);
        if (v2.is_compressed !== false && header.uncompressed_page_size > levels) values = decompressPage(values, header.uncompressed_page_size - levels, codec, compressors);
        flipped = firstValueBit32(values);
      }
    } else if (v1 !== undefined) {
      const delta = v1.encoding === 'DELTA_BINARY_PACKED';
      if (maxRep === 0 && !delta) {
        rows = v1.num_values;
      } else {
        const page = decompressPage(body, header.uncompressed_page_size, codec, compressors);
        const r = { view: new DataView(page.buffer, page.byteOffset, page.byteLength), offset: 0 };
        rows = v1.num_values;
        if (maxRep > 0) {
          const reps = new Array<number>(v1.num_values);
          readRleBitPackedHybrid(r, bitWidth(maxRep), reps);
          rows = reps.reduce((n, x) => n + (x === 0 ? 1 : 0), 0);
          continuesRow = reps.length > 0 && reps[0] !== 0;
        }
        if (maxDef > 0) r.offset += 4 + r.view.getUint32(r.offset, true);
        flipped = delta && firstValueBit32(page.subarray(r.offset));
      }
    } else {
      continue; // a dictionary or index page
    }
    // A list row split across pages: its values came from two pages, of which one was misread.
    if (continuesRow && flipped !== lastFlipped) throw new Error('a list row continues across delta pages, one of which hyparquet misreads; Stoker cannot place its values');
    if (flipped && rows > 0) out.push({ start: row, end: row + rows });
    row += rows;
    lastFlipped = flipped;
  }
  return out;
}

/** Whether the first value of the DELTA_BINARY_PACKED data in `values` has zigzag bit 32 set. */
function firstValueBit32(values: Uint8Array): boolean {
  let i = 0;
  for (let header = 0; header < 3; header++) {
    // block size, miniblocks per block, value count
    while (i < values.length && values[i]! & 0x80) i++;
    i++;
  }
  const first = i;
  while (i < values.length && values[i]! & 0x80) i++;
  if (i >= values.length) throw new Error('a DELTA_BINARY_PACKED page ends inside its header');
  const bytes = i - first + 1;
  if (bytes > 5 || (bytes === 5 && values[i]! > 0x1f)) throw new Error('the first value of a DELTA_BINARY_PACKED page of an INT32 column is wider than 33 bits');
  return bytes === 5 && (values[i]! & 0x10) !== 0;
}

function bitWidth(max: number): number {
  return 32 - Math.clz32(max);
}

/** Flip bit 31 of uint32 value(s) `v` (a number, or a list of them) back; nulls stay. */
export function unflip(v: unknown): unknown {
  if (typeof v === 'number') return v >= 2 ** 31 ? v - 2 ** 31 : v + 2 ** 31;
  if (Array.isArray(v) || ArrayBuffer.isView(v)) {
    const list = v as unknown as { length: number; [i: number]: unknown };
    for (let j = 0; j < list.length; j++) list[j] = unflip(list[j]);
  }
  return v;
}
