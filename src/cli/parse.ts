import { InvalidArgumentError } from 'commander';

/** Commander argument parsers that reject rather than repair. */
export function intArg(min: number): (value: string) => number {
  return (value) => {
    const n = Number(value);
    if (!/^-?\d+$/.test(value.trim()) || !Number.isSafeInteger(n) || n < min) {
      throw new InvalidArgumentError(`expected an integer ≥ ${min}, got "${value}"`);
    }
    return n;
  };
}

export function numberArg(min: number, max: number): (value: string) => number {
  return (value) => {
    const n = Number(value);
    if (value.trim() === '' || !Number.isFinite(n) || n < min || n > max) {
      throw new InvalidArgumentError(`expected a number in [${min}, ${max}], got "${value}"`);
    }
    return n;
  };
}
