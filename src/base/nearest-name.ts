// Internal: not exported from the package entry.
// "Did you mean …?" for a misspelled option name: the known name closest to the one given. The
// rule: a suggestion is made only when it is close (an edit or two, ignoring case, `_` and `-`), so
// an unrelated name is answered with the list of known names instead of a wrong guess.

/** Levenshtein distance with adjacent transpositions (optimal string alignment). */
export function editDistance(a: string, b: string): number {
  const rows = a.length + 1;
  const cols = b.length + 1;
  const d = Array.from({ length: rows }, (_, i) => Array.from({ length: cols }, (_, j) => (i === 0 ? j : j === 0 ? i : 0)));
  for (let i = 1; i < rows; i++) {
    for (let j = 1; j < cols; j++) {
      const cost = a[i - 1] === b[j - 1] ? 0 : 1;
      let v = Math.min(d[i - 1]![j]! + 1, d[i]![j - 1]! + 1, d[i - 1]![j - 1]! + cost);
      if (i > 1 && j > 1 && a[i - 1] === b[j - 2] && a[i - 2] === b[j - 1]) v = Math.min(v, d[i - 2]![j - 2]! + 1);
      d[i]![j] = v;
    }
  }
  return d[a.length]![b.length]!;
}

const fold = (s: string) => s.toLowerCase().replace(/[_-]/g, '');

/** The known name nearest to `name` when it is at most 2 edits away (and less than half its length); else undefined. */
export function nearestName(name: string, known: Iterable<string>): string | undefined {
  const target = fold(name);
  let best: string | undefined;
  let bestDistance = Number.POSITIVE_INFINITY;
  for (const k of known) {
    const dist = editDistance(target, fold(k));
    if (dist < bestDistance) {
      best = k;
      bestDistance = dist;
    }
  }
  return bestDistance <= Math.min(2, Math.ceil(target.length / 2) - 1) ? best : undefined;
}
