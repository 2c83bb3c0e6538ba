"""rollout_budget.slime's copies of the state beside slime's checkpoints (``--save``), against
slime's own code at 624b824 (tests/slime_upstream.py) and a real `rollout-budget serve`, and the
first rollout of a run resumed with ``--load``.
Needs torch and httpx (/usr/bin/python3 after .ci/setup-python.sh)."""

import os
import shlex
import unittest
from unittest import mock

from . import slime_sim, slime_upstream, support
from .slime_case import LABELS, RATES
from rollout_budget import HttpClient
from rollout_budget.config import Settings


class CheckpointCopyTest(unittest.TestCase):
    """The state copied beside slime's checkpoints (``--save``, ``--save-interval``) and the
    resumed run's first rollout (``--load``). slime's own save needs Megatron and Ray: the tests
    make the folder as `RolloutDataSource.save` does; what each copy holds is read with sqlite3."""

    def setUp(self):
        import rollout_budget.slime as ours

        self.ns = slime_upstream.load()
        # The copies run the CLI as a trainer's process finds it.
        environ = mock.patch.dict(os.environ, {"ROLLOUT_BUDGET_CLI": " ".join(shlex.quote(a) for a in support.COMMAND)})
        environ.start()
        self.addCleanup(environ.stop)
        self.dir = support.temp_folder(self)
        self.state = self.dir + "/state.db"  # a service of its own per test: its state holds this test's rollouts only
        proc, port = support.start_http(self.state)
        self.addCleanup(support.stop, proc)
        self.http = HttpClient("http://127.0.0.1:%d" % port)
        self.addCleanup(self.http.close)
        slime_sim.CLIENT = self.http
        self.addCleanup(setattr, slime_sim, "CLIENT", None)
        self.addCleanup(setattr, slime_sim, "SETTINGS", None)
        slime_sim.PASS.clear()
        slime_sim.PASS.update(dict(zip(LABELS, RATES)))

        self.ours = ours
        ours._progress.clear()  # a new process
        self.addCleanup(ours._progress.clear)
        slime_sim.SETTINGS = Settings(options={"min_n": 2, "max_n": 12, "seed": 4}, backup_state=self.state)
        self.dataset = [self.ns.Sample(prompt="Problem %s" % label, label=label, metadata={"index": i, "data_source": "math"})
                        for i, label in enumerate(LABELS)]

    def manager(self, args):
        rollout_fn = self.ns.load_function("tests.slime_sim.generate_rollout")
        return slime_upstream.ManagerStandIn(args, rollout_fn=rollout_fn, data_source=slime_upstream.DataSourceStandIn(args, self.dataset))

    def held(self, path):
        import sqlite3

        db = sqlite3.connect("file:%s?mode=rw" % path, uri=True)
        try:
            return db.execute("SELECT sum(rollouts), max(last_step) FROM prompts").fetchone()
        finally:
            db.close()

    def test_the_state_as_of_each_saved_rollout_is_copied_beside_the_data_source_state(self):
        save = self.dir + "/ckpt"
        args = slime_upstream.args(save=save, save_interval=2, num_rollout=5)
        manager = self.manager(args)
        rollouts = []
        for rollout_id in range(5):
            samples, _ = manager.get_rollout_data(rollout_id)
            rollouts.append(len(samples))
        # should_run_periodic_action: (id + 1) % 2 == 0 → after rollouts 1 and 3, and the last, 4.
        for rollout_id in (1, 3, 4):
            self.assertEqual(self.held(self.ours.state_copy(save, rollout_id)), (sum(rollouts[:rollout_id + 1]), rollout_id))
        for rollout_id in (0, 2):
            self.assertFalse(os.path.exists(self.ours.state_copy(save, rollout_id)), rollout_id)

    def test_release_train_saves_after_every_rollout_so_each_gets_its_copy(self):
        # slime's train.py:71 saves after every rollout with --release-train, --save-interval or
        # not; without an interval no copy was ever made, and a resume kept the state as it was.
        save = self.dir + "/ckpt"
        args = slime_upstream.args(save=save, save_interval=None, release_train=True, num_rollout=3)
        manager = self.manager(args)
        rollouts = []
        for rollout_id in range(3):
            samples, _ = manager.get_rollout_data(rollout_id)
            rollouts.append(len(samples))
        for rollout_id in range(3):
            self.assertEqual(self.held(self.ours.state_copy(save, rollout_id)), (sum(rollouts[:rollout_id + 1]), rollout_id))

    def test_an_epoch_end_saved_by_the_data_source_gets_its_copy_too(self):
        save = self.dir + "/ckpt"
        args = slime_upstream.args(save=save, save_interval=10, num_rollout=20)
        manager = self.manager(args)
        first, _ = manager.get_rollout_data(0)
        os.makedirs(save + "/rollout")
        open(save + "/rollout/global_dataset_state_dict_0.pt", "wb").close()  # RolloutDataSource.save at an epoch's end
        manager.get_rollout_data(1)
        self.assertEqual(self.held(self.ours.state_copy(save, 0)), (len(first), 0))

    def test_a_run_resumed_with_load_says_how_to_put_the_copy_back_while_the_service_has_the_state(self):
        save = self.dir + "/ckpt"
        self.manager(slime_upstream.args(save=save, save_interval=1, num_rollout=5)).get_rollout_data(0)
        manager = self.manager(slime_upstream.args(save=save, save_interval=1, num_rollout=5))
        manager.get_rollout_data(1)
        self.ours._progress.clear()  # a new process, resumed from the checkpoint of rollout 0
        resumed = self.manager(slime_upstream.args(save=save, load=save, save_interval=1, num_rollout=5))
        with self.assertLogs("rollout_budget", level="WARNING") as logs:
            resumed.get_rollout_data(1)
        self.assertIn("resumed from %s, whose copy of the state (%s) holds the results up to step 0" % (save, self.ours.state_copy(save, 0)), logs.output[0])
        self.assertIn("rollout-budget backup --state %s --out %s" % (self.ours.state_copy(save, 0), self.state), logs.output[0])


if __name__ == "__main__":
    unittest.main()
