import seedrandom from 'seedrandom';
import { createRegistries, planStep, snapshotOf } from './dist/src/index.js';
const size = Number(process.argv[2] ?? 10000); const random = seedrandom('x');
const candidates = [], states = [];
for (let i = 0; i < size; i++) { const id = `prompt-${i}`; candidates.push({ id, max_tokens: 3072 }); if (i % 10 === 9) continue;
  const p = random(); const n = 8 * (1 + Math.floor(random() * 6)); let k = 0; for (let j = 0; j < n; j++) if (random() < p) k++;
  states.push({ id, group: null, successes: k, failures: n - k, lastStep: Math.floor(random()*20), rollouts: n, rewardSum: k, correctCount: k, correctTokens: k * 400, wrongCount: n - k, wrongTokens: (n - k) * 700 }); }
const snap = snapshotOf(states, 20); const reg = createRegistries();
const ts = [];
for (let r = 0; r < (size > 50000 ? 12 : 60); r++) { const c0 = process.cpuUsage(); const t = performance.now(); planStep(snap, candidates, { rollouts: 8 * size }, {}, reg); ts.push([performance.now() - t, (process.cpuUsage(c0).user)/1000]); }
if (globalThis.__acc) console.log(Object.fromEntries(Object.entries(globalThis.__acc).map(([k,v])=>[k,(v/ts.length).toFixed(1)])));
ts.sort((a,b)=>a[0]-b[0]); console.log('median wall', ts[ts.length>>1][0].toFixed(1), 'cpu', ts[ts.length>>1][1].toFixed(1), 'min wall', ts[0][0].toFixed(1));
