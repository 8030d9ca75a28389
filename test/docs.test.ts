// Every code block of README.md and docs/*.md runs (issue 33). The rule: a block is a program a
// reader can paste, so the test extracts each fenced block (ts/js, python, bash/sh) and runs it as
// written, in a directory of its own, against small data it makes here with the library's writers
// or by the published layouts (the files the blocks name: an image folder, .npy files, token files,
// JSONL, Parquet, Arrow). TypeScript blocks import 'stoker-ml' as a user's project does: the project
// has node_modules/stoker-ml, a shim re-exporting this checkout's dist/ (src/ when dist/ is stale).
// A block that loads a .ts file at run time runs under `node --import tsx`; the others are compiled
// here (types erased) and run under plain node (NOTE [Blocks without tsx]). Every TypeScript block is
// also type-checked against the package's types. A block that cannot run here says so right before
// its fence, with the reason the Markdown reader sees too:
//   <!-- doc-test: typecheck-only (needs a GPU) -->   type-checked, not run
//   <!-- doc-test: skip (needs a launcher: mpirun) --> neither (a launcher, the network, a listing)
//   <!-- doc-test: file my-data.ts -->               written as that file beside the page's later blocks
// docs/results/ and docs/benchmarks/ are logs, not documentation pages: not read here.

// @ts-expect-error: a JavaScript module of the launcher, without types
import { distCurrent } from '../bin/dist-current.js';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, normalize, relative, resolve } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { Binary, Field, Int32, Int64, List, Table, Utf8, tableToIPC, vectorFromArray } from 'apache-arrow';
import { parquetWriteBuffer } from 'hyparquet-writer';
import ts from 'typescript';
import { writeShapesDataset } from '../src/cli/demo-data.js';
import { docPath } from '../src/cli/ui.js';
import { TEST_MS } from './fixtures.js';
import { torchMissing } from './fixtures/python-client.js';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const PYTHON = '/usr/bin/python3';
/** A block from start to exit: a Node (tsx compiles on start) or Python process and the loader it starts, on a loaded machine. */
const BLOCK_MS = TEST_MS;

// ---- the blocks ----------------------------------------------------------------------------------

type Lang = 'ts' | 'js' | 'python' | 'sh';
type Mode = { kind: 'run' } | { kind: 'typecheck-only'; reason: string } | { kind: 'skip'; reason: string } | { kind: 'file'; name: string };

interface Block {
  readonly page: string;
  /** 1-based line of the opening fence. */
  readonly line: number;
  readonly lang: Lang;
  readonly code: string;
  readonly mode: Mode;
  /** A short name for directories and test titles: page-line. */
  readonly id: string;
}

const LANGS: Readonly<Record<string, Lang>> = {
  ts: 'ts', typescript: 'ts', js: 'js', javascript: 'js', mjs: 'js', python: 'python', py: 'python', bash: 'sh', sh: 'sh', shell: 'sh',
};

/** README.md and every page of docs/ (the logs under docs/results/ and docs/benchmarks/ are not pages). */
function pages(): string[] {
  const docs = readdirSync(join(ROOT, 'docs')).filter((f) => f.endsWith('.md')).sort().map((f) => `docs/${f}`);
  return ['README.md', ...docs];
}

const MARKER = /^<!--\s*doc-test:\s*(.*?)\s*-->$/;

function parseMode(text: string, where: string): Mode {
  let m = /^(typecheck-only|skip)\s*\((.+)\)$/.exec(text);
  if (m !== null) return { kind: m[1] as 'typecheck-only' | 'skip', reason: m[2]! };
  m = /^file\s+([\w.-]+)$/.exec(text);
  if (m !== null) return { kind: 'file', name: m[1]! };
  throw new Error(`${where}: unknown doc-test marker "${text}": use "typecheck-only (why)", "skip (why)" or "file NAME"`);
}

