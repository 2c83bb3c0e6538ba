import seedrandom from 'seedrandom';
import { describe, expect, it } from 'vitest';
import { createValueRegistry, fnv1a, greedySolve, MonomialCurves, type CurveMode, type SolverInput, type ValueCurves } from '../src/index.js';
import { expectSameSolution } from './helpers.js';
import { ReferenceCurves } from './reference-curves.js';

/**
 * MonomialCurves shares cursor states between prompts with bit-identical parameters
 * (value/curve-nodes.ts). ReferenceCurves is the per-prompt implementation it replaced: every
 * read must give the same bits, and the solver the same plan, on instances full of ties.
 */
const values = createValueRegistry();

/** Parameters drawn from a few kinds, so classes of many prompts mix with prompts alone. */
function modeOf(random: () => number, size: number, kinds: number, kind: 'beta' | 'point'): CurveMode {
  const params = Array.from({ length: kinds }, () => [0.3 + Math.floor(random() * 8) * 0.7, 0.3 + Math.floor(random() * 8) * 1.3] as const);
  const alpha = new Float64Array(size);
  const beta = new Float64Array(size);
  for (let i = 0; i < size; i++) {
    const alone = random() < 0.1;
    const [a, b] = params[Math.floor(random() * kinds)]!;
    alpha[i] = alone ? 0.2 + random() * 9 : a;
    beta[i] = alone ? 0.2 + random() * 9 : b;
  }
  return kind === 'beta' ? { kind, alpha, beta } : { kind, p: Float64Array.from(alpha, (a, i) => a / (a + beta[i]!)) };
}

/** MonomialCurves counting the solver's look-ahead (solver/plateau.ts: plateaus taken in index order). */
class Counting extends MonomialCurves {
  peeks = 0;
  override gainAfterNext(i: number): number {
    this.peeks++;
    return super.gainAfterNext(i);
  }
}

const same = (a: number, b: number) => Object.is(a, b) || (a !== a && b !== b);

describe('curves shared by prompts with identical parameters', () => {
  it('read the same bits as per-prompt curves under random seeks, moves and walks', () => {
    let checked = 0;
    for (const name of values.names()) {
      for (const kind of ['beta', 'point'] as const) {
        const random = seedrandom(`curves/${name}/${kind}`);
        const size = 300;
        const mode = modeOf(random, size, 6, kind);
        const fn = values.get(name);
        const shared = new MonomialCurves(fn, mode);
        const ref = new ReferenceCurves(fn, mode);
        for (let i = 0; i < size; i++) expect(same(shared.seek(i, 2), ref.seek(i, 2)), `${name} ${kind} seek ${i}`).toBe(true);
        // Enough seeks to other n to fill the shared states (N/2 + 4,096): later moves keep a row of their own.
        for (let step = 0; step < 12_000; step++) {
          const i = Math.floor(random() * size);
          const op = random();
          const tag = `${name} ${kind} step ${step} item ${i}`;
          if (op < 0.45) {
            const n = 1 + Math.floor(random() * 5);
            expect(same(shared.seek(i, n), ref.seek(i, n)), tag).toBe(true);
          } else if (op < 0.7) {
            if (ref.cursorOf(i) < 80) {
              expect(same(shared.nextGain(i), ref.nextGain(i)), tag).toBe(true);
              shared.advance(i);
              ref.advance(i);
            }
          } else if (op < 0.9) {
            const cost = random() < 0.5 ? 1 : 0.5;
            // Few distinct arguments, so a walk's memory is hit with the same and with other ones.
            const lambda = [0.001, 0.004, 0.01][Math.floor(random() * 3)]!;
            const maxN = [12, 20, 40][Math.floor(random() * 3)]!;
            expect(shared.advanceWhile(i, cost, lambda, maxN), tag).toBe(ref.advanceWhile(i, cost, lambda, maxN));
            expect(same(shared.walkGain, ref.walkGain), tag).toBe(true);
            expect(same(shared.walkNext, ref.walkNext), tag).toBe(true);
          } else {
            const n = Math.floor(random() * 20);
            expect(same(shared.value(i, n), ref.value(i, n)), tag).toBe(true);
          }
          expect(shared.cursorOf(i), tag).toBe(ref.cursorOf(i));
          expect(same(shared.current(i), ref.current(i)), tag).toBe(true);
          checked++;
        }
      }
    }
    expect(checked).toBe(values.names().length * 2 * 12_000);
  });

  it('give the greedy solver the same plan, bit for bit, as per-prompt curves', () => {
    const cases: { size: number; kinds: number; kind: 'beta' | 'point'; shape: Partial<SolverInput> }[] = [
      { size: 20_000, kinds: 1, kind: 'beta', shape: {} },
      { size: 20_000, kinds: 1, kind: 'beta', shape: { rollouts: 8 * 20_000 + 777 } },
      { size: 20_000, kinds: 40, kind: 'beta', shape: { rollouts: 5 * 20_000 + 13 } },
      { size: 20_000, kinds: 12, kind: 'point', shape: { rollouts: 20 * 20_000, maxN: 64 } },
      { size: 8_000, kinds: 30, kind: 'beta', shape: { skip: true, rollouts: 3 * 8_000 } },
      { size: 8_000, kinds: 8, kind: 'beta', shape: { rollouts: Infinity, tokens: 6 * 250 * 8_000 } },
      { size: 3_000, kinds: 5, kind: 'beta', shape: { multipleOf: 8, rollouts: 8 * 3_000 + 6 } },
    ];
    let ran = 0;
    let peeks = 0;
    for (const [k, { size, kinds, kind, shape }] of cases.entries()) {
      const random = seedrandom(`solve/${k}`);
      const mode = modeOf(random, size, kinds, kind);
      const costs = Float64Array.from({ length: size }, () => 100 * (1 + Math.floor(random() * 3)));
      const input = (curves: ValueCurves, surplus: ValueCurves): SolverInput => ({
        curves,
        surplus,
        tokensPerRollout: costs,
        tieBreak: Uint32Array.from({ length: size }, (_, i) => fnv1a(`${k}/${i}`)),
        minN: 2,
        maxN: 16,
        skip: false,
        rollouts: 8 * size,
        tokens: Infinity,
        saturation: 0.02,
        ...shape,
      });
      const balanced = values.get('balanced');
      const hit = values.get('hit');
      const curves = new Counting(balanced, mode);
      const fast = greedySolve(input(curves, new MonomialCurves(hit, mode)));
      peeks += curves.peeks;
      const slow = greedySolve(input(new ReferenceCurves(balanced, mode), new ReferenceCurves(hit, mode)));
      expect(fast.status, `case ${k}`).toBe('optimal');
      expectSameSolution(fast, slow, `case ${k}`);
      ran++;
    }
    expect(ran).toBe(cases.length);
    expect(peeks).toBeGreaterThan(0);
  });
});
