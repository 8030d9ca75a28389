// `stoker inspect <path>`: what a loader over a file or folder would deliver — format, samples,
// columns with dtype and per-sample shape, bytes per sample. The rule: the description is
// `inspectPath`'s, which opens the path with the same source and probe the loader uses; a path that
// does not exist is a usage error (exit 2), a file that is there but unreadable or malformed a
// failure (exit 1).

import { statSync } from 'node:fs';
import { resolve } from 'node:path';
import { Command, InvalidArgumentError, Option } from 'commander';
import { inspectPath, type SourceDescription } from '../dataset/open-path.js';
import type { TokenDType } from '../dataset/formats/text/token-file.js';
import { bytes, int } from '../report/figures.js';
import { UsageError } from './errors.js';
import { Ui, pairs, table } from './ui.js';

interface InspectOptions {
  readonly size?: readonly [number, number];
  readonly contextLength?: number;
  readonly dtype?: TokenDType;
  readonly json?: boolean;
}

export function inspectCommand(): Command {
  return new Command('inspect')
    .description('describe a dataset file or folder: format, samples, columns (dtype, shape), bytes per sample')
    .argument('<path>', '.npy, .safetensors, .arrow/.feather, .tar shard(s), .jsonl, .parquet, a token file (.bin, Megatron .bin/.idx), or an image folder (dir/<class>/<image>)')
    .addOption(new Option('--size <HxW>', 'decode images to this size (e.g. 224 or 224x160); default: the first image\'s own size').argParser(sizeArg))
    .addOption(new Option('--context-length <n>', 'a flat token file: tokens per window (default 1024, nanoGPT\'s)').argParser(contextArg))
    .addOption(new Option('--dtype <type>', 'a flat token file: the token width (default uint16, nanoGPT\'s)').choices(['uint16', 'uint32', 'int32']))
    .option('--json', 'print one JSON document instead of text')
    .addHelpText('after', `
Examples:
  stoker inspect data/train.npy
  stoker inspect ~/datasets/flowers --size 224
  stoker inspect shards/ --json
  stoker inspect train.bin --context-length 2048`)
    .action(async (path: string, opts: InspectOptions) => {
      await runInspect(path, opts, new Ui({ json: opts.json === true, progress: false }));
    });
}

export async function runInspect(path: string, opts: InspectOptions, ui: Ui): Promise<void> {
  try {
    statSync(path);
  } catch (cause) {
    const code = (cause as { code?: unknown }).code;
    if (code === 'ENOENT' || code === 'ENOTDIR') throw new UsageError(`no such file or folder: ${path}`);
    throw cause;
  }
  const d = await inspectPath(resolve(path), {
    ...(opts.size !== undefined ? { size: opts.size } : {}),
    ...(opts.contextLength !== undefined ? { contextLength: opts.contextLength } : {}),
    ...(opts.dtype !== undefined ? { tokenDtype: opts.dtype } : {}),
  });
  if (ui.json) {
    ui.emit({ ok: true, command: 'inspect', ...d });
    return;
  }
  ui.line(describe(d));
}

function describe(d: SourceDescription): string {
  const head = pairs([
    ['path', d.path],
    ['format', d.format],
    ['samples', int(d.length)],
    ['per sample', `${int(d.bytesPerSample)} bytes (${bytes(d.bytesPerSample * d.length)} for the whole set, decoded)`],
  ]);
  const cols = table(d.columns, [
    { title: 'column', cell: (c) => c.name },
    { title: 'dtype', cell: (c) => c.dtype },
    { title: 'shape', cell: (c) => `[${c.shape.join(', ')}]` },
    { title: 'bytes/sample', align: 'right', cell: (c) => int(c.bytesPerSample) },
  ]);
  const details = Object.entries(d.details ?? {});
  const extra = details.length === 0 ? '' : `\n\n${pairs(details.map(([k, v]) => [k, typeof v === 'string' ? v : JSON.stringify(v)]))}`;
  return `${head}\n\n${cols}${extra}\n\n${pairs([['read with', d.readWith]])}`;
}

function contextArg(value: string): number {
  const n = Number(value);
  if (!/^\d+$/.test(value.trim()) || !(n >= 1 && n <= 2 ** 24)) throw new InvalidArgumentError('expected a whole number of tokens from 1 to 16777216');
  return n;
}

function sizeArg(value: string): readonly [number, number] {
  const m = /^(\d+)(?:x(\d+))?$/i.exec(value.trim());
  const h = Number(m?.[1]);
  const w = Number(m?.[2] ?? m?.[1]);
  if (m === null || !(h >= 1 && h <= 16384 && w >= 1 && w <= 16384)) throw new InvalidArgumentError('expected a side (224) or HxW (224x160), from 1 to 16384');
  return [h, w];
}
