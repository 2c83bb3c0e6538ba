import { Command } from 'commander';
import { describe, expect, it } from 'vitest';
import { flagOfField, planOptionsFrom } from '../src/cli/options.js';
import { registerStateCommands } from '../src/cli/state.js';
import type { CliIo } from '../src/cli/io.js';
import { resolvePlanOptions } from '../src/plan/options.js';
import { planRequestOf } from '../src/service/requests.js';
import { thrown } from './helpers.js';

/**
 * The plan options' one table (src/option-fields.ts) read by the service's fields, the
 * CLI's flags and the flags' names in errors: every option given once each way must land at the
 * library key written out by hand below, not one the table derives.
 */
const fields = {
  min_n: 3, max_n: 40, skip: true, policy: 'thompson', value: 'hit', seed: 7, step: 12, prefill_weight: 0.5,
  decay: 0.9, reobserve_discount: 0.8, multiple_of: 4, rounds_left: 2, fresh_share: 0.3, fresh_cap: 2,
};
const library = {
  minN: 3, maxN: 40, skip: true, policy: 'thompson', value: 'hit', seed: 7, step: 12, prefillWeight: 0.5,
  decay: { forgetPerStep: 0.9, reobserveDiscount: 0.8 }, multipleOf: 4, roundsLeft: 2, freshShare: 0.3, freshCap: 2,
};

describe('plan options: one table for the service, the CLI and its errors', () => {
  it('a service request takes every option field, each at its library key', () => {
    const request = planRequestOf(JSON.stringify({ candidates: [{ id: 'a' }], budget: { rollouts: 8 }, options: fields }));
    expect(request.options).toEqual(library);
  });

  it("plan's flags, named as errors name them, give the same options", () => {
    const program = new Command().exitOverride();
    registerStateCommands(program, {} as CliIo);
    const plan = program.commands.find((c) => c.name() === 'plan')!;
    const argv = ['--prompts', 'p.jsonl'];
    for (const [field, value] of Object.entries(fields)) {
      const flag = flagOfField[field];
      expect(flag, field).toBeDefined();
      argv.push(...(value === true ? [flag!] : [flag!, String(value)]));
    }
    const { unknown } = plan.parseOptions(argv);
    expect(unknown).toEqual([]);
    expect(planOptionsFrom(plan.opts())).toEqual(library);
  });

  it('a type the field does not take is a 400 naming it', () => {
    const message = (options: object) => thrown(() => planRequestOf(JSON.stringify({ candidates: [{ id: 'a' }], budget: { rollouts: 8 }, options }))).message;
    expect(message({ skip: 'yes' })).toBe('body.options.skip: must be true or false, got "yes"');
    expect(message({ reobserve_discount: '0.9' })).toBe('body.options.reobserve_discount: must be a finite number, got "0.9"');
    expect(message({ multiple_of: 0 })).toBe('body.options.multiple_of: must be an integer ≥ 1, got 0');
    expect(message({ policy: '' })).toBe('body.options.policy: must be a non-empty string, got ""');
  });

  it('min_n above the limit is named as such by the library too, not as a max_n to give', () => {
    // It read "min_n 5000 is above max_n's default of 64: give max_n too", and a max_n of 5000
    // then met the limit's error.
    expect(thrown(() => resolvePlanOptions({ minN: 5000 })).message).toBe('min_n must be at most 4096 (the most rollouts one prompt can get in a plan), got 5000');
    expect(thrown(() => planRequestOf(JSON.stringify({ candidates: [{ id: 'a' }], budget: { rollouts: 8 }, options: { min_n: 5000 } }))).message)
      .toBe('body.options.min_n: must be at most 4096 (the most rollouts one prompt can get in a plan), got 5000');
  });
});
