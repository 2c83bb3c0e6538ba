"""run_rounds: one step in rounds around a generate function, against a real service.

The service applies its own round rule (`rounds_left`, issue 9); `RecordingClient` forwards
every call to it unchanged and records what run_rounds sent, so the tests check both the
bookkeeping and what the real service planned.
"""

import random
import unittest

from . import support
import rollout_budget as rb

PROMPTS = [{"id": "p%d" % i, "max_tokens": 256, "group": "g%d" % (i % 2)} for i in range(6)]
PASS = {"p0": 0.05, "p1": 0.5, "p2": 0.9, "p3": 0.2, "p4": 0.7, "p5": 0.35}


def simulated_generate(rows):
    """A model stand-in: rollout k of a prompt passes with the prompt's rate, drawn from its seed."""
    out = []
    for row in rows:
        rng = random.Random(row["seed"])
        out.append({"reward": 1 if rng.random() < PASS[row["prompt_id"]] else 0, "tokens": 50 + rng.randrange(100), "finish_reason": "stop"})
    return out


def aborting_first_round():
    """simulated_generate, but every other rollout of the first round is aborted."""
    calls = {"n": 0}

    def generate(rows):
        calls["n"] += 1
        out = simulated_generate(rows)
        if calls["n"] == 1:
            out = [dict(o, finish_reason="abort") if i % 2 == 0 else o for i, o in enumerate(out)]
        return out

    return generate


class RecordingClient:
    """Forwards every call to the real client unchanged and records what run_rounds sent."""

    def __init__(self, client):
        self.client = client
        self.calls = []

    def plan(self, prompts, budget_rollouts=None, budget_tokens=None, rounds_left=None, **options):
        self.calls.append({"prompts": [dict(p) for p in prompts], "budget_rollouts": budget_rollouts, "budget_tokens": budget_tokens, "rounds_left": rounds_left, "options": dict(options)})
        return self.client.plan(prompts, budget_rollouts=budget_rollouts, budget_tokens=budget_tokens, rounds_left=rounds_left, **options)

    def observe(self, results):
        self.calls.append({"observe": len(results)})
        return self.client.observe(results)


class RunRoundsBookkeepingTest(support.ServiceCase):
    def test_two_rounds_share_the_budget_top_up_groups_and_observe_once(self):
        with rb.HttpClient(self.url) as client:
            wrapper = RecordingClient(client)
            # fresh_share=0: the even rule (the share for prompts new to the state is tested below).
            done = rb.run_rounds(wrapper, PROMPTS, simulated_generate, budget_rollouts=40, rounds=2, multiple_of=4, seed=3, fresh_share=0)
            first, second, observe = wrapper.calls
            self.assertEqual((first["budget_rollouts"], first["rounds_left"]), (40, 2))
            spent1 = sum(a["n"] for a in done.plans[0]["allocations"])
            self.assertEqual(spent1, 20)
            self.assertEqual((second["budget_rollouts"], second["rounds_left"]), (40 - spent1, 1))
            self.assertEqual(second["options"]["step"], done.plans[0]["step"])
            self.assertEqual(first["options"]["multiple_of"], 4)
            # Round 2 carries each prompt's round-1 rewards; its new rollouts continue the groups.
            partial = {p["id"]: p.get("partial_rewards") for p in second["prompts"]}
            for a in done.plans[0]["allocations"]:
                self.assertEqual(len(partial[a["prompt_id"]]), a["n"])
            for a in done.plans[1]["allocations"]:
                self.assertEqual(a.get("first_rollout"), len(partial.get(a["prompt_id"]) or []) or None)
            ids = [r["rollout_id"] for r in done.results]
            self.assertEqual(len(ids), len(set(ids)), "no rollout id repeats across rounds")
            self.assertEqual(observe["observe"], len(done.results))
            self.assertEqual(done.summary["applied"], len(done.results))
            self.assertEqual(len(done.results) % 4, 0)
            self.assertTrue(all(r["group"] == "g%d" % (int(r["prompt_id"][1]) % 2) for r in done.results))
            for pid in PASS:
                view = client.prompt(pid)
                self.assertEqual(view["rollouts"], sum(1 for r in done.results if r["prompt_id"] == pid))


