import type { Random } from './beta.js';

/**
 * seedrandom's default generator (seedrandom 3.0.5, `seedrandom(key)`: ARC4 keyed by the
 * mixed key string, 256 outputs dropped, doubles from 7+ bytes; MIT licence, © 2019 David
 * Bau), the same numbers for the same string key, with its state in a byte array instead of
 * a 256-element array and without seedrandom's global entropy pool. Made once per generated
 * group in a replay, where seedrandom's allocations were most of the garbage (a 10⁷-rollout
 * replay makes ~10⁶ of them). A test checks equal outputs against seedrandom. O(key length)
 * to create, O(1) a draw.
 */
export function arc4Random(seed: string): Random {
  // mixkey(seed, key): the key's bytes from the string, at most 256 of them.
  const length = Math.min(seed.length, 256);
  const key = new Uint8Array(length === 0 ? 1 : length);
  let smear = 0;
  for (let j = 0; j < seed.length; j++) {
    smear ^= (j < 256 ? 0 : key[j & 255]!) * 19;
    key[j & 255] = 255 & (smear + seed.charCodeAt(j));
  }
  // ARC4 key scheduling (the empty key counts as [0]).
  const keylen = key.length;
  const s = new Uint8Array(256);
  for (let i = 0; i < 256; i++) s[i] = i;
  for (let i = 0, j = 0, k = 0; i < 256; i++) {
    const t = s[i]!;
    j = 255 & (j + key[k]! + t);
    if (++k === keylen) k = 0;
    s[i] = s[j]!;
    s[j] = t;
  }
  let si = 0;
  let sj = 0;
  // RC4-drop[256]: the first 256 outputs are discarded.
  for (let k = 0; k < 256; k++) {
    si = 255 & (si + 1);
    const t = s[si]!;
    sj = 255 & (sj + t);
    s[si] = s[sj]!;
    s[sj] = t;
  }
  /** The next `count` outputs as one number (count ≤ 6: exact in a double). */
  const g = (count: number): number => {
    let r = 0;
    for (; count > 0; count--) {
      si = 255 & (si + 1);
      const t = s[si]!;
      sj = 255 & (sj + t);
      s[si] = s[sj]!;
      s[sj] = t;
      r = r * 256 + s[255 & (s[si]! + t)]!;
    }
    return r;
  };
  return () => {
    let n = g(6);
    let d = 281474976710656; // 2^48
    let x = 0;
    while (n < 4503599627370496) { // 2^52
      n = (n + x) * 256;
      d *= 256;
      x = g(1);
    }
    while (n >= 9007199254740992) { // 2^53
      n /= 2;
      d /= 2;
      x >>>= 1;
    }
    return (n + x) / d;
  };
}
