import type jstatPkg from 'jstat';
import { lazyRequire } from '../lazy.js';

const jstat = lazyRequire<typeof jstatPkg>('jstat');

/**
 * Student-t quantile t_{q, ν}: the x with P(T_ν ≤ x) = q. Exact (jStat's inverse of the
 * regularized incomplete beta function; t_{0.975, 2} = 4.3027), where the earlier
 * Cornish–Fisher expansion gave 3.85 at ν = 2. Domain q ∈ (0, 1), ν > 0. O(1) iterations.
 */
export function tQuantile(q: number, dof: number): number {
  return jstat().jStat.studentt.inv(q, dof);
}
