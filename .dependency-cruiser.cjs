// The layering of src/, checked by dependency-cruiser in `npm test` (npm run deps).
// The rule: a file imports only from its own layer or the layers below it, and no import cycle
// leaves a folder. The layers, lowest first, follow the data path (docs/DESIGN.md, "Layout"):
// an upward import or a cycle across folders fails with the rule's name and this comment.

/** Lowest first. A layer is a list of path patterns (regular expressions on the repository path). */
const LAYERS = [
  ['base', ['^src/errors\\.ts$', '^src/base/']],
  ['tensor', ['^src/tensor/']],
  ['sampler', ['^src/sampler/']],
  ['collate, cache, distributed, remote', ['^src/collate/', '^src/cache/', '^src/distributed/', '^src/remote/']],
  ['image', ['^src/image/']],
  ['dataset', ['^src/dataset/']],
  ['reader', ['^src/reader/']],
  ['device', ['^src/device/']],
  ['transforms', ['^src/transforms/']],
  ['options, batch', ['^src/options\\.ts$', '^src/batch\\.ts$']],
  ['pipeline', ['^src/pipeline/']],
  ['report', ['^src/report/']],
  ['loader, adapters', ['^src/loader\\.ts$', '^src/adapters/']],
  ['serve', ['^src/serve/']],
  ['cli, index', ['^src/cli/', '^src/index\\.ts$']],
];

const upward = LAYERS.slice(0, -1).map(([name, paths], i) => ({
  name: `layer-${name.replace(/, /g, '-')}`,
  severity: 'error',
  comment: `${name} is below ${LAYERS.slice(i + 1).map(([n]) => n).join(', ')}: it must not import from them (move the shared piece down, or pass it in).`,
  from: { path: paths },
  to: { path: LAYERS.slice(i + 1).flatMap(([, p]) => p) },
}));

/** @type {import('dependency-cruiser').IConfiguration} */
module.exports = {
  forbidden: [
    ...upward,
    {
      name: 'no-cycle-across-folders',
      severity: 'error',
      comment: 'An import cycle that leaves its folder ties two subsystems together: cut it by moving the shared type down.',
      from: { path: '^(src/[a-z/-]*/|src/)[^/]+$' },
      to: { circular: true, via: { pathNot: '^$1[^/]+$' } },
    },
    {
      name: 'device-interface-owns-its-types',
      severity: 'error',
      comment: 'device/device.ts and device/backend.ts are the device interface: they import no implementation (accelerator/, cuda/, sim/, jpeg/).',
      from: { path: '^src/device/(device|backend)\\.ts$' },
      to: { path: '^src/device/[^/]+/' },
    },
    {
      name: 'cuda-only-in-cuda',
      severity: 'error',
      comment: 'The CUDA backend knows nothing of the sim backend, and the reverse.',
      from: { path: '^src/device/(cuda|sim)/' },
      to: { path: '^src/device/(sim|cuda)/', pathNot: '^src/device/$1/' },
    },
    {
      name: 'not-to-unresolvable',
      severity: 'error',
      comment: 'An import that does not resolve.',
      from: { path: '^src/' },
      to: { couldNotResolve: true },
    },
  ],
  options: {
    includeOnly: '^src/',
    exclude: { path: '\\.test\\.ts$' },
    tsPreCompilationDeps: true,
    tsConfig: { fileName: 'tsconfig.json' },
  },
};