/** The fenced blocks of one page in a language the test knows, each with the marker right above its fence. */
function blocksOf(page: string): Block[] {
  const lines = readFileSync(join(ROOT, page), 'utf8').split('\n');
  const out: Block[] = [];
  for (let i = 0; i < lines.length; i++) {
    const open = /^```([\w-]*)\s*$/.exec(lines[i]!);
    if (open === null) continue;
    let end = i + 1;
    while (end < lines.length && !/^```\s*$/.test(lines[end]!)) end++;
    assert.ok(end < lines.length, `${page}:${i + 1}: a fence that is never closed`);
    const lang = LANGS[open[1]!.toLowerCase()];
    const above = i > 0 ? MARKER.exec(lines[i - 1]!.trim()) : null;
    if (lang !== undefined) {
      const where = `${page}:${i + 1}`;
      const mode: Mode = above === null ? { kind: 'run' } : parseMode(above[1]!, where);
      out.push({ page, line: i + 1, lang, code: lines.slice(i + 1, end).join('\n') + '\n', mode, id: `${page.replace(/^docs\//, '').replace(/\.md$/, '')}-${i + 1}` });
    } else {
      assert.equal(above, null, `${page}:${i + 1}: a doc-test marker above a \`\`\`${open[1]} block, which is never run`);
    }
    i = end;
  }
  return out;
}

const BLOCKS = pages().flatMap(blocksOf);

/**
 * Whether a TypeScript or JavaScript block needs a TypeScript loader when it runs: it names a `.ts`
 * file (a reader worker's module, a file block of its page), which worker threads import as written.
 */
