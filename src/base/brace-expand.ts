// Internal: not exported from the package entry.
// bash / WebDataset brace expansion for shard patterns, local or remote (`train-{000..099}.tar`).
// The rule: an expansion past MAX_EXPANSION names is refused before it is built.

import { invalidOption } from '../errors.js';

const MAX_EXPANSION = 1_000_000;

/** bash / WebDataset brace expansion: `{a..b}` and `{a..b..step}` integer ranges, `{x,y}` alternatives, nested. */
export function braceExpand(pattern: string, budget: { count: number } = { count: 0 }): string[] {
  let depth = 0;
  let open = -1;
  for (let i = 0; i < pattern.length; i++) {
    const c = pattern[i];
    if (c === '{') {
      if (depth++ === 0) open = i;
    } else if (c === '}' && depth > 0 && --depth === 0) {
      const body = pattern.slice(open + 1, i);
      const alts = splitTopLevel(body);
      let middle: string[] | undefined;
      if (alts.length > 1) middle = alts.flatMap((a) => braceExpand(a, budget));
      else middle = range(body, pattern);
      if (middle === undefined) continue; // `{x}` is literal, as in bash
      const head = pattern.slice(0, open);
      const tails = braceExpand(pattern.slice(i + 1), budget);
      budget.count += middle.length * tails.length;
      if (budget.count > MAX_EXPANSION) throw invalidOption('shards', `a pattern naming at most ${MAX_EXPANSION} shards`, pattern);
      return middle.flatMap((m) => tails.map((t) => head + m + t));
    }
  }
  return [pattern];
}

function splitTopLevel(body: string): string[] {
  const out: string[] = [];
  let depth = 0;
  let from = 0;
  for (let i = 0; i < body.length; i++) {
    if (body[i] === '{') depth++;
    else if (body[i] === '}') depth--;
    else if (body[i] === ',' && depth === 0) {
      out.push(body.slice(from, i));
      from = i + 1;
    }
  }
  out.push(body.slice(from));
  return out;
}

function range(body: string, pattern: string): string[] | undefined {
  const m = /^([+-]?\d+)\.\.([+-]?\d+)(?:\.\.([+-]?\d+))?$/.exec(body);
  if (m === null) return undefined;
  const [a, b] = [Number(m[1]), Number(m[2])];
  const step = Math.abs(m[3] === undefined ? 1 : Number(m[3]));
  if (!Number.isSafeInteger(a) || !Number.isSafeInteger(b) || !Number.isSafeInteger(step) || step === 0) {
    throw invalidOption('shards', 'brace ranges of safe integers with a non-zero step', pattern);
  }
  const count = Math.floor(Math.abs(b - a) / step) + 1;
  if (count > MAX_EXPANSION) throw invalidOption('shards', `a pattern naming at most ${MAX_EXPANSION} shards`, pattern);
  const padded = /^[+-]?0\d/.test(m[1]!) || /^[+-]?0\d/.test(m[2]!);
  const width = padded ? Math.max(m[1]!.replace(/^\+/, '').length, m[2]!.replace(/^\+/, '').length) : 0;
  const out: string[] = [];
  for (let k = 0, v = a; k < count; k++, v += a <= b ? step : -step) {
    const digits = String(Math.abs(v)).padStart(v < 0 ? width - 1 : width, '0');
    out.push(v < 0 ? `-${digits}` : digits);
  }
  return out;
}
