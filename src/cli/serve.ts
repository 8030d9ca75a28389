// `stoker serve`: hand batches to another process over a Unix socket (docs/torch.md; the PyTorch
// client in python/ starts it or connects to it). The rule: the command line gives the defaults of
// every client's loader; a client's `open` message may override any of them, `resume` included.

import { Command, InvalidArgumentError, Option } from 'commander';
import { serve } from '../serve/server.js';
import { deviceArg, intArg, workersArg } from './args.js';
import { onCleanup } from './cleanup.js';
import { docPath } from './ui.js';

interface ServeCliOptions {
  readonly socket?: string;
  readonly source?: string;
  readonly batchSize?: number;
  readonly device?: string;
  readonly shuffle?: boolean;
  readonly seed?: number;
  readonly workers?: number | 'auto';
  readonly options?: Record<string, unknown>;
  readonly slots: number;
  readonly idleTimeout: number;
  readonly once?: boolean;
}

export function serveCommand(): Command {
  return new Command('serve')
    .description('serve batches to another process (PyTorch: python/stoker) over a Unix socket, through shared memory or CUDA IPC')
    .option('--socket <path>', 'Unix socket to listen on; default a fresh path under the temp folder, printed on stdout as one JSON line')
    .option('--source <path|json>', 'dataset: a path (.npy, .safetensors, .arrow, .tar or a shard pattern, image folder), or JSON: a list of paths, {"image":"x.npy","label":"y.npy"}, {"module","export","options"}, {"builtin":"synthetic"}')
    .addOption(new Option('--batch-size <n>', 'rows per batch').argParser(intArg(1, 1 << 24)))
    .addOption(new Option('--device <name>', 'cpu, cuda or cuda:N').argParser(deviceArg))
    .option('--no-shuffle', 'keep dataset order')
    .addOption(new Option('--seed <n>', 'shuffle seed').argParser(intArg(0, 2 ** 32 - 1)))
    .addOption(new Option('--workers <n>', "reader threads ('auto' = cores − 1)").argParser(workersArg))
    .addOption(new Option('--options <json>', 'more DataLoader options, as a JSON object').argParser(jsonObjectArg))
    .addOption(new Option('--slots <n>', 'batches a client may hold at once (shared-memory slots)').default(4).argParser(intArg(1, 1024)))
    .addOption(new Option('--idle-timeout <s>', 'drop a client that holds every slot and says nothing for this long').default(300).argParser(intArg(1)))
    .option('--once', 'serve one client, then exit (how the Python client starts it)')
    .addHelpText('after', `
Examples:
  stoker serve --source data/train.npy --batch-size 256 --socket /tmp/stoker.sock
  stoker serve --source '{"builtin":"synthetic","options":{"n":50000}}' --device cuda
Protocol and the Python client: ${docPath('torch.md')}.`)
    .action(async (opts: ServeCliOptions) => {
      const options: Record<string, unknown> = { ...opts.options };
      if (opts.batchSize !== undefined) options.batchSize = opts.batchSize;
      if (opts.device !== undefined) options.device = opts.device;
      if (opts.shuffle === false) options.shuffle = false;
      if (opts.seed !== undefined) options.seed = opts.seed;
      if (opts.workers !== undefined) options.workers = opts.workers;
      const abort = new AbortController();
      // The reason reaches every connected client (ERR_SERVE_STOPPED).
      const stop = () => abort.abort('SIGTERM');
      process.once('SIGTERM', stop);
      const undo = onCleanup(() => abort.abort('interrupted'));
      try {
        await serve({ socket: opts.socket, source: opts.source, options, slots: opts.slots, idleMs: opts.idleTimeout * 1000, once: opts.once === true }, abort.signal);
      } finally {
        process.off('SIGTERM', stop);
        undo();
      }
    });
}

function jsonObjectArg(value: string): Record<string, unknown> {
  let parsed: unknown;
  try {
    parsed = JSON.parse(value);
  } catch {
    throw new InvalidArgumentError('expected a JSON object');
  }
  if (parsed === null || typeof parsed !== 'object' || Array.isArray(parsed)) throw new InvalidArgumentError('expected a JSON object');
  return parsed as Record<string, unknown>;
}
