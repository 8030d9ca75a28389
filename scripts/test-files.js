// The test files `npm test` runs, the longest first: node --test starts files in the order given, so
// the two runners (--test-concurrency=2) take the files that spawn Python, npm or many children at
// once and end together instead of one finishing a long file alone. The rest follow in path order.

import { readdirSync } from 'node:fs';
import { join } from 'node:path';

const LONGEST = ['test/docs.test.ts', 'test/serve-gather.test.ts', 'test/serve-leased.test.ts', 'test/package.test.ts', 'test/formats/arrow.test.ts', 'test/distributed.test.ts'];

function walk(dir) {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) => (e.isDirectory() ? walk(join(dir, e.name)) : e.name.endsWith('.test.ts') ? [join(dir, e.name)] : []));
}

const all = [...walk('src'), ...walk('test')].sort();
const first = LONGEST.filter((f) => all.includes(f));
process.stdout.write([...first, ...all.filter((f) => !first.includes(f))].join('\n') + '\n');
