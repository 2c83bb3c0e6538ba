import { Option, type Command } from 'commander';
import { gradeBatchOutput, gradeSummaryLine } from '../executor/grade.js';
import { DEFAULT_VERIFIER_TIMEOUT_S } from '../executor/verify/command.js';
import { verifierFrom } from '../executor/verify/verifiers.js';
import { describe } from './catalog.js';
import { checkOutput, readInput, writeOutput, type CliIo } from './io.js';
import { promptFieldOption, verifierOption } from './options.js';
import { numberArg } from './parse.js';
import { readPlanInputs } from './plan-inputs.js';

/** Registers `grade`: results JSONL from a `vllm run-batch` output file (issue 11). */
export function registerGradeCommand(program: Command, io: CliIo): void {
  program
    .command('grade')
    .description(describe('grade'))
    .requiredOption('--batch-output <path|->', 'the output file of `vllm run-batch -i <plan --format vllm-batch>`')
    .requiredOption('--plan <path>', 'the plan JSON the batch was exported from (groups, seeds, first_rollout)')
    .requiredOption('--prompts <path>', 'prompts JSONL: ground_truth for --verifier math')
    .addOption(verifierOption())
    .addOption(new Option('--verifier-timeout <s>', 'wall-clock limit of one command: verifier batch').default(DEFAULT_VERIFIER_TIMEOUT_S).argParser(numberArg(0.001, 86_400)))
    .addOption(promptFieldOption('prompts field that held the text (sent to a command: verifier)'))
    .option('--out <path|->', 'results JSONL, as `observe` takes it', '-')
    .action(async (opts) => {
      checkOutput(opts.out, { '--batch-output': opts.batchOutput, '--plan': opts.plan, '--prompts': opts.prompts }); // before the grading, which a command: verifier may make long
      // The verifier before the plan, the prompts and the batch are read (an unknown one was named after 10⁶ prompts: 3.5 s).
      const verifier = verifierFrom(opts.verifier, undefined, { timeoutMs: opts.verifierTimeout * 1000 });
      const { plan, prompts, origin } = await readPlanInputs(io, opts.plan, opts.prompts);
      const batch = await readInput(io, opts.batchOutput);
      const report = await gradeBatchOutput(batch.text, batch.name, plan, prompts, {
        verifier,
        promptField: opts.promptField,
        origin,
      });
      writeOutput(io, opts.out, report.results.map((r) => `${JSON.stringify(r)}\n`).join(''));
      io.stderr(`${gradeSummaryLine(report.summary)}\n`);
    });
}
