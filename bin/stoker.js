#!/usr/bin/env node
// The `stoker` command's launcher. The rule: the compiled dist/ when it is current (an installed
// package ships dist/ only; in a clone, dist/ built after the last change of any source, which
// `npm ci` / `npm install` make), else the TypeScript sources through tsx (a clone being edited:
// never a stale dist/). dist/ starts in a fraction of the time tsx takes to compile the sources.

import { existsSync } from 'node:fs';
import { distCurrent } from './dist-current.js';

const source = new URL('../src/cli/main.ts', import.meta.url);
const built = new URL('../dist/cli/main.js', import.meta.url);

let entry = built;
if (existsSync(source) && !distCurrent()) {
  let register;
  try {
    ({ register } = await import('tsx/esm/api'));
  } catch {
    register = undefined;
  }
  if (register !== undefined) {
    register();
    entry = source;
  } else if (!existsSync(built)) {
    process.stderr.write('stoker: the TypeScript sources need tsx to run (npm install), or build dist/ first (npm run build)\n');
    process.exit(1);
  }
}

// A reader that stops early (`stoker --help | head`) closes the pipe: end quietly, as Unix tools do.
for (const stream of [process.stdout, process.stderr]) {
  stream.on('error', (error) => {
    if (error.code !== 'EPIPE') throw error;
    process.exit(typeof process.exitCode === 'number' ? process.exitCode : 0);
  });
}

const { main } = await import(entry.href);
const code = await main(process.argv.slice(2));
process.exitCode = code;
// Everything is closed by now; should a library still hold the event loop, do not hang on it.
setTimeout(() => process.exit(code), 2000).unref();
