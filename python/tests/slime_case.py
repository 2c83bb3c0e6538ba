"""What the slime rollout tests share (test_slime, test_slime_rounds, test_slime_checkpoint,
test_slime_samples): the prompts' labels and true pass rates, a client that records what it
forwards, and the base case that runs slime's rollout manager on our rollout function against its
own real service."""

from . import slime_sim, slime_upstream, support
from rollout_budget import HttpClient
from rollout_budget.config import Settings

LABELS = ["p%02d" % i for i in range(12)]
RATES = [0.02, 0.05, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 0.97]


class RecordingClient:
    """Forwards every call to the real client unchanged; records the plans, what each plan was
    asked (`asked`: the candidates and keywords) and the observes (`observed`: each one's results)."""

    def __init__(self, client):
        self.client = client
        self.plans = []
        self.asked = []
        self.observed = []

    def plan(self, prompts, **kwargs):
        self.asked.append(dict(kwargs, prompts=[dict(p) for p in prompts]))
        self.plans.append(self.client.plan(prompts, **kwargs))
        return self.plans[-1]

    def observe(self, results):
        self.observed.append(list(results))
        return self.client.observe(results)


class _RolloutCase(support.ServiceCase):
    """slime's rollout manager on our rollout function, against its own real service."""

    def setUp(self):
        self.ns = slime_upstream.load()
        self.http = HttpClient(self.url)
        self.client = RecordingClient(self.http)
        slime_sim.CLIENT = self.client
        slime_sim.SETTINGS = Settings(options={"min_n": 2, "max_n": 12, "seed": 4})
        slime_sim.PASS.clear()
        slime_sim.PASS.update(dict(zip(LABELS, RATES)))
        slime_sim.CALLS.clear()
        slime_sim.INDICES.clear()

    def tearDown(self):
        slime_sim.CLIENT = slime_sim.SETTINGS = None
        self.http.close()