function needsTsLoader(b: Block): boolean {
  return /\.(ts|mts|cts)\b['"`]/.test(b.code) || BLOCKS.some((f) => f.page === b.page && f.line < b.line && f.mode.kind === 'file' && /\.[mc]?ts$/.test(f.mode.name));
}

// ---- the project the blocks run in ---------------------------------------------------------------

/**
 * A user's project: package.json ("type": "module": the blocks use top-level await), stoker-ml in
 * node_modules (a shim over this checkout's src/: index.js for Node under tsx, index.d.ts for tsc),
 * the optional peer tfjs and tsx linked from the checkout, the `stoker` command in node_modules/.bin.
 * True when the shim is the compiled dist/ (plain node can load it), false when it is the sources.
 */
function makeProject(dir: string): boolean {
  writeFileSync(join(dir, 'package.json'), JSON.stringify({ name: 'docs-blocks', private: true, type: 'module' }));
  const shim = join(dir, 'node_modules', 'stoker-ml');
  mkdirSync(shim, { recursive: true });
  writeFileSync(join(shim, 'package.json'), JSON.stringify({
    name: 'stoker-ml', type: 'module', exports: { '.': { types: './index.d.ts', default: './index.js' } },
  }));
  // The compiled dist/ when it is current (as bin/stoker.js runs it: a fraction of tsx's start), else the sources.
  const entry = distCurrent() ? join(ROOT, 'dist', 'index.js') : join(ROOT, 'src', 'index.ts');
  writeFileSync(join(shim, 'index.js'), `export * from ${JSON.stringify(pathToFileURL(entry).href)};\n`);
  writeFileSync(join(shim, 'index.d.ts'), `export * from ${JSON.stringify(join(ROOT, 'src', 'index.js'))};\n`);
  // Links to single packages, never to a scope folder: a package manager run in the project removes
  // a link it does not know, whereas through a linked scope folder it would delete the packages themselves.
  for (const name of ['@tensorflow/tfjs', '@tensorflow/tfjs-backend-wasm', '@types/node', 'tsx']) {
    mkdirSync(dirname(join(dir, 'node_modules', name)), { recursive: true });
    symlinkSync(join(ROOT, 'node_modules', name), join(dir, 'node_modules', name));
  }
  mkdirSync(join(dir, 'node_modules', '.bin'));
  symlinkSync(join(ROOT, 'bin', 'stoker.js'), join(dir, 'node_modules', '.bin', 'stoker'));
  return entry.endsWith('.js');
}

/** An NPY file by the published layout (version 1): magic, header length, padded dict, C-order data. */
function npy(descr: string, shape: readonly number[], data: ArrayBufferView): Buffer {
  const dict = `{'descr': '${descr}', 'fortran_order': False, 'shape': (${shape.join(', ')}${shape.length === 1 ? ',' : ''}), }`;
  const pad = (64 - ((10 + dict.length + 1) % 64)) % 64;
  const head = Buffer.alloc(10);
  Buffer.from([0x93, 0x4e, 0x55, 0x4d, 0x50, 0x59, 1, 0]).copy(head);
  head.writeUInt16LE(dict.length + pad + 1, 8);
  return Buffer.concat([head, Buffer.from(dict + ' '.repeat(pad) + '\n', 'latin1'), Buffer.from(data.buffer, data.byteOffset, data.byteLength)]);
}

/** Token k of a stream: a value that differs from its neighbours and fits uint16. */
const tok = (k: number) => (k * 7919 + 13) % 65521;

/** nanoGPT's `train.bin`: raw little-endian uint16 ids. */
function tokenFile(n: number, salt: number): Buffer {
  return Buffer.from(Uint16Array.from({ length: n }, (_, k) => tok(k + salt)).buffer);
}

/** Megatron's `.bin` + `.idx` (MMIDIDX version 1, uint16 tokens), one sequence per document. */
function megatron(prefix: string, lengths: readonly number[]): void {
  const total = lengths.reduce((a, b) => a + b, 0);
  writeFileSync(`${prefix}.bin`, tokenFile(total, 0));
  const head = Buffer.alloc(9 + 8 + 1 + 8 + 8);
  head.write('MMIDIDX\x00\x00', 0, 'latin1');
  head.writeBigUInt64LE(1n, 9);
  head.writeUInt8(8, 17); // dtype code 8: uint16
  head.writeBigUInt64LE(BigInt(lengths.length), 18);
  head.writeBigUInt64LE(BigInt(lengths.length + 1), 26);
  const pointers = new BigInt64Array(lengths.length);
  for (let i = 1; i < lengths.length; i++) pointers[i] = pointers[i - 1]! + BigInt(lengths[i - 1]! * 2);
  const docIdx = BigInt64Array.from({ length: lengths.length + 1 }, (_, i) => BigInt(i));
  writeFileSync(`${prefix}.idx`, Buffer.concat([head, Buffer.from(Int32Array.from(lengths).buffer), Buffer.from(pointers.buffer), Buffer.from(docIdx.buffer)]));
}

/** Words the test tokenizer (test/fixtures/text/tokenizer.json: a tiny BPE over "lowernstid,!") knows. */
const WORDS = ['lower', 'newest', 'low', 'wider', 'tide', 'lowest', 'dinner', 'sit', 'rest!', 'en,'];
const words = (n: number, salt: number) => Array.from({ length: n }, (_, k) => WORDS[(k * 7 + salt * 3) % WORDS.length]).join(' ');

/** The files the blocks name, made once; each block's directory links to them. */
async function makeFixtures(dir: string): Promise<void> {
  // An image folder, data/train/<class>/<n>.png (320 images, 10 classes), and a held-out data/test.
  await writeShapesDataset(join(dir, 'data'), { train: 320, test: 64, size: 32, concurrency: 4 });
  // data/images.npy (uint8 (512, 3, 32, 32)) and data/labels.npy (int64 (512,)), as np.save writes them.
  const n = 512;
  writeFileSync(join(dir, 'data', 'images.npy'), npy('|u1', [n, 3, 32, 32], Uint8Array.from({ length: n * 3 * 32 * 32 }, (_, k) => k % 251)));
  writeFileSync(join(dir, 'data', 'labels.npy'), npy('<i8', [n], BigInt64Array.from({ length: n }, (_, i) => BigInt(i % 10))));
  // data/samples/<i>.json: one sample per file (docs/datasets.md, a worker-openable module).
  mkdirSync(join(dir, 'data', 'samples'));
  for (let i = 0; i < n; i++) writeFileSync(join(dir, 'data', 'samples', `${i}.json`), JSON.stringify(Array.from({ length: 16 }, (_, j) => i + j / 16)));
  // Token files: nanoGPT's train.bin (40 000 ids: 39 windows of 1 025), the parts of a mixture, a Megatron pair.
  writeFileSync(join(dir, 'train.bin'), tokenFile(40_000, 0));
  writeFileSync(join(dir, 'web.bin'), tokenFile(20_000, 1));
  writeFileSync(join(dir, 'code.bin'), tokenFile(10_000, 2));
  writeFileSync(join(dir, 'math.bin'), tokenFile(5_000, 3));
  megatron(join(dir, 'corpus_text_document'), Array.from({ length: 400 }, (_, i) => 20 + ((i * 97) % 380)));
  // Text: the tokenizer, a JSONL corpus of documents of 10 to 600 words, and a JSONL of fields.
  writeFileSync(join(dir, 'tokenizer.json'), readFileSync(join(ROOT, 'test', 'fixtures', 'text', 'tokenizer.json')));
  writeFileSync(join(dir, 'corpus.jsonl'), Array.from({ length: 200 }, (_, i) => JSON.stringify({ text: words(10 + ((i * 131) % 590), i) })).join('\n') + '\n');
  writeFileSync(join(dir, 'train.jsonl'), Array.from({ length: 64 }, (_, i) => JSON.stringify({ label: i % 3, ids: Array.from({ length: 1 + (i % 5) }, (_, j) => i + j), text: words(5 + (i % 20), i) })).join('\n') + '\n');
  // train.parquet: input_ids list<int32>, label int64 (hyparquet-writer, a writer independent of the reader).
  const rows = Array.from({ length: 64 }, (_, i) => i);
  writeFileSync(join(dir, 'train.parquet'), new Uint8Array(parquetWriteBuffer({
    rowGroupSize: 16,
    columnData: [
      { name: 'input_ids', data: rows.map((i) => Array.from({ length: 1 + (i % 7) }, (_, j) => 10 * i + j)) },
      { name: 'label', data: rows.map((i) => BigInt(i % 3)) },
    ],
    schema: [
      { name: 'root', num_children: 2 },
      { name: 'input_ids', repetition_type: 'OPTIONAL', num_children: 1, converted_type: 'LIST', logical_type: { type: 'LIST' } },
      { name: 'list', repetition_type: 'REPEATED', num_children: 1 },
      { name: 'element', type: 'INT32', repetition_type: 'REQUIRED' },
      { name: 'label', type: 'INT64', repetition_type: 'REQUIRED' },
    ],
  })));
  // A Hugging Face datasets cache file: label, text, input_ids (list<int32>), raw (binary).
  const item = new Field('item', new Int32());
  writeFileSync(join(dir, 'data-00000-of-00001.arrow'), tableToIPC(new Table({
    label: vectorFromArray(rows.map((i) => BigInt(i % 3)), new Int64()),
    text: vectorFromArray(rows.map((i) => words(3 + (i % 9), i)), new Utf8()),
    input_ids: vectorFromArray(rows.map((i) => Array.from({ length: 1 + (i % 4) }, (_, j) => i + j)), new List(item)),
    raw: vectorFromArray(rows.map((i) => Uint8Array.of(i, 255 - i)), new Binary()),
  }), 'file'));
}

// ---- running a block -----------------------------------------------------------------------------

interface Ran {
  readonly code: number | null;
  readonly signal: string | null;
  readonly out: string;
  readonly timedOut: boolean;
}

/**
 * Run a command in its own process group and collect its output. NOTE: this waits for the command
 * to exit (a block's program ending once its loops and close() are done); past `ms` the whole group
 * — the block's process and any loader or `stoker serve` it started — is killed and the result says
 * so. Whatever the group left running after a normal exit is killed too.
 */
function runCommand(command: string, args: readonly string[], cwd: string, env: NodeJS.ProcessEnv, ms: number): Promise<Ran> {
  return new Promise((done, fail) => {
    const child = spawn(command, args, { cwd, env, detached: true, stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    child.stdout.on('data', (d: Buffer) => void (out += d.toString()));
    child.stderr.on('data', (d: Buffer) => void (out += d.toString()));
    const killGroup = () => {
      try {
        process.kill(-child.pid!, 'SIGKILL');
      } catch {
        // the group is gone already
      }
    };
    let timedOut = false;
    const timer = setTimeout(() => {
      timedOut = true;
      killGroup();
    }, ms);
    child.on('error', (e) => {
      clearTimeout(timer);
      fail(e);
    });
    child.on('close', (code, signal) => {
      clearTimeout(timer);
      killGroup();
      done({ code, signal, out, timedOut });
    });
  });
}

function blockEnv(dir: string): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {
    ...process.env,
    XDG_CACHE_HOME: join(dir, '.cache'), // the tar, JSONL, folder and length caches stay in the block's directory
    PYTHONPATH: join(ROOT, 'python'),
    // No STOKER_JS: the Python client finds the project's node_modules/.bin/stoker walking up from the block's directory, as a user's would.
    npm_config_offline: 'true', // npx finds the project's own stoker; never fetch a package of that name from the registry
    PATH: `${join(dir, '..', 'node_modules', '.bin')}:${process.env.PATH ?? ''}`,
  };
  delete env.NODE_TEST_CONTEXT;
  delete env.STOKER_JS;
  return env;
}

// ---- links ---------------------------------------------------------------------------------------

/** GitHub's anchor of each heading of a page (lower case, punctuation dropped, spaces to hyphens, repeats numbered). */
function anchorsOf(path: string): Set<string> {
  const seen = new Map<string, number>();
  const anchors = new Set<string>();
  let fenced = false;
  for (const line of readFileSync(path, 'utf8').split('\n')) {
    if (/^```/.test(line)) fenced = !fenced;
    const h = fenced ? null : /^#{1,6}\s+(.*?)\s*#*\s*$/.exec(line);
    if (h === null) continue;
    const text = h[1]!.replace(/\[([^\]]*)\]\([^)]*\)/g, '$1');
    const base = text.toLowerCase().replace(/[^\p{L}\p{N}\s_-]/gu, '').replace(/\s/g, '-');
    const k = seen.get(base) ?? 0;
    seen.set(base, k + 1);
    anchors.add(k === 0 ? base : `${base}-${k}`);
  }
  return anchors;
}

/** Whether the packed package holds `path` (relative to the root), by package.json `files` and npm's always-included files. */
function shipped(path: string): boolean {
  const files = (JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { files: string[] }).files;
  if (['README.md', 'LICENSE', 'package.json'].includes(path)) return true;
  return files.some((pattern) => {
    const re = new RegExp(`^${pattern.replace(/[.+^${}()|[\]\\]/g, '\\$&').replace(/\*/g, '[^/]*')}(/.*)?$`);
    return re.test(path);
  });
}

// ---- the tests -----------------------------------------------------------------------------------

describe('the documentation: README.md and docs/*.md', () => {
  it('every block is marked well: a reason for every block that does not run, files named once per page', () => {
    assert.ok(BLOCKS.length > 20, `found ${BLOCKS.length} blocks`);
    for (const b of BLOCKS) {
      if (b.mode.kind === 'typecheck-only') assert.ok(b.lang === 'ts', `${b.id}: typecheck-only is for TypeScript blocks`);
      if (b.mode.kind === 'file') assert.ok(b.lang === 'ts' || b.lang === 'js', `${b.id}: a file block is a module`);
    }
    const files = BLOCKS.flatMap((b) => (b.mode.kind === 'file' ? [`${b.page}: ${b.mode.name}`] : []));
    assert.equal(new Set(files).size, files.length, `a file named twice on one page: ${files.join(', ')}`);
    const runnable = BLOCKS.filter((b) => b.mode.kind === 'run');
    // A block that installs packages or runs the suite would change the project the blocks share (and run this test inside itself).
    for (const b of runnable) if (b.lang === 'sh') assert.doesNotMatch(b.code, /\b(npm|pnpm|yarn)\s+(install|i|ci|add|test|start|run)\b|\bnpm\s+t\b|\bpip3?\s+install\b/, `${b.id}: a shell block that installs or runs the suite must be marked skip`);
    assert.ok(runnable.some((b) => b.page === 'README.md' && b.lang === 'ts') && runnable.some((b) => b.page === 'README.md' && b.lang === 'python'), "the README's examples run");
    assert.ok(runnable.some((b) => b.page === 'docs/torch.md' && b.lang === 'python'), "docs/torch.md's example runs");
  });

  it('the README is a front door: under 200 lines, what it is, the two commands and both examples on its first screen, an index of every page', () => {
    const text = readFileSync(join(ROOT, 'README.md'), 'utf8');
    const lines = text.split('\n');
    assert.ok(lines.length < 200, `README.md has ${lines.length} lines`);
    const screen = lines.slice(0, 50).join('\n');
    assert.match(screen, /```bash\nnpm install && npm start[^\n]*\nnpm test\b/, 'the two commands of a fresh clone');
    assert.match(screen, /```ts\nimport \{[^}]*\bDataLoader\b[^}]*\} from 'stoker-ml';[\s\S]*?\n```/, 'the TypeScript example, whole');
    assert.match(screen, /```python\nfrom stoker\.torch import DataLoader\n[\s\S]*?\n```/, 'the PyTorch example, whole');
    assert.match(screen, /"type": "module"/, 'the examples say they are ES modules');
    assert.doesNotMatch(text, /\b\d[\d ,]*\s+tests\b|\b\d+(\.\d+)?\s*(s|min|minutes)\b(?! of CPU)/, 'no hand-written test count or wall time');
    const pagesOnDisk = [...pages().filter((p) => p !== 'README.md'), ...readdirSync(join(ROOT, 'docs', 'benchmarks')).filter((f) => f.endsWith('.md')).map((f) => `docs/benchmarks/${f}`)];
    for (const page of pagesOnDisk) assert.ok(text.includes(`](${page})`), `the README's index links ${page}`);
  });

  it("CI runs the README's test command (.ci/run)", () => {
    const fence = /```bash\n([\s\S]*?)```/.exec(readFileSync(join(ROOT, 'README.md'), 'utf8'));
    const command = /^(npm test)\b/m.exec(fence?.[1] ?? '');
    assert.ok(command !== null, "the README's first bash block has the test command");
    assert.match(readFileSync(join(ROOT, '.ci', 'run'), 'utf8'), new RegExp(`^${command[1]}$`, 'm'));
  });

  it('every relative link points at a file the package ships (so it works in node_modules/stoker-ml too), and every #anchor at a heading', () => {
    const bad: string[] = [];
    for (const page of pages()) {
      const text = readFileSync(join(ROOT, page), 'utf8').replace(/```[\s\S]*?```/g, '');
      for (const m of text.matchAll(/\]\(([^)\s]+)\)/g)) {
        const link = m[1]!;
        if (/^[a-z]+:/i.test(link)) continue;
        const [path, anchor] = link.split('#') as [string, string | undefined];
        const target = path === '' ? join(ROOT, page) : resolve(ROOT, dirname(page), path);
        const rel = relative(ROOT, target);
        if (!existsSync(target)) bad.push(`${page}: ${link}: no such file`);
        else if (!shipped(normalize(rel))) bad.push(`${page}: ${link}: ${rel} is not in the package (package.json files)`);
        else if (anchor !== undefined && target.endsWith('.md') && !anchorsOf(target).has(anchor)) bad.push(`${page}: ${link}: no heading #${anchor} in ${rel}`);
      }
    }
    assert.deepEqual(bad, []);
  });

  it("the pages `stoker --help` names are there, and shipped (the package test runs the installed command's help)", () => {
    for (const page of ['cli.md', 'stats.md', 'torch.md']) {
      assert.ok(existsSync(docPath(page)), docPath(page));
      assert.ok(shipped(relative(ROOT, docPath(page))), `docs/${page} is in the package`);
    }
  });
});

