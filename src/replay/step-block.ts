import type { PackedRollouts } from './packed-run.js';

/**
 * One logged step's groups and rollouts as bytes in a replay's scratch file, so a step is read
 * back without parsing its lines again. Sections, each padded to 8 bytes: rewards (doubles, or
 * a byte each while every reward of the step is 0 or 1), token counts (none when the step has
 * none; int32, -1 for an unknown count, or doubles past 2³¹ − 1), each group's prompt number
 * and size (int32). Groups first seen first, each group's rollouts in log order.
 */
export interface StepShape {
  readonly groups: number;
  readonly rollouts: number;
  /** A reward other than 0 or 1: rewards are doubles. */
  readonly fractional: boolean;
  /** How token counts are held. */
  readonly tokens: 'none' | 'int32' | 'double';
}

const pad = (bytes: number) => Math.ceil(bytes / 8) * 8;

function sections(s: StepShape): { rewards: number; tokens: number; prompts: number; sizes: number; end: number } {
  const rewards = 0;
  const tokens = rewards + pad(s.rollouts * (s.fractional ? 8 : 1));
  const prompts = tokens + pad(s.tokens === 'none' ? 0 : s.rollouts * (s.tokens === 'int32' ? 4 : 8));
  const sizes = prompts + pad(4 * s.groups);
  return { rewards, tokens, prompts, sizes, end: sizes + pad(4 * s.groups) };
}

/**
 * A step's groups as a block (see StepShape): per group its prompt number and size, and the
 * step's rollouts ordered by group, held as `rollouts` holds them. O(rollouts).
 */
export function encodeStep(prompts: Int32Array, sizes: Int32Array, rollouts: PackedRollouts): { shape: StepShape; bytes: Uint8Array } {
  const { rewards, tokens } = rollouts;
  const shape: StepShape = {
    groups: prompts.length,
    rollouts: rewards.length,
    fractional: rewards instanceof Float64Array,
    tokens: tokens === undefined ? 'none' : tokens instanceof Int32Array ? 'int32' : 'double',
  };
  const at = sections(shape);
  const bytes = new Uint8Array(at.end);
  const view = (a: ArrayBufferView) => new Uint8Array(a.buffer, a.byteOffset, a.byteLength);
  bytes.set(view(rewards), at.rewards);
  if (tokens !== undefined) bytes.set(view(tokens), at.tokens);
  bytes.set(view(prompts), at.prompts);
  bytes.set(view(sizes), at.sizes);
  return { shape, bytes };
}

/** The bytes a block of this shape takes. */
export function blockBytes(shape: StepShape): number {
  return sections(shape).end;
}

/** A block read back: views into `buffer` (8-byte aligned, blockBytes(shape) long). */
export function decodeStep(buffer: ArrayBuffer, shape: StepShape): { prompts: Int32Array; sizes: Int32Array; rollouts: PackedRollouts } {
  const at = sections(shape);
  const total = shape.rollouts;
  return {
    prompts: new Int32Array(buffer, at.prompts, shape.groups),
    sizes: new Int32Array(buffer, at.sizes, shape.groups),
    rollouts: {
      rewards: shape.fractional ? new Float64Array(buffer, at.rewards, total) : new Uint8Array(buffer, at.rewards, total),
      tokens: shape.tokens === 'none' ? undefined : shape.tokens === 'int32' ? new Int32Array(buffer, at.tokens, total) : new Float64Array(buffer, at.tokens, total),
    },
  };
}
