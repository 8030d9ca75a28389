// The Python client installs as docs/torch.md says, with no network: a venv that sees the system's
// packages (Debian's torch, setuptools), then `pip install --no-build-isolation` of python/, which
// builds with the setuptools already there instead of downloading one. Run on a copy of python/
// (setuptools writes build/ and *.egg-info beside the sources), from a folder outside the checkout,
// so that what is imported is the installed package. Skipped, with the reason, where /usr/bin/python3
// lacks torch, venv or pip, or setuptools 61 (and, below setuptools 70.1, wheel): CI installs
// python3-venv, python3-setuptools and python3-wheel (.ci/run).

import assert from 'node:assert/strict';
import { execFile, execFileSync } from 'node:child_process';
import { cpSync, mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { writeShapesDataset } from '../src/cli/demo-data.js';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import { CHILD_MS, TEST_MS } from './fixtures.js';
import { torchMissing } from './fixtures/python-client.js';

const PYTHON = '/usr/bin/python3';
const SOURCES = fileURLToPath(new URL('../python', import.meta.url));

/** What /usr/bin/python3 can make a venv with: 'ensurepip' (the documented route), 'pip' (a --without-pip venv and the system's pip), or why neither. */
function route(): { how: 'ensurepip' | 'pip' } | { skip: string } {
  const torch = torchMissing(PYTHON);
  if (torch !== false) return { skip: torch };
  const probe = (code: string) => {
    try {
      execFileSync(PYTHON, ['-c', code], { stdio: 'ignore', timeout: 60_000 });
      return true;
    } catch {
      return false;
    }
  };
  const setuptools = "import setuptools\nv = tuple(int(x) for x in setuptools.__version__.split('.')[:2])\nassert v >= (61, 0)\nif v < (70, 1):\n    import wheel";
  if (!probe(setuptools)) return { skip: `${PYTHON} has no setuptools ≥ 61 (with wheel below 70.1): apt-get install python3-setuptools python3-wheel; the no-network install is not tested` };
  if (!probe('import venv')) return { skip: `${PYTHON} has no venv module; the no-network install is not tested` };
  if (probe('import ensurepip')) return { how: 'ensurepip' };
  if (probe('import pip')) return { how: 'pip' };
  return { skip: `${PYTHON} has neither ensurepip (apt-get install python3-venv) nor pip; the no-network install is not tested` };
}

/** Run a command to its end (bounded: CHILD_MS), resolving to its stdout; a failure rejects with its output. */
function run(command: string, args: readonly string[], cwd: string): Promise<string> {
  // pip: no prompt, no version check and no cache (each would reach for the network or the home folder).
  const env = { ...process.env, PIP_NO_INPUT: '1', PIP_DISABLE_PIP_VERSION_CHECK: '1', PIP_NO_CACHE_DIR: '1', PYTHONPATH: '' };
  return new Promise((resolve, reject) => {
    execFile(command, args, { cwd, env, timeout: CHILD_MS, maxBuffer: 16 << 20 }, (error, stdout, stderr) => {
      if (error !== null) reject(new Error(`${command} ${args.join(' ')} failed (${error.message}):\n${stdout}\n${stderr}`));
      else resolve(stdout);
    });
  });
}

const how = route();

describe('the Python client installs with no network (docs/torch.md, Install)', { skip: 'skip' in how ? how.skip : false, timeout: TEST_MS }, () => {
  it("python3 -m venv --system-site-packages, then pip install --no-build-isolation ./python: stoker.torch imports from the venv, as the distribution stoker-ml, and the README's PyTorch block runs there", async () => {
    const dir = mkdtempSync(join(tmpdir(), 'stoker-pyinstall-'));
    try {
      const src = join(dir, 'python');
      cpSync(SOURCES, src, { recursive: true, filter: (p) => !/(__pycache__|\.egg-info|[/\\]build)$/.test(p) });
      const venv = join(dir, '.venv');
      // --no-index: a dependency missing from the system's packages fails at once, never a download.
      if ('how' in how && how.how === 'ensurepip') {
        await run(PYTHON, ['-m', 'venv', '--system-site-packages', venv], dir);
        await run(join(venv, 'bin', 'pip'), ['install', '--no-build-isolation', '--no-index', src], dir);
      } else {
        await run(PYTHON, ['-m', 'venv', '--system-site-packages', '--without-pip', venv], dir);
        await run(PYTHON, ['-m', 'pip', '--python', join(venv, 'bin', 'python'), 'install', '--no-build-isolation', '--no-index', src], dir);
      }
      const code = 'import importlib.metadata as m, json, stoker.torch, torch\n' +
        "d = m.distribution('stoker-ml')\n" +
        "print(json.dumps({'name': d.metadata['Name'], 'requires': d.requires, 'module': stoker.torch.__file__, 'loader': callable(stoker.torch.DataLoader)}))";
      const out = JSON.parse((await run(join(venv, 'bin', 'python'), ['-c', code], dir)).trim().split('\n').pop()!) as Record<string, unknown>;
      assert.equal(out.name, 'stoker-ml');
      assert.deepEqual(out.requires, ['torch']);
      assert.ok(String(out.module).startsWith(join(venv, 'lib')), `stoker.torch is the installed one: ${String(out.module)}`);
      assert.equal(out.loader, true);
      // The README's PyTorch block, as written, with the venv's python in a project that installed
      // stoker-ml from npm (its node_modules/.bin/stoker, here a link to this checkout's launcher).
      const readme = readFileSync(fileURLToPath(new URL('../README.md', import.meta.url)), 'utf8');
      const block = /```python\n([\s\S]*?)```/.exec(readme)?.[1];
      assert.ok(block !== undefined && block.includes('from stoker.torch import DataLoader'), "the README's PyTorch block");
      mkdirSync(join(dir, 'node_modules', '.bin'), { recursive: true });
      symlinkSync(fileURLToPath(new URL('../bin/stoker.js', import.meta.url)), join(dir, 'node_modules', '.bin', 'stoker'));
      await writeShapesDataset(join(dir, 'data'), { train: 130, test: 0, size: 32, seed: 5 });
      writeFileSync(join(dir, 'readme.py'), `${block}print("readme block done")\n`);
      assert.match(await run(join(venv, 'bin', 'python'), ['readme.py'], dir), /readme block done/);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