class RunRoundsFreshShareTest(support.ServiceCase):
    """Issue 14: a round whose prompts are new to the service's state takes more than half."""

    def test_new_prompts_take_more_than_an_even_share_first(self):
        with rb.HttpClient(self.url) as client:
            done = rb.run_rounds(client, PROMPTS, simulated_generate, budget_rollouts=40, rounds=2, seed=3)
            # Six prompts new to the state: an even 20 plus 0.7 of the other 20.
            self.assertEqual(done.plans[0]["budget"]["rollouts"], 34)
            self.assertLessEqual(len(done.results), 40)
            # The same prompts at the next step are not new: an even share.
            again = rb.run_rounds(client, PROMPTS, simulated_generate, budget_rollouts=40, rounds=2, seed=3)
            self.assertEqual(again.plans[0]["budget"]["rollouts"], 20)


class RunRoundsAgainstServiceTest(support.ServiceCase):
    """End to end with the service's own `rounds_left` (issue 9)."""

    def test_rounds_left_on_the_service(self):
        with rb.HttpClient(self.url) as client:
            done = rb.run_rounds(client, PROMPTS, simulated_generate, budget_rollouts=40, rounds=2, seed=3)
            self.assertEqual(len(done.plans), 2)
            total = len(done.results)
            self.assertLessEqual(total, 40)
            first = sum(a["n"] for a in done.plans[0]["allocations"])
            self.assertLess(first, 40, "the first round takes a share, not the whole budget")
            self.assertEqual(done.summary["applied"], total)
            ids = [r["rollout_id"] for r in done.results]
            self.assertEqual(len(ids), len(set(ids)))

    def test_aborted_rollouts_are_not_charged_to_the_step(self):
        """As the library's round loop: an aborted rollout is resumed at a later step, so the
        next round still has its budget (src/plan/round-loop.ts)."""

        with rb.HttpClient(self.url) as client:
            wrapper = RecordingClient(client)
            generate = aborting_first_round()

            done = rb.run_rounds(wrapper, PROMPTS, generate, budget_rollouts=40, rounds=2, seed=5)
            first = sum(a["n"] for a in done.plans[0]["allocations"])
            aborted = sum(1 for r in done.results[:first] if r.get("finish_reason") == "abort")
            self.assertGreater(aborted, 0)
            self.assertEqual(wrapper.calls[1]["budget_rollouts"], 40 - (first - aborted))
            self.assertEqual(done.summary["aborted"], aborted)

    def test_aborted_rollouts_tokens_are_charged_to_a_token_budget(self):
        """An aborted rollout's reported tokens were generated: the token budget left to the next
        round is less by them, as the library's round loop charges a round every token it
        generated (RoundOutcome, src/plan/round-loop.ts); before, only finished rollouts'."""

        with rb.HttpClient(self.url) as client:
            wrapper = RecordingClient(client)
            generate = aborting_first_round()

            done = rb.run_rounds(wrapper, PROMPTS, generate, budget_tokens=20000, rounds=2, seed=5)
            first = sum(a["n"] for a in done.plans[0]["allocations"])
            self.assertGreater(first, 0)
            generated = sum(r["tokens"] for r in done.results[:first])
            self.assertTrue(any(r.get("finish_reason") == "abort" for r in done.results[:first]))
            self.assertEqual(wrapper.calls[1]["budget_tokens"], 20000 - generated)


class RunRoundsAbortedIdsTest(support.ServiceCase):
    def test_a_round_after_aborted_rollouts_never_repeats_an_id_or_a_seed(self):
        """The next round's first_rollout counts the rewards so far, which aborted rollouts do
        not give: it started at an index round 1 had launched, so a rollout id and seed came
        twice and observe dropped a real result as a duplicate (found by an own-loop user)."""

        with rb.HttpClient(self.url) as client:
            launched = []

            def generate(rows):
                launched.extend((r["rollout_id"], r["seed"]) for r in rows)
                out = simulated_generate(rows)
                if len(launched) == len(rows):  # the first round: its last rollout of each prompt aborted
                    last = {r["prompt_id"]: k for k, r in enumerate(rows)}
                    out = [dict(o, finish_reason="abort") if k in last.values() else o for k, o in enumerate(out)]
                return out

            done = rb.run_rounds(client, PROMPTS, generate, budget_rollouts=48, rounds=2, seed=3)
            self.assertEqual(len(done.plans), 2)
            self.assertGreater(sum(a["n"] for a in done.plans[1]["allocations"]), 0)
            self.assertEqual(len({i for i, _ in launched}), len(launched))
            self.assertEqual(len({s for _, s in launched}), len(launched))
            self.assertEqual(done.summary["duplicates"], 0)
            self.assertEqual(done.summary["applied"], len(launched) - len(PROMPTS))


