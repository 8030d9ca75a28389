#!/usr/bin/env bash
# Prepare .gpu/ for the GPU machine (see ../shared/gpu/README.md), small enough to travel (< 64 MiB).
# The shared pack.sh installs tsx with a plain `npm install`, which also pulls every devDependency
# (tfjs alone is 270 MiB); this script runs it, then rebuilds .gpu/prod with production dependencies
# only and copies tsx and its one dependency (esbuild) from this checkout's node_modules.
#
#   npm ci && bash scripts/gpu-pack.sh
set -euo pipefail
cd "$(dirname "$0")/.."
# The shared script's `npm ci` in .gpu/prod runs this package's own `prepare` (the dist/ build), which
# needs scripts/ and typescript, absent there: it fails after writing node.xz, before env.sh. So its
# failure is expected; env.sh is copied here and the install skips scripts (koffi and sharp ship
# prebuilt binaries and load without theirs).
bash ../shared/gpu/pack.sh >/dev/null 2>&1 || true
[ -s .gpu/node.xz ] || { echo "gpu-pack: ../shared/gpu/pack.sh did not write .gpu/node.xz" >&2; exit 1; }
cp ../shared/gpu/env.sh .gpu/env.sh
rm -rf .gpu/prod && mkdir -p .gpu/prod && cp package.json package-lock.json .gpu/prod/
(cd .gpu/prod && npm ci --omit=dev --omit=optional --ignore-scripts --no-audit --no-fund --loglevel=error >/dev/null)
# Optional dependencies are left out of that install for @julusian/jpeg-turbo's build tools (cmake-js
# and ~90 packages): the platform packages of sharp (@img) and koffi (@koromix), optional dependencies
# of theirs, come from this checkout (npm installed this platform's), and of @julusian/jpeg-turbo
# only what the crop decode loads (turbo-jpeg.ts): its package.json and the linux-x64 libturbojpeg.
cp -r node_modules/@img node_modules/@koromix .gpu/prod/node_modules/
J=node_modules/@julusian/jpeg-turbo
mkdir -p ".gpu/prod/$J/prebuilds" && cp "$J/package.json" ".gpu/prod/$J/" && cp -r "$J/prebuilds/jpeg-turbo-linux-x64" ".gpu/prod/$J/prebuilds/"
for p in tsx esbuild @esbuild; do cp -r "node_modules/$p" .gpu/prod/node_modules/; done
# Stay under the carry limit: no source maps or type declarations at run time; esbuild's API runs
# the platform binary from @esbuild/linux-x64, so its own copy in esbuild/bin goes.
find .gpu/prod/node_modules \( -name '*.map' -o -name '*.d.ts' -o -name '*.d.mts' -o -name '*.d.cts' \) -delete
rm -f .gpu/prod/node_modules/esbuild/bin/esbuild
# The Rust tokenizers binding ships every platform's addon in one package (64 MiB): keep this one's.
find .gpu/prod/node_modules/tokenizers -name 'tokenizers.*.node' ! -name 'tokenizers.linux-x64-gnu.node' -delete
# Every dependency travels xz-compressed (sharp's libvips, the S3 client) and env.sh unpacks it there.
tar -cJf .gpu/modules.tar.xz -C .gpu/prod node_modules
rm -rf .gpu/prod/node_modules .gpu/sharp.tar.xz
echo '[ -d .gpu/prod/node_modules ] || tar -xJf .gpu/modules.tar.xz -C .gpu/prod' >> .gpu/env.sh
echo ".gpu/ is $(du -sm .gpu | cut -f1) MiB"
