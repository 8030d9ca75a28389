// The package as a dependent gets it: `npm pack` of a copy of the checkout (which builds dist/ there
// through prepack; the working tree's dist/ is never touched), a fresh
// project that installs the tarball, then what a dependent does with it — import it, require it,
// type-check against it without tfjs, run an epoch, run the `stoker` command, find the PTX kernels —
// and publint and arethetypeswrong on the tarball. The rule: this needs npm and the registry, or a
// warm npm cache (npm ci leaves one), for the package's own dependencies; it takes a minute or two.

import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { cpSync, existsSync, statSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, realpathSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { join, relative, sep } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { list } from 'tar';
import { writeShapesDataset } from '../src/cli/demo-data.js';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const requireHere = createRequire(import.meta.url);
const TSC = requireHere.resolve('typescript/bin/tsc');
const PUBLINT = join(ROOT, 'node_modules', '.bin', 'publint');
const ATTW = join(ROOT, 'node_modules', '.bin', 'attw');
/** The @types/node this checkout type-checks with: already in the npm cache after npm ci. */
const TYPES_NODE = (JSON.parse(readFileSync(join(ROOT, 'node_modules', '@types', 'node', 'package.json'), 'utf8')) as { version: string }).version;
const MINUTE = 60_000;

interface Run {
  readonly code: number;
  readonly stdout: string;
  readonly stderr: string;
}

/**
 * The environment for a child npm: without the npm_* variables of an enclosing `npm test` (its
 * npm_config_local_prefix would make `npm install` in the temp project install into this checkout),
 * keeping the ones that say where the cache, the registry and the config files are.
 */
function childEnv(): NodeJS.ProcessEnv {
  const keep = /^npm_config_(cache|registry|userconfig|globalconfig|cafile|proxy|https_proxy|noproxy|strict_ssl)$/i;
  return Object.fromEntries(Object.entries(process.env).filter(([k]) => !/^npm_/i.test(k) || keep.test(k)));
}

/** Run a command with a hard time limit; a hang is a failure that says which command hung. */
function run(file: string, args: readonly string[], cwd: string, timeoutMs: number): Promise<Run> {
  return new Promise((resolve, reject) => {
    execFile(file, args, { cwd, timeout: timeoutMs, maxBuffer: 64 << 20, env: { ...childEnv(), CI: '1', NO_COLOR: '1' } }, (error, stdout, stderr) => {
      if (error !== null && (error as { killed?: boolean }).killed) reject(new Error(`${file} ${args.join(' ')} did not finish within ${timeoutMs} ms (in ${cwd})\n${stderr}`));
      else resolve({ code: error === null ? 0 : Number((error as { code?: unknown }).code), stdout, stderr });
    });
  });
}

/** As `run`, and the command must succeed. */
async function ok(file: string, args: readonly string[], cwd: string, timeoutMs: number): Promise<Run> {
  const r = await run(file, args, cwd, timeoutMs);
  assert.equal(r.code, 0, `${file} ${args.join(' ')} exited ${r.code}\n${r.stdout}\n${r.stderr}`);
  return r;
}

/** A float32 [rows, cols] .npy file (NPY format 1.0). */
function npy(rows: number, cols: number): Buffer {
  let header = `{'descr': '<f4', 'fortran_order': False, 'shape': (${rows}, ${cols}), }`;
  header = header.padEnd(Math.ceil((10 + header.length + 1) / 64) * 64 - 10 - 1, ' ') + '\n';
  const preamble = Buffer.from([0x93, ...Buffer.from('NUMPY'), 1, 0, header.length & 0xff, header.length >> 8]);
  return Buffer.concat([preamble, Buffer.from(header, 'latin1'), Buffer.from(new Float32Array(rows * cols).buffer)]);
}

/** The working tree's dist/: absent, or its entry's size and modification time. */
function distState(): string {
  const entry = join(ROOT, 'dist', 'index.js');
  if (!existsSync(entry)) return 'absent';
  const st = statSync(entry);
  return `${st.size} bytes, modified ${st.mtimeMs}`;
}

describe('the packed package, installed in a fresh project', () => {
  let work: string;
  let tarball: string;
  let app: string;
  let installed: string;
  let distBefore: string;

  before(async () => {
    work = mkdtempSync(join(tmpdir(), 'stoker-package-'));
    const packs = join(work, 'pack');
    mkdirSync(packs);
    // Packed from a copy of the checkout: `prepack` rebuilds dist/ there, never in the working tree
    // (a project that links this clone keeps its dist/ while the suite runs).
    distBefore = distState();
    const copy = join(work, 'checkout');
    const skip = new Set(['node_modules', 'dist', '.git', '.gpu']);
    cpSync(ROOT, copy, { recursive: true, filter: (from) => !skip.has(relative(ROOT, from).split(sep)[0]!) });
    symlinkSync(join(ROOT, 'node_modules'), join(copy, 'node_modules'), 'dir');
    await ok('npm', ['pack', '--pack-destination', packs, '--silent'], copy, 10 * MINUTE);
    const tgz = readdirSync(packs).filter((f) => f.endsWith('.tgz'));
    assert.equal(tgz.length, 1, `npm pack wrote one tarball, got [${tgz.join(', ')}]`);
    tarball = join(packs, tgz[0]!);
    app = join(work, 'app');
    mkdirSync(app);
    writeFileSync(join(app, 'package.json'), JSON.stringify({ name: 'stoker-consumer', private: true, type: 'module' }));
    await ok('npm', ['install', tarball, `@types/node@${TYPES_NODE}`, '--prefer-offline', '--no-audit', '--no-fund'], app, 10 * MINUTE);
    installed = join(app, 'node_modules', 'stoker-ml');
  }, { timeout: 20 * MINUTE });

  after(() => {
    if (work !== undefined) rmSync(work, { recursive: true, force: true });
  });

  it("packing leaves the working tree's dist/ as it was", () => {
    assert.equal(distState(), distBefore);
  });

  it('the tarball carries dist/ with its types, the PTX kernels, the launcher, the license and the docs, and no sources, source maps or benchmark logs', async () => {
    const paths: string[] = [];
    await list({ file: tarball, onReadEntry: (entry) => void paths.push(entry.path) });
    for (const p of ['dist/index.js', 'dist/index.d.ts', 'dist/cli/main.js', 'dist/reader/reader-worker.js', 'kernels/gather.ptx', 'bin/stoker.js', 'LICENSE', 'README.md', 'package.json', 'docs/cli.md', 'docs/torch.md', 'docs/benchmarks/history.md', 'BENCHMARKS.md']) {
      assert.ok(paths.includes(`package/${p}`), `the tarball has ${p}`);
    }
    assert.deepEqual(paths.filter((p) => p.startsWith('package/src/') || p.startsWith('package/test/') || p.startsWith('package/docs/results/') || p.endsWith('.map') || p.endsWith('.ts') && !p.endsWith('.d.ts')), []);
  });

  it('an ES module imports it and runs one epoch of sources.arrays: every sample once', async () => {
    writeFileSync(join(app, 'epoch.mjs'), [
      "import { DataLoader, sources, tensor } from 'stoker-ml';",
      "const loader = await DataLoader.create(sources.arrays({ x: tensor(new Float32Array(40), [10, 4]), y: Int32Array.from({ length: 10 }, (_, i) => i) }), { batchSize: 5, shuffle: true, seed: 7 });",
      'const ys = [];',
      "for await (const batch of loader.epoch(0)) { ys.push(...batch.get('y').data); batch.release(); }",
      'await loader.close();',
      'console.log(JSON.stringify(ys));',
    ].join('\n'));
    const r = await ok(process.execPath, ['epoch.mjs'], app, 2 * MINUTE);
    const ys = JSON.parse(r.stdout) as number[];
    assert.deepEqual([...ys].sort((a, b) => a - b), [0, 1, 2, 3, 4, 5, 6, 7, 8, 9]);
  });

  it("the README's ten lines run as written in the installed project, over an image folder", async () => {
    // The first TypeScript block of the README the package ships (plain JavaScript: it runs as .mjs).
    const readme = readFileSync(join(installed, 'README.md'), 'utf8');
    const block = /```ts\n([\s\S]*?)```/.exec(readme)?.[1];
    assert.ok(block !== undefined && block.includes("from 'stoker-ml'"), "the README's first TypeScript block imports the package");
    await writeShapesDataset(join(app, 'data'), { train: 130, test: 0, size: 32, seed: 3 });
    writeFileSync(join(app, 'readme.mjs'), `${block}console.log('readme block done');\n`);
    const r = await ok(process.execPath, ['readme.mjs'], app, 5 * MINUTE);
    assert.match(r.stdout, /readme block done/);
  });

  it('from the package, the synchronous sources.imageFolder walks a folder on worker threads while its thread blocks (NOTE [blocking parallel walk])', async () => {
    const tree = join(work, 'walk-tree');
    for (let c = 0; c < 12; c++) {
      mkdirSync(join(tree, `c${c}`, 'sub'), { recursive: true });
      for (let i = 0; i < 20 + c; i++) writeFileSync(join(tree, `c${c}`, i % 3 ? `${i}.jpg` : `sub/${i}.png`), 'x');
    }
    // A deep import of the installed module: the report of who walked is not public API.
    const listing = join(installed, 'dist', 'dataset', 'formats', 'images', 'folder-listing.js');
    writeFileSync(join(app, 'walk.mjs'), [
      `import { walkFolder, walkFolderParallelSync } from ${JSON.stringify(pathToFileURL(listing).href)};`,
      "const ext = new Set(['.jpg', '.png']);",
      'const report = { byWorkers: 0, rewalked: 0 };',
      // A minute without word from the workers before this thread would walk their chunks itself.
      `const par = walkFolderParallelSync(${JSON.stringify(tree)}, ext, 3, { inThisThread: false, stallMs: 60000, report });`,
      `const one = walkFolder(${JSON.stringify(tree)}, ext);`,
      'const same = Buffer.from(par.listing.names).equals(Buffer.from(one.listing.names)) && par.listing.ends.join() === one.listing.ends.join() && par.listing.labels.join() === one.listing.labels.join();',
      // Workers that claim a chunk each and die: after 10 s without word (a generous bound for a worker's
      // start), this thread walks those (and the rest).
      'const died = { byWorkers: 0, rewalked: 0 };',
      `const again = walkFolderParallelSync(${JSON.stringify(tree)}, ext, 2, { inThisThread: false, stallMs: 10000, workerEntry: new URL('./dying-walk-worker.mjs', import.meta.url), report: died });`,
      'const same2 = Buffer.from(again.listing.names).equals(Buffer.from(one.listing.names)) && again.listing.labels.join() === one.listing.labels.join();',
      'console.log(JSON.stringify({ ...report, same, files: one.listing.ends.length, died, same2 }));',
    ].join('\n'));
    writeFileSync(join(app, 'dying-walk-worker.mjs'), [
      "import { workerData } from 'node:worker_threads';",
      'Atomics.add(new Int32Array(workerData.next), 0, 1);',
      'process.exit(3);',
    ].join('\n'));
    const r = await ok(process.execPath, ['walk.mjs'], app, 2 * MINUTE);
    const got = JSON.parse(r.stdout) as Record<string, unknown>;
    assert.deepEqual(got, { byWorkers: 12, rewalked: 0, same: true, files: 12 * 20 + 66, died: { byWorkers: 0, rewalked: 2 }, same2: true });
  });

  it('a CommonJS file requires it (Node loads ES modules through require from 20.19)', { skip: (process.features as { require_module?: boolean }).require_module !== true && 'this Node cannot require ES modules' }, async () => {
    writeFileSync(join(app, 'require.cjs'), "const { DataLoader, toTfDataset } = require('stoker-ml');\nconsole.log(typeof DataLoader, typeof toTfDataset);\n");
    const r = await ok(process.execPath, ['require.cjs'], app, 2 * MINUTE);
    assert.equal(r.stdout.trim(), 'function function');
  });

  it('a TypeScript consumer type-checks against the published types with skipLibCheck off and no tfjs installed', async () => {
    assert.equal(existsSync(join(app, 'node_modules', '@tensorflow')), false, 'the optional tfjs peer is not installed');
    writeFileSync(join(app, 'tsconfig.json'), JSON.stringify({
      compilerOptions: { strict: true, module: 'nodenext', moduleResolution: 'nodenext', target: 'es2022', skipLibCheck: false, noEmit: true, types: ['node'] },
      files: ['consumer.ts'],
    }));
    writeFileSync(join(app, 'consumer.ts'), [
      "import { DataLoader, sources, tensor, toTfDataset, type AnyTensor, type Batch, type LoaderOptions, type TfNamespace } from 'stoker-ml';",
      'const options: LoaderOptions = { batchSize: 5 };',
      "const loader = await DataLoader.create(sources.arrays({ x: tensor(new Float32Array(40), [10, 4]), y: new Int32Array(10) }), options);",
      'for await (const batch of loader.epoch(0)) {',
      '  const b: Batch<AnyTensor> = batch;',
      '  b.release();',
      '}',
      'declare const tf: TfNamespace;',
      "const ds = toTfDataset(loader, { tf, x: 'x', y: 'y', oneHot: 2 });",
      'const held: number = ds.heldBatches;',
      'await ds.stop();',
      'await loader.close();',
      'export { held };',
    ].join('\n'));
    await ok(process.execPath, [TSC, '-p', '.'], app, 5 * MINUTE);
  });

  it('every PTX kernel the CUDA backend loads resolves to a file inside the installed package', () => {
    const dir = join(installed, 'dist', 'device', 'cuda');
    const found: string[] = [];
    for (const file of readdirSync(dir).filter((f) => f.endsWith('.js'))) {
      const source = readFileSync(join(dir, file), 'utf8');
      for (const [, relative] of source.matchAll(/new URL\('([^']+\.ptx)', import\.meta\.url\)/g)) {
        const path = fileURLToPath(new URL(relative!, new URL(`file://${join(dir, file)}`)));
        assert.ok(path.startsWith(installed), `${file}: ${relative} stays inside the package`);
        assert.ok(existsSync(path), `${file}: ${relative} → ${path} exists`);
        found.push(relative!);
      }
    }
    assert.ok(found.length >= 4, `the CUDA backend's kernels were found (${found.join(', ')})`);
  });

  it('the WebAssembly resampler (kernels/resample.wasm) instantiates from the installed package', async () => {
    const url = pathToFileURL(join(installed, 'dist', 'image', 'resample-wasm.js')).href;
    const m = (await import(url)) as { wasmResampler(): { resample(src: Uint8Array, w: number, h: number, c: number, box: object, ow: number, oh: number, flip: boolean): Uint8Array } | undefined };
    const wasm = m.wasmResampler();
    assert.ok(wasm !== undefined, 'kernels/resample.wasm loads from the package');
    const px = wasm.resample(Uint8Array.from({ length: 4 * 4 * 3 }, (_, i) => i), 4, 4, 3, { x0: 0, y0: 0, x1: 4, y1: 4 }, 2, 2, false);
    assert.equal(px.length, 12);
  });

  it('the crop decode finds libturbojpeg in the installed optional dependency (linux)', { skip: process.platform !== 'linux' && 'its prebuilt library is linux-only' }, async () => {
    const url = pathToFileURL(join(installed, 'dist', 'image', 'turbo-jpeg.js')).href;
    const m = (await import(url)) as { turboJpegPath(): string | undefined; turboJpegAvailable(): boolean };
    assert.ok(m.turboJpegPath()?.startsWith(join(app, 'node_modules', '@julusian', 'jpeg-turbo')), `found at ${m.turboJpegPath()}`);
    assert.equal(m.turboJpegAvailable(), true);
  });

  it('the stoker command runs from the installed package without tsx: --help and inspect of an .npy file', async () => {
    assert.equal(existsSync(join(installed, 'src')), false, 'no sources: the launcher runs dist/');
    assert.equal(existsSync(join(app, 'node_modules', 'tsx')), false, 'tsx is not installed');
    writeFileSync(join(app, 'x.npy'), npy(5, 3));
    const help = await ok('npx', ['--no', '--', 'stoker', '--help'], app, 2 * MINUTE);
    assert.match(help.stdout, /^Usage: stoker /m);
    for (const c of ['demo', 'bench', 'inspect']) assert.match(help.stdout, new RegExp(`^\\s+${c}\\b`, 'm'));
    // The help points at pages of the installed package (docs/ ships in it), not at a clone's paths.
    const docs = /^Docs: (.+); the figures: (.+)\.$/m.exec(help.stdout);
    assert.ok(docs !== null, `the help names its docs:\n${help.stdout}`);
    for (const page of docs.slice(1)) assert.ok(existsSync(page) && realpathSync(page).startsWith(realpathSync(installed)), `${page}: a page of the installed package`);
    const inspect = await ok('npx', ['--no', '--', 'stoker', 'inspect', 'x.npy'], app, 2 * MINUTE);
    assert.match(inspect.stdout, /format\s+npy/);
    assert.match(inspect.stdout, /samples\s+5/);
    assert.match(inspect.stdout, /^x\s+float32\s+\[3\]\s+12$/m);
  });

  // attw's esm-only profile: Stoker is an ES module package. It skips the node10 and node16-from-CJS
  // resolutions: the latter models TypeScript before require(esm) (attw 0.18 ships TypeScript 5.6),
  // so it calls every ES module "dynamic import only", which Node ≥ 20.19 no longer is (tested above).
  it('publint and arethetypeswrong (esm-only profile) find no problem in the tarball', async () => {
    const lint = await ok(PUBLINT, ['run', tarball, '--strict'], work, 3 * MINUTE);
    assert.doesNotMatch(lint.stdout, /warning|error/i, lint.stdout);
    await ok(ATTW, [tarball, '--profile', 'esm-only', '--no-definitely-typed', '--format', 'ascii', '--no-color'], work, 3 * MINUTE);
  });
});
