// The bench runner: `node --import tsx bench/run.ts <name> [flags]` (or `npm run bench -- <name>`)
// imports `bench/<name>.ts` and calls its `main(args)`. The rule: a bench is any .ts file here that
// exports `main`; an unknown name or a bad flag exits with code 2 and lists what exists.

import { readdirSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { UsageError } from './util.js';

type BenchMain = (args: readonly string[]) => Promise<void> | void;

const here = dirname(fileURLToPath(import.meta.url));
const NOT_BENCHES = new Set(['run', 'util']);

function available(): string[] {
  return readdirSync(here)
    .filter((f) => f.endsWith('.ts') && !f.endsWith('.d.ts') && !f.endsWith('.test.ts'))
    .map((f) => f.slice(0, -'.ts'.length))
    .filter((name) => !NOT_BENCHES.has(name))
    .sort();
}

const [name, ...rest] = process.argv.slice(2);
const names = available();
const usage = `usage: npm run bench -- <name> [flags]   (available: ${names.join(', ') || 'none'})`;

if (name === undefined || name === '--help' || name === '-h') {
  console.error(usage);
  process.exit(name === undefined ? 2 : 0);
}
if (!names.includes(name)) {
  console.error(`unknown bench ${JSON.stringify(name)}\n${usage}`);
  process.exit(2);
}

const mod = (await import(pathToFileURL(join(here, `${name}.ts`)).href)) as { main?: BenchMain };
if (typeof mod.main !== 'function') {
  console.error(`bench/${name}.ts exports no main(args) function`);
  process.exit(2);
}
try {
  await mod.main(rest);
} catch (error) {
  if (error instanceof UsageError) {
    console.error(error.message);
    process.exit(2);
  }
  throw error;
}
