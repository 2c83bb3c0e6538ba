"""What the verl step tests share (test_verl_e2e, test_verl_rounds, test_verl_reward_model,
test_verl_batch_shape): the 12 prompts and their true pass rates, an adapter whose plan requests
are recorded, and a step's batch read back: its rows and its rollout_budget/* figures."""

PROMPTS = [{"text": "problem %d" % i, "index": i, "data_source": "math"} for i in range(12)]
# True pass rates by prompt id ("math/<index>"): from nearly never to nearly always solved.
PASS = {"math/%d" % i: p for i, p in enumerate([0.02, 0.05, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 0.97])}


class RequestRecorder:
    """Forwards to the adapter's client and records each plan request (candidates and options)."""

    def __init__(self, client):
        self.client = client
        self.requests = []

    def plan(self, candidates, **options):
        self.requests.append({"candidates": [dict(c) for c in candidates], **options})
        return self.client.plan(candidates, **options)

    def observe(self, results):
        return self.client.observe(results)

    def close(self):
        self.client.close()


def recorded(trainer):
    """The trainer's adapter (built as the patched fit's first call builds it), its client recorded."""
    from rollout_budget import verl as rollout_budget_verl

    adapter = rollout_budget_verl.adapter_for(trainer)
    adapter.client = RequestRecorder(adapter.client)
    return adapter


def check_metrics(case, metrics, out, candidates, rounds):
    """fit's rollout_budget/* metrics of a step against its batch, counted here from the rewards
    and uids verl trains on (one group a uid)."""
    groups = {}
    for row in rows_of(out):
        groups.setdefault(row["uid"], []).append(row["reward"])
    varied = [g for g in groups.values() if max(g) != min(g)]
    flat = [g for g in groups.values() if max(g) == min(g)]
    sizes = [len(g) for g in groups.values()]
    m = {k[len("rollout_budget/"):]: v for k, v in metrics.items() if k.startswith("rollout_budget/")}
    case.assertEqual(sorted(m), sorted(["candidates", "prompts", "rollouts", "aborted", "rounds", "n_min", "n_mean", "n_max",
                                        "informative_groups", "informative_group_ratio", "effective_ratio", "all_correct_ratio",
                                        "all_wrong_ratio", "applied", "duplicates", "plan_s", "observe_s"]))
    case.assertEqual({k: m[k] for k in ("candidates", "prompts", "rollouts", "aborted", "rounds", "applied", "duplicates")},
                     {"candidates": candidates, "prompts": len(groups), "rollouts": len(out), "aborted": 0, "rounds": rounds,
                      "applied": len(out), "duplicates": 0})
    case.assertEqual((m["n_min"], m["n_max"]), (min(sizes), max(sizes)))
    case.assertAlmostEqual(m["n_mean"], len(out) / len(groups), places=12)
    case.assertEqual(m["informative_groups"], len(varied))
    case.assertAlmostEqual(m["informative_group_ratio"], len(varied) / len(groups), places=12)
    case.assertAlmostEqual(m["effective_ratio"], sum(len(g) for g in varied) / len(out), places=12)
    case.assertAlmostEqual(m["all_correct_ratio"], sum(1 for g in flat if g[0] >= 0.5) / len(groups), places=12)
    case.assertAlmostEqual(m["all_wrong_ratio"], sum(1 for g in flat if g[0] < 0.5) / len(groups), places=12)
    case.assertGreater(m["plan_s"], 0)
    case.assertGreater(m["observe_s"], 0)
    return m


def rows_of(out):
    """(rollout ids row, reward) of each row of a step's batch, with its uid."""
    rewards = out.batch["token_level_scores"].sum(-1).tolist()
    return [dict(info["rollout_budget"], reward=r, uid=u)
            for info, r, u in zip(out.non_tensor_batch["extra_info"], rewards, out.non_tensor_batch["uid"])]
