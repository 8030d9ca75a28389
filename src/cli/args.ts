// Parsers for option values, shared by the commands. The rule: a bad value throws commander's
// InvalidArgumentError with what was expected, so every command reports it the same way (exit 2).

import { InvalidArgumentError } from 'commander';

/** An integer in [min, max]. */
export function intArg(min: number, max = Number.MAX_SAFE_INTEGER): (value: string) => number {
  return (value) => {
    const n = Number(value);
    if (!/^\s*\d+\s*$/.test(value) || !Number.isSafeInteger(n) || n < min || n > max) {
      throw new InvalidArgumentError(max === Number.MAX_SAFE_INTEGER ? `expected an integer ≥ ${min}` : `expected an integer from ${min} to ${max}`);
    }
    return n;
  };
}

/** `auto` or a worker count ≥ 0. */
export function workersArg(value: string): number | 'auto' {
  if (value === 'auto') return 'auto';
  return intArg(0, 256)(value);
}

export type DeviceName = 'cpu' | 'sim' | `cuda${'' | `:${number}`}`;

/** cpu, sim, cuda or cuda:N. */
export function deviceArg(value: string): DeviceName {
  if (/^(cpu|sim|cuda(:\d+)?)$/.test(value)) return value as DeviceName;
  throw new InvalidArgumentError('expected cpu, cuda, cuda:N or sim');
}
