import type { Monomial, ValueFunction } from './functions.js';

/** Slot count up to which the curves' hot loops keep every slot in a local (balanced has 6). */
export const WIDE = 6;
export type Wide = [number, number, number, number, number, number];

/**
 * A value function's terms as MonomialCurves reads them: moving slots, one per distinct
 * moment p^(a+u·n)·(1−p)^(b+(1−u)·n) weighted (c0 + c1·n), and the terms constant in n.
 */
export interface Slots {
  readonly k: number;
  readonly c0: Float64Array;
  readonly c1: Float64Array;
  readonly a: Int32Array;
  readonly b: Int32Array;
  readonly u: Uint8Array;
  /** Slot t's denominator group: slots with the same a + b share α+β+a+b+n. */
  readonly group: Int32Array;
  readonly groupAb: Int32Array;
  /** Constant terms (u = w = 0), folded per prompt into base + n·perN. */
  readonly constTerms: readonly Monomial[];
  readonly hasPerN: boolean;
  /**
   * The slots padded to WIDE when 0 < k ≤ WIDE: padding slots have c0 = c1 = 0 and a term of
   * 0, so they add exactly 0 and the sums keep the unpadded order and value.
   */
  readonly wide: { c0: Wide; c1: Wide; ab: Wide; u: Wide; a: Wide; b: Wide } | undefined;
}

/** Folds `fn`'s terms into slots. Throws on a term growing in both p and 1 − p with n. */
export function slotsOf(fn: ValueFunction): Slots {
  if (fn.terms.some((t) => t.u === 1 && t.w === 1)) throw new Error(`${fn.name}: a term may grow in p or in 1−p with n, not both`);
  const byKey = new Map<string, { a: number; b: number; u: number; c0: number; c1: number }>();
  for (const t of fn.terms) {
    if (t.u === 0 && t.w === 0) continue;
    const key = `${t.a},${t.b},${t.u}`;
    const slot = byKey.get(key) ?? { a: t.a, b: t.b, u: t.u, c0: 0, c1: 0 };
    if (t.e === 1) slot.c1 += t.coef;
    else slot.c0 += t.coef;
    byKey.set(key, slot);
  }
  const list = [...byKey.values()];
  type Slot = (typeof list)[number];
  const abs = [...new Set(list.map((x) => x.a + x.b))];
  const pad = (of: (x: Slot) => number) => Array.from({ length: WIDE }, (_, t) => (t < list.length ? of(list[t]!) : 0)) as Wide;
  const constTerms = fn.terms.filter((t) => t.u === 0 && t.w === 0);
  return {
    k: list.length,
    c0: Float64Array.from(list, (x) => x.c0),
    c1: Float64Array.from(list, (x) => x.c1),
    a: Int32Array.from(list, (x) => x.a),
    b: Int32Array.from(list, (x) => x.b),
    u: Uint8Array.from(list, (x) => x.u),
    group: Int32Array.from(list, (x) => abs.indexOf(x.a + x.b)),
    groupAb: Int32Array.from(abs),
    constTerms,
    hasPerN: constTerms.some((t) => t.e === 1),
    wide: list.length === 0 || list.length > WIDE ? undefined : {
      c0: pad((x) => x.c0), c1: pad((x) => x.c1), ab: pad((x) => x.a + x.b), u: pad((x) => x.u), a: pad((x) => x.a), b: pad((x) => x.b),
    },
  };
}
