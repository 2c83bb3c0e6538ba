#!/usr/bin/env bash
# Applies each of issue 13's four small realistic bugs to the source, one at a time, runs the
# test that must catch it, and restores the file. Prints "caught" or "SURVIVED" per mutation;
# exits 1 if any survived. Run from the repository root: bash scripts/mutations.sh
set -euo pipefail
cd "$(dirname "$0")/.."
survived=0
backup=$(mktemp)
restore() { if [ -n "${file:-}" ]; then cp "$backup" "$file"; fi; }
trap restore EXIT
mutate() { # file, from, to, test file
  file=$1
  cp "$file" "$backup"
  node -e '
    const fs = require("fs");
    const [file, from, to] = process.argv.slice(1);
    const text = fs.readFileSync(file, "utf8");
    if (text.split(from).length !== 2) { console.error(`${file}: "${from}" must occur once`); process.exit(2); }
    fs.writeFileSync(file, text.replace(from, to));
  ' "$file" "$2" "$3"
  if npx vitest run "$4" >/dev/null 2>&1; then
    echo "SURVIVED  $file: $2  ->  $3"
    survived=1
  else
    echo "caught    $file: $2  ->  $3"
  fi
  cp "$backup" "$file"
  file=
}
mutate src/posterior/prior.ts 'const trueVar = spread - stats.sumNoise / stats.count;' 'const trueVar = spread;' test/hand-checks.test.ts
mutate src/replay/metrics.ts 'brier = b / this.pred.length;' 'brier = b / (this.pred.length - 1);' test/hand-checks.test.ts
mutate src/store/accumulate.ts 'if (reward >= 0.5) {' 'if (reward > 0.5) {' test/hand-checks.test.ts
mutate src/replay/metrics.ts 'if (rate <= HARD &&' 'if (rate < HARD &&' test/hand-checks.test.ts
rm -f "$backup"
exit $survived
