// The test files `npm test` runs, the longest first: node --test starts files in the order given, so
// the two runners (--test-concurrency=2) take the files that spawn Python, npm or many children at
// once and end together instead of one finishing a long file alone. The rest follow in path order.

import { readdirSync } from 'node:fs';
import { join } from 'node:path';

// Measured alone, one after the other, on the loaded 2-core VM (wall s): package 107, docs 86,
// formats/arrow 74, serve-gather 52 (serve-leased alike), serve 35, distributed 23.
const LONGEST = ['test/package.test.ts', 'test/docs.test.ts', 'test/remote/nodes.test.ts', 'test/formats/arrow.test.ts', 'test/serve-gather.test.ts', 'test/serve-leased.test.ts', 'test/serve.test.ts', 'test/distributed.test.ts', 'test/remote/remote.test.ts'];

function walk(dir) {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) => (e.isDirectory() ? walk(join(dir, e.name)) : e.name.endsWith('.test.ts') ? [join(dir, e.name)] : []));
}

const all = [...walk('src'), ...walk('test')].sort();
const first = LONGEST.filter((f) => all.includes(f));
process.stdout.write([...first, ...all.filter((f) => !first.includes(f))].join('\n') + '\n');