describe('the documentation blocks', () => {
  let project = '';
  let fixtures = '';
  let built = false;
  before(async () => {
    project = mkdtempSync(join(tmpdir(), 'stoker-docs-'));
    built = makeProject(project);
    fixtures = join(project, 'fixtures');
    mkdirSync(fixtures);
    await makeFixtures(fixtures);
  }, { timeout: TEST_MS });
  after(() => {
    if (project !== '') rmSync(project, { recursive: true, force: true });
  });

  /** The block's own directory in the project: links to every fixture, and the page's file blocks above it. */
  function blockDir(b: Block): string {
    const dir = join(project, b.id);
    mkdirSync(dir);
    for (const entry of readdirSync(fixtures)) symlinkSync(join(fixtures, entry), join(dir, entry));
    for (const f of BLOCKS) {
      if (f.page === b.page && f.line < b.line && f.mode.kind === 'file') writeFileSync(join(dir, f.mode.name), f.code);
    }
    return dir;
  }

  it('every TypeScript block type-checks against the package types (strict)', { timeout: TEST_MS }, () => {
    const dir = join(project, 'typecheck');
    const files = new Map<string, Block>();
    for (const b of BLOCKS) {
      if (b.lang !== 'ts' || b.mode.kind === 'skip') continue;
      const file = join(dir, b.id, b.mode.kind === 'file' ? b.mode.name : 'main.ts');
      mkdirSync(dirname(file), { recursive: true });
      writeFileSync(file, b.code);
      files.set(file, b);
    }
    const options: ts.CompilerOptions = {
      target: ts.ScriptTarget.ES2022, module: ts.ModuleKind.NodeNext, moduleResolution: ts.ModuleResolutionKind.NodeNext,
      lib: ['lib.es2023.d.ts', 'lib.esnext.disposable.d.ts'], types: ['node'], typeRoots: [join(project, 'node_modules', '@types')],
      strict: true, noEmit: true, skipLibCheck: true, esModuleInterop: true,
    };
    const program = ts.createProgram([...files.keys()], options);
    const problems: string[] = [];
    for (const [file, b] of files) {
      const source = program.getSourceFile(file);
      assert.ok(source !== undefined, `${file} is in the program`);
      for (const d of [...program.getSyntacticDiagnostics(source), ...program.getSemanticDiagnostics(source)]) {
        const at = d.start === undefined ? 0 : source.getLineAndCharacterOfPosition(d.start).line;
        problems.push(`${b.page}:${b.line + 1 + at}: ${ts.flattenDiagnosticMessageText(d.messageText, '\n')}`);
      }
    }
    assert.deepEqual(problems, []);
  });

  const noTorch = torchMissing(PYTHON);
  for (const b of BLOCKS) {
    if (b.mode.kind !== 'run') continue;
    const skip = b.lang === 'python' && noTorch !== false ? noTorch : false;
    it(`${b.page}:${b.line} (${b.lang}) runs`, { skip, timeout: BLOCK_MS + 60_000 }, async () => {
      const dir = blockDir(b);
      const file = join(dir, { ts: 'main.ts', js: 'main.mjs', python: 'main.py', sh: 'main.sh' }[b.lang]);
      writeFileSync(file, b.code);
      let [command, args] = b.lang === 'python' ? [PYTHON, [file]] : b.lang === 'sh' ? ['bash', ['-eo', 'pipefail', file]] : [process.execPath, ['--import', 'tsx', file]];
      if ((b.lang === 'ts' || b.lang === 'js') && built && !needsTsLoader(b)) {
        // NOTE [Blocks without tsx]: tsx's hooks see every module the program loads, stoker-ml's dist/
        // and its dependencies too (1.7 s more a start than plain node on the 2-core VM). A block that
        // loads no TypeScript file at run time is compiled here as tsx compiles it (types erased,
        // nothing else changed) and runs under plain node: the same program, the same exit.
        const js = join(dir, 'main.mjs');
        if (b.lang === 'ts') writeFileSync(js, ts.transpileModule(b.code, { fileName: file, compilerOptions: { target: ts.ScriptTarget.ES2022, module: ts.ModuleKind.ESNext, verbatimModuleSyntax: false, sourceMap: false } }).outputText);
        [command, args] = [process.execPath, [js]];
      }
      const ran = await runCommand(command, args, dir, blockEnv(dir), BLOCK_MS);
      assert.ok(!ran.timedOut, `${b.page}:${b.line} did not finish within ${BLOCK_MS} ms (a hang):\n${ran.out}`);
      assert.equal(ran.code, 0, `${b.page}:${b.line} exited with ${ran.code ?? ran.signal}:\n${ran.out}`);
    });
  }
});
