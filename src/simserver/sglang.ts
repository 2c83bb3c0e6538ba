/**
 * TEST DOUBLE — SGLang's native `POST /generate`, batch form, as the sim-server's `sglang`
 * profile answers it (non-streaming). Rules reproduced from sglang/srt/managers/io_struct.py
 * `GenerateReqInput` and sglang/srt/sampling/sampling_params.py:
 * - `text` is a string or a list (one entry per sample of the batch);
 * - `sampling_params` is one object for all, or a list with one per entry; every entry's `n`
 *   must be the same ("The parallel_sample_num should be the same for all samples in sample
 *   params.", a 400);
 * - `max_new_tokens` defaults to 128; `sampling_seed` seeds the entry (every one of its n samples
 *   alike);
 * - the answer is a list with one object per entry and sample:
 *   `{text, output_ids, meta_info: {id, finish_reason: {type}, completion_tokens}}`.
 */
import { tokenId, tooManyChoices, SIM_MAX_N } from './model.js';

export interface NativeChoice {
  readonly tokens: readonly string[];
  readonly finish: string;
}

/** What the server answers: a status and a JSON value. */
export interface NativeAnswer {
  readonly status: number;
  readonly body: unknown;
}

const SAME_N = 'The parallel_sample_num should be the same for all samples in sample params.';

function bad(message: string): NativeAnswer {
  return { status: 400, body: { error: { message } } };
}

/**
 * Answers one `/generate` body. `respond(text, seed, maxNewTokens)` draws one sample (the
 * server's model); `seed` is undefined when the entry gives no `sampling_seed`.
 */
export function answerGenerate(body: Record<string, unknown>, respond: (text: string, seed: number | undefined, maxNewTokens: number) => NativeChoice): NativeAnswer {
  const texts = typeof body.text === 'string' ? [body.text] : body.text;
  if (!Array.isArray(texts) || texts.length === 0 || texts.some((t) => typeof t !== 'string')) return bad('"text" must be a string or a non-empty list of strings');
  const raw = body.sampling_params ?? {};
  const list = Array.isArray(raw) ? raw : texts.map(() => raw);
  if (list.length !== texts.length) return bad(`"sampling_params" has ${list.length} entries for ${texts.length} texts`);
  const params = list as Record<string, unknown>[];
  const n = params[0]?.n ?? 1;
  if (params.some((p) => (p?.n ?? 1) !== n)) return bad(SAME_N);
  if (typeof n !== 'number' || !Number.isInteger(n) || n < 1) return bad(`"n" must be a positive integer, got ${JSON.stringify(n)}`);
  if (n * texts.length > SIM_MAX_N) return bad(tooManyChoices(n, texts.length));
  const rids = Array.isArray(body.rid) ? (body.rid as unknown[]) : texts.map((_, i) => `sim-${i}`);
  const out: unknown[] = [];
  texts.forEach((text, i) => {
    const p = params[i]!;
    const max = p.max_new_tokens ?? 128;
    if (typeof max !== 'number' || !Number.isInteger(max) || max < 0) {
      out.push({ error: `max_new_tokens must be at least 0, got ${JSON.stringify(max)}` });
      return;
    }
    const seed = typeof p.sampling_seed === 'number' ? p.sampling_seed : undefined;
    for (let k = 0; k < (n as number); k++) {
      const c = respond(text as string, seed, max);
      out.push({
        text: c.tokens.join(''),
        output_ids: c.tokens.map(tokenId),
        meta_info: { id: String(rids[i] ?? `sim-${i}`), finish_reason: { type: c.finish }, completion_tokens: c.tokens.length },
      });
    }
  });
  return { status: 200, body: out.length === 1 ? out[0] : out };
}
