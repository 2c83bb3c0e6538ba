#!/usr/bin/env node
// Thin launcher: the CLI lives in the compiled library (npm run build).
import { runCli } from '../dist/src/cli/main.js';

process.exitCode = await runCli(process.argv.slice(2));
