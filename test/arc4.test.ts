import seedrandom from 'seedrandom';
import { describe, expect, it } from 'vitest';
import { arc4Random } from '../src/index.js';

describe('arc4Random', () => {
  it('draws what seedrandom draws for the same key (replay keys, empty, long, non-ASCII)', () => {
    const keys = ['', 'a', '0/12/11/prompt-9', 'greso/3/7/verl:0123456789abcdef', 'é→𝔸 mixed ✓', 'x'.repeat(300), `${'k'.repeat(255)}z`];
    for (let i = 0; i < 500; i++) keys.push(`${i % 7}/${i}/${i % 13}/p${i * 7919}`);
    let draws = 0;
    for (const key of keys) {
      const a = seedrandom(key);
      const b = arc4Random(key);
      for (let k = 0; k < 40; k++) {
        expect(b(), `key ${JSON.stringify(key)} draw ${k}`).toBe(a());
        draws++;
      }
    }
    expect(draws).toBe(keys.length * 40);
  });
});
