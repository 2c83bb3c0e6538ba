const mods = process.argv.slice(2);
const t0 = performance.now();
let t = t0;
for (const m of mods) { await import(m); const n = performance.now(); console.log(m, (n - t).toFixed(1)); t = n; }
console.log('total', (t - t0).toFixed(1));
