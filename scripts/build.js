// Build dist/ from src/ (what the package ships): a clean tree, then tsc with tsconfig.build.json.
// The rule: `npm run build` always builds; `--prepare` (the `prepare` script) skips when npm is
// packing or publishing, because npm runs `prepack` and then `prepare` there and `prepack` has just
// built. `prepare` is what builds a clone (npm ci / npm install), a git dependency and a folder
// dependency; `prepack` is what builds `npm pack`, `npm publish` and Yarn's git dependencies.

import { spawnSync } from 'node:child_process';
import { rmSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';

const root = new URL('..', import.meta.url);
if (process.argv.includes('--prepare') && ['pack', 'publish'].includes(process.env.npm_command ?? '')) process.exit(0);

// A clean tree, so a source file deleted or renamed since the last build is not shipped.
rmSync(new URL('dist', root), { recursive: true, force: true });
const tsc = createRequire(import.meta.url).resolve('typescript/bin/tsc');
const run = spawnSync(process.execPath, [tsc, '-p', 'tsconfig.build.json'], { cwd: root, stdio: 'inherit' });
// dist/.built marks a whole build: bin/stoker.js runs dist/ in a clone while no source is newer.
if (run.status === 0) writeFileSync(new URL('dist/.built', root), `${new Date().toISOString()}\n`);
process.exit(run.status ?? 1);
