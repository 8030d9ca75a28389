// Internal: not exported from the package entry.
// The first line every worker thread of the loader runs. Workers do not inherit tsx's module hooks
// on Node 20 (the entry resolves before `--import tsx` applies), so when the worker entry (or a user
// module it will import) is TypeScript, the boot registers tsx first — if it is installed — and then
// imports the entry. From the compiled package (dist/*.js) it is a plain import.

/** Source for `new Worker(code, { eval: true })` that imports `entry`; `alsoTs`: another module the worker imports. */
export function workerBoot(entry: URL, alsoTs?: string): string {
  const href = JSON.stringify(entry.href);
  const typescript = /\.[cm]?tsx?$/.test(entry.pathname) || (alsoTs !== undefined && /\.[cm]?tsx?$/.test(alsoTs));
  let tsx: string | undefined;
  if (typescript) {
    try {
      tsx = import.meta.resolve('tsx/esm/api');
    } catch {
      tsx = undefined;
    }
  }
  return tsx === undefined ? `import(${href})` : `import(${JSON.stringify(tsx)}).then((m) => { m.register(); return import(${href}); })`;
}
