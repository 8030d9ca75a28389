// Whether this checkout's dist/ is current: built (dist/.built, written by scripts/build.js at the
// end of a whole build) after every file of src/ last changed. bin/stoker.js runs dist/ then, and the
// documentation test links its blocks to it; a checkout being edited falls back to the sources.

import { readdirSync, statSync } from 'node:fs';

export function distCurrent() {
  let stamp;
  try {
    stamp = statSync(new URL('../dist/.built', import.meta.url)).mtimeMs;
  } catch {
    return false;
  }
  const newer = (dir) =>
    readdirSync(dir, { withFileTypes: true }).some((e) => {
      const path = `${dir}/${e.name}`;
      return e.isDirectory() ? newer(path) : statSync(path).mtimeMs > stamp;
    });
  try {
    return !newer(new URL('../src', import.meta.url).pathname);
  } catch {
    return false;
  }
}