class WarningsTest(support.ServiceCase):
    def test_the_plans_warnings_are_logged_as_the_cli_prints_them(self):
        """A trainer's integration dropped them; the CLI prints them on stderr. Here the budget
        is not a multiple of multiple_of, a mistake a run would otherwise repeat silently."""
        with rb.HttpClient(self.url) as client, self.assertLogs("rollout_budget", level="WARNING") as logs:
            done = rb.run_rounds(client, PROMPTS, simulated_generate, budget_rollouts=42, rounds=1, multiple_of=4, seed=3)
        self.assertIn("budget_rollouts 42 is not a multiple of multiple_of 4: at most 40 are planned", done.plans[0]["warnings"])
        self.assertIn("WARNING:rollout_budget:rollout-budget: step %d plan: budget_rollouts 42 is not a multiple of "
                      "multiple_of 4: at most 40 are planned" % done.plans[0]["step"], logs.output)


class StepTotalEachTest(support.ServiceCase):
    def test_every_round_a_multiple_of_each_and_the_step_a_multiple_of_k(self):
        # verl: each generation call is chunked over the agent-loop workers (each), the step's
        # batch over every worker (k). Before, rounds before the last were planned freely.
        from rollout_budget.rounds import StepTotal

        steps = 0
        for seed in range(1, 6):
            with rb.HttpClient(self.url) as client:
                wrapper = RecordingClient(client)
                done = rb.run_rounds(StepTotal(wrapper, 10, 40, each=2), PROMPTS, simulated_generate, budget_rollouts=40, rounds=2,
                                     seed=seed, step=seed)
            sizes = [p["totals"]["rollouts"] for p in done.plans]
            self.assertTrue(all(n % 2 == 0 for n in sizes), (seed, sizes))
            self.assertEqual(len(done.results) % 10, 0, (seed, sizes))
            asked = [c["options"].get("multiple_of") for c in wrapper.calls if "options" in c]
            self.assertEqual(asked[0], 2, seed)
            self.assertTrue(set(asked) <= {2, 10}, (seed, asked))
            steps += sizes[0] % 10 != 0  # the last round had to bring the total to a multiple
        self.assertGreater(steps, 0)
        with self.assertRaisesRegex(ValueError, "each round's multiple 4 does not divide the step's multiple 10"):
            StepTotal(None, 10, 40, each=4)


if __name__ == "__main__":
    unittest.main()


class RunRoundsErrorTest(support.ServiceCase):
    """An error after a round was generated lost the step: the exception now carries what was
    generated (rounds_result), which observes once the cause is fixed."""

    def test_a_reward_refused_in_round_two_keeps_round_one_and_it_observes_after(self):
        def generate(rows):
            out = simulated_generate(rows)
            if generate.calls:  # round 2: a reward outside [0, 1]
                out[0] = dict(out[0], reward=-1)
            generate.calls += 1
            return out

        generate.calls = 0
        with rb.HttpClient(self.url) as client:
            with self.assertRaisesRegex(ValueError, r"must be a number in \[0, 1\], got -1") as caught:
                rb.run_rounds(client, PROMPTS, generate, budget_rollouts=48, rounds=2, min_n=2, step=40)
            done = caught.exception.rounds_result
            self.assertIsNone(done.summary)
            self.assertEqual(len(done.plans), 2)
            round1 = [a["n"] for a in done.plans[0]["allocations"]]
            self.assertEqual(len(done.results), sum(round1))
            self.assertTrue(all(r["rollout_id"].startswith("40/") for r in done.results))
            self.assertEqual(client.prompt("p1")["rollouts"], 0, "nothing observed by the failed step")
            summary = client.observe(done.results)
            self.assertEqual(summary["applied"], sum(round1))

    def test_shaped_rewards_with_pass_threshold_observe_as_passes_and_fails(self):
        # DAPO's ±1 (or OpenRLHF's penalties below 0) were refused by run_rounds, which had no
        # pass_threshold as the verl and slime integrations do.
        def generate(rows):
            return [dict(o, reward=1.0 if o["reward"] else -1.0) for o in simulated_generate(rows)]

        with rb.HttpClient(self.url) as client:
            before = sum(client.prompt(p["id"])["reward_sum"] for p in PROMPTS)  # the class's tests share a state
            done = rb.run_rounds(client, PROMPTS, generate, budget_rollouts=24, rounds=2, min_n=2, step=50, pass_threshold=0)
            passes = [r["reward"] for r in done.results]
            self.assertEqual(set(passes) | {0.0, 1.0}, {0.0, 1.0})
            expected = [1.0 if o["reward"] else 0.0 for o in simulated_generate(rb.expand_plan(done.plans[0], PROMPTS))]
            self.assertEqual(passes[:len(expected)], expected, "round 1's results are the simulated passes, in order")
            self.assertEqual(done.summary["applied"], len(done.results))
            self.assertIn(1.0, passes)
            self.assertIn(0.0, passes)
            self.assertEqual(sum(client.prompt(p["id"])["reward_sum"] for p in PROMPTS) - before, sum(passes))

    def test_an_observe_that_fails_keeps_every_round(self):
        class FailingObserve:
            def __init__(self, client):
                self.client = client

            def plan(self, *args, **kwargs):
                return self.client.plan(*args, **kwargs)

            def observe(self, results, **options):
                raise ConnectionRefusedError("the service went away")

        with rb.HttpClient(self.url) as client:
            with self.assertRaises(ConnectionRefusedError) as caught:
                rb.run_rounds(FailingObserve(client), PROMPTS, simulated_generate, budget_rollouts=48, rounds=2, min_n=2, step=41)
            done = caught.exception.rounds_result
            self.assertEqual(len(done.results), 48)
            self.assertEqual(client.observe(done.results)["applied"], 48)


