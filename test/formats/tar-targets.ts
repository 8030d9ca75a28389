// Fuzz targets for tar-shards.test.ts: open a (mutated) shard with no index cache, read every
// sample, and check what was read against node-tar's own Parser over the same bytes. A mutant may
// be refused (ERR_BAD_FILE); when it is accepted, every field must be exactly the bytes node-tar
// sees for that entry, and node-tar must have parsed the archive without a warning — so an accepted
// mutant never carries data the tar format itself could have flagged.

import { readFileSync } from 'node:fs';
import { Parser } from 'tar';
import { tarShardsSource } from '../../src/dataset/formats/tar/tar-shards.js';
import type { Tensor } from '../../src/tensor/tensor.js';

/** Regular files as node-tar's Parser sees them: path → content; and its warnings. */
export function referenceEntries(path: string): { files: Map<string, Buffer>; warnings: string[] } {
  const files = new Map<string, Buffer>();
  const warnings: string[] = [];
  const parser = new Parser({
    onwarn: (code: string, message: unknown) => warnings.push(`${code}: ${message instanceof Error ? message.message : String(message)}`),
    onReadEntry: (entry) => {
      const chunks: Buffer[] = [];
      entry.on('data', (c: Buffer) => chunks.push(c));
      entry.on('end', () => {
        if (entry.type === 'File' || entry.type === 'OldFile' || entry.type === 'ContiguousFile') files.set(entry.path, Buffer.concat(chunks));
      });
    },
  });
  parser.end(readFileSync(path));
  return { files, warnings };
}

/** Index with `index: 'off'`, read every sample, compare with node-tar. */
export async function indexAndRead(path: string): Promise<void> {
  const ds = await tarShardsSource(path, { index: 'off', fields: ['cls', 'bin'], decoders: { bin: 'raw' } });
  try {
    const read: Record<string, Tensor>[] = [];
    for (let i = 0; i < ds.length; i++) read.push((await ds.get(i)) as Record<string, Tensor>);
    const ref = referenceEntries(path);
    if (ref.warnings.length > 0) throw new Error(`accepted an archive node-tar warns about: ${ref.warnings.join('; ')}`);
    const byKey = new Map<string, Map<string, Buffer>>();
    for (const [name, content] of ref.files) {
      const base = name.slice(name.lastIndexOf('/') + 1);
      const dot = base.indexOf('.');
      const key = name.slice(0, name.length - base.length + dot);
      const fields = byKey.get(key) ?? new Map<string, Buffer>();
      fields.set(base.slice(dot + 1).toLowerCase(), content);
      byKey.set(key, fields);
    }
    if (byKey.size !== ds.length) throw new Error(`read ${ds.length} samples where node-tar sees ${byKey.size} keys`);
    read.forEach((sample, i) => {
      const key = ds.key(i);
      const ref = byKey.get(key);
      if (ref === undefined) throw new Error(`sample ${i} has key ${JSON.stringify(key)}, which node-tar does not see`);
      const bin = ref.get('bin');
      if (bin === undefined || !bin.equals(sample.bin!.bytes())) throw new Error(`sample ${JSON.stringify(key)}: field bin differs from node-tar's`);
      const cls = ref.get('cls');
      if (cls === undefined || Number(cls.toString('latin1').trim()) !== (sample.cls!.data as Int32Array)[0]) throw new Error(`sample ${JSON.stringify(key)}: field cls differs from node-tar's`);
    });
  } finally {
    ds.close();
  }
}
