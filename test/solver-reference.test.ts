import { describe, expect, it } from 'vitest';
import { createSolverRegistry, exactDp } from '../src/index.js';
import { randomInstance } from './helpers.js';

describe('reference solvers never hand back a truncated result as an allocation', () => {
  it('regression: exactDp on 3,000 prompts at 8 a prompt is truncated (all n = 0); the registry\'s dp throws instead', () => {
    const input = randomInstance('dp/large', { size: 3000, minN: 2, maxN: 64, skip: false, rollouts: 24_000, tokens: Infinity });
    const raw = exactDp(input);
    expect(raw.status).toBe('truncated');
    expect([...raw.n].every((x) => x === 0)).toBe(true);
    expect(() => createSolverRegistry().get('dp')(input)).toThrow(/solver "dp" gave up on this instance \(3000 prompts, 72003000 DP cells/);
    // Within its limit the same solver answers normally.
    const small = randomInstance('dp/small', { size: 20, minN: 2, maxN: 16, skip: false, rollouts: 160, tokens: Infinity });
    expect(createSolverRegistry().get('dp')(small).status).toBe('optimal');
  });
});
