"""The slime rollout function with a simulated model, loadable by slime's own load_function as
`--rollout-function-path tests.slime_sim.generate_rollout`.

`simulated_generate` stands in for slime's per-sample `generate_and_rm`
(slime/rollout/sglang_rollout.py): it fills each sample's response, response_length, tokens,
status (TRUNCATED when the response reaches max_tokens, else COMPLETED) and reward, one
sample at a time with the sample's own seed (metadata["rollout_budget"]["seed"]). The model:
rollout k of a prompt passes with the prompt's rate (PASS, keyed by the prompt's label). A row
for which ABORT (set by a test) is true comes back as SGLang's finish_reason abort leaves it in
slime (Sample.append_response_tokens: status ABORTED; generate_and_rm returns it before the
reward model, so its reward is None), with part of a response.
"""

import random

from rollout_budget.slime import INFO_KEY, make_rollout_function

PASS = {}
CALLS = []
#: The `index` of every sample generated, in order (aborted ones too).
INDICES = []
ABORT = None


async def simulated_generate(args, samples):
    from slime.utils.types import Sample

    for sample in samples:
        row = sample.metadata[INFO_KEY]
        CALLS.append(row["seed"])
        INDICES.append(sample.index)
        rng = random.Random(row["seed"])
        length = 5 + rng.randrange(args.rollout_max_response_len)
        cap = row["max_tokens"] if row["max_tokens"] is not None else args.rollout_max_response_len
        sample.response_length = min(length, cap)
        sample.response = "x" * sample.response_length
        sample.tokens = list(range(sample.response_length))
        if ABORT is not None and ABORT(row):
            sample.response_length = sample.response_length // 2
            sample.status = Sample.Status.ABORTED
            continue
        sample.status = Sample.Status.TRUNCATED if length >= cap else Sample.Status.COMPLETED
        sample.reward = 1.0 if rng.random() < PASS[sample.label] else 0.0
    return samples


#: Set by the tests (a client of the real service, and settings).
CLIENT = None
SETTINGS = None


def generate_rollout(args, rollout_id, data_source, evaluation=False):
    return make_rollout_function(generate=simulated_generate, client=CLIENT, settings=SETTINGS)(
        args, rollout_id, data_source, evaluation=evaluation)


async def fanout_generate(args, samples):
    """`simulated_generate`, then each rollout as a fan-out generate function returns it
    (slime's generate_and_rm returns ``Sample | list[Sample]``): sample index % 5 == 1 as
    slime/rollout/_fanout_test_helpers.py `compact_generate` does (deep copies of the generated
    sample, siblings sharing ``rollout_id``; here 3 of them), index % 5 == 2 as an agent adapter's
    `Trajectory.to_sample` (slime/agent/trajectory.py:234–262: a new Sample with the base's index,
    group_index and prompt, its metadata only the adapter's, no ``rollout_id`` set here) beside
    a second such sample, each with the rollout's reward; else the sample itself."""
    import copy

    from slime.utils.types import Sample

    out = []
    for sample in await simulated_generate(args, samples):
        if sample.status == Sample.Status.ABORTED or sample.index % 5 not in (1, 2):
            out.append(sample)
        elif sample.index % 5 == 1:
            siblings = [copy.deepcopy(sample) for _ in range(3)]
            for s in siblings:
                s.rollout_id = sample.index
            out.append(siblings)
        else:
            out.append([Sample(index=sample.index, group_index=sample.group_index, prompt=sample.prompt, label=sample.label,
                               tokens=list(sample.tokens[:k]), response_length=k, reward=sample.reward, status=Sample.Status.COMPLETED,
                               metadata={"turn": t}) for t, k in enumerate((sample.response_length // 2, sample.response_length))])
    return out


def generate_fanout_rollout(args, rollout_id, data_source, evaluation=False):
    return make_rollout_function(generate=fanout_generate, client=CLIENT, settings=SETTINGS)(
        args, rollout_id, data_source, evaluation=evaluation)
