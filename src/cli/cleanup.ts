// Work a command must undo even when interrupted (temp folders it wrote). The rule: a command
// registers the undo before it makes the mess and runs it itself in `finally`; on Ctrl-C main.ts runs
// what is still registered, then exits 130.

const pending = new Set<() => void>();

/** Register `undo` (synchronous, idempotent); returns the function that runs and unregisters it. */
export function onCleanup(undo: () => void): () => void {
  pending.add(undo);
  return () => {
    if (!pending.delete(undo)) return;
    undo();
  };
}

/** Run everything still registered (the interrupt path). */
export function runCleanups(): void {
  for (const undo of [...pending]) {
    pending.delete(undo);
    try {
      undo();
    } catch {
      // Best effort: an interrupted run must still exit.
    }
  }
}
