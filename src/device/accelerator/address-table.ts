// Internal: not exported from the package entry.
// Address tables: a [dst…, src…] list of device-visible addresses, one pair per row, that the
// row-copy kernel (or the driver's batched copy) walks. The rule: a table lives in pinned host
// memory or on the device until the copy stream has passed the copy that reads it.

import type { DeviceBuffer } from '../backend.js';
import type { HostPool } from '../host-pool.js';
import type { StreamMemory } from './stream-memory.js';

/** Bytes per row of an address table: a destination and a source address, 8 bytes each. */
export const TABLE_ROW_BYTES = 16;

/**
 * A [dst…, src…] address table of `rows` rows in pinned host memory (from the host pool; the
 * caller recycles it). Addresses are exact numbers (device addresses stay far below 2^53), written
 * as two 32-bit halves: no BigInt per row.
 */
export function hostTable(host: HostPool, rows: number, dst: (r: number) => number, src: (r: number) => number): BigInt64Array {
  const table = host.acquire('int64', 2 * rows) as unknown as BigInt64Array;
  const words = new Uint32Array(table.buffer, table.byteOffset, 4 * rows);
  for (let r = 0; r < rows; r++) {
    // Exact for addresses below 2^53: a division by 2^32 and a product are exact, `%` on doubles is slow.
    const d = dst(r);
    const s = src(r);
    const dh = Math.floor(d / 4294967296);
    const sh = Math.floor(s / 4294967296);
    words[2 * r] = d - dh * 4294967296;
    words[2 * r + 1] = dh;
    words[2 * (rows + r)] = s - sh * 4294967296;
    words[2 * (rows + r) + 1] = sh;
  }
  return table;
}

/**
 * Fill `device` (at least TABLE_ROW_BYTES × rows bytes, acquired by the caller) with a [dst…, src…]
 * address table of `rows` rows, uploaded on the copy stream; the host copy and `device` return to
 * their pools in a follow-up the caller runs once the copy stream has passed the table's reader.
 */
export function deviceTable(memory: StreamMemory, device: DeviceBuffer, rows: number, dst: (r: number) => number, src: (r: number) => number, followUps: (() => void)[]): DeviceBuffer {
  const host = hostTable(memory.host, rows, dst, src);
  memory.backend.copyToDevice(device, 0, new Uint8Array(host.buffer, host.byteOffset, host.byteLength), 'copy');
  followUps.push(() => {
    memory.host.recycle('int64', host);
    memory.recycle(device);
  });
  return device;
}