class RefillAbortedTest(support.ServiceCase):
    def test_what_aborted_rollouts_left_is_planned_again_and_ids_do_not_repeat(self):
        calls = {"n": 0}

        def generate(rows):
            calls["n"] += 1
            out = simulated_generate(rows)
            if calls["n"] == 1:  # the step's first two rollouts abort
                out[0] = dict(out[0], finish_reason="abort")
                out[1] = dict(out[1], finish_reason="abort")
            return out

        with rb.HttpClient(self.url) as client:
            done = rb.run_rounds(client, PROMPTS, generate, budget_rollouts=24, rounds=1, refill_aborted=2, min_n=2, step=5)
            self.assertEqual(len(done.plans), 2)
            self.assertEqual(done.plans[1]["budget"]["rollouts"], 2)
            finished = [r for r in done.results if r.get("finish_reason") != "abort"]
            self.assertEqual((len(finished), len(done.results)), (24, 26))
            ids = [r["rollout_id"] for r in done.results]
            self.assertEqual(len(set(ids)), len(ids))
            self.assertEqual(done.summary["aborted"], 2)
            # Without it (the default), the two stay unspent: APRIL's over-provisioning.
            calls["n"] = 0
            kept = rb.run_rounds(client, PROMPTS, generate, budget_rollouts=24, rounds=1, min_n=2, step=6)
            self.assertEqual(len(kept.plans), 1)
            self.assertEqual(sum(1 for r in kept.results if r.get("finish_reason") != "abort"), 22)
            with self.assertRaisesRegex(ValueError, "refill_aborted must be an integer ≥ 0, got -1"):
                rb.run_rounds(client, PROMPTS, generate, budget_rollouts=24, refill_aborted=-1)

    def test_a_refill_that_new_prompts_cannot_pay_for_plans_with_skip_not_an_error(self):
        # Found in review: prompts whose every rollout aborted start again at min_n, and the
        # aborted rollouts' tokens were spent: the refill plan was BUDGET_INFEASIBLE after the
        # step was generated, and nothing was observed.
        prompts = [{"id": "t%d" % i, "max_tokens": 1000} for i in range(8)]

        def generate(rows):
            return [{"reward": 0, "tokens": 900, "finish_reason": "abort"} if r["prompt_id"] in ("t0", "t1", "t2", "t3")
                    else {"reward": 1, "tokens": 1000} for r in rows]

        with rb.HttpClient(self.url) as client:
            done = rb.run_rounds(client, prompts, generate, budget_rollouts=32, budget_tokens=32000, rounds=1,
                                 refill_aborted=3, step=9)
            self.assertIsNotNone(done.summary)
            self.assertEqual(done.summary["aborted"], 16)
            self.assertTrue(all(p["step"] == 9 for p in done.plans))
            self.assertGreater(len(done.plans), 1)
