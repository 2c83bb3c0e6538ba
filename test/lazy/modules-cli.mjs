// For test/cli-lazy.test.ts: the CLI from the compiled ES modules (dist/src), as bin/rollout-budget.js
// runs it when the one-file bundle is missing or older; the hooks see each module it loads.
import { runCli } from '../../dist/src/cli/main.js';

process.exitCode = await runCli(process.argv.slice(2));
