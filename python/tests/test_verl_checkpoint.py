"""The state copied into verl's checkpoints, and put back when a run resumes from one.

Through the patched step (tests/verl_trainer.py: verl's own DataProto, _get_gen_batch and
compute_advantage; the trainer, model and reward are stand-ins) with `trainer.save_freq` and
`default_local_dir` set as verl's config has them. verl's own `_save_checkpoint` needs Ray and
the workers, so the tests make a checkpoint folder as it does (`global_step_<N>` under
`default_local_dir`, `ray_trainer.py:932–934`), and `fit`'s resume as `_load_checkpoint` leaves
it (`global_steps` = the checkpoint's step, then + 1 before the first step: lines 1028 and 1346).
What each copy holds is read with Python's own sqlite3, not through rollout-budget."""

import os
import shlex
import shutil
import sqlite3
import subprocess
import tempfile
import time
import unittest
from unittest import mock

from . import support, verl_trainer, verl_upstream
from rollout_budget import verl as rollout_budget_verl

PROMPTS = [{"text": "problem %d" % i, "index": i, "data_source": "math"} for i in range(8)]
PASS = {"math/%d" % i: p for i, p in enumerate([0.05, 0.1, 0.3, 0.5, 0.6, 0.8, 0.9, 0.97])}


def held(path):
    """(rollouts, last step) in a state file, read with sqlite3. Not `mode=ro`: a read-only
    connection cannot remove the -wal and -shm it makes, which say that a process has the state open."""
    db = sqlite3.connect("file:%s?mode=rw" % path, uri=True)
    try:
        rollouts, last = db.execute("SELECT sum(rollouts), max(last_step) FROM prompts").fetchone()
    finally:
        db.close()  # (a `with` block would leave it open, and the state's -wal and -shm with it)
    return rollouts, last


class CheckpointCase(unittest.TestCase):
    def setUp(self):
        support.require_torch()
        # The integration runs the CLI (serve --stdio, backup, inspect) as a trainer's process would find it.
        environ = mock.patch.dict(os.environ, {"ROLLOUT_BUDGET_CLI": " ".join(shlex.quote(a) for a in support.COMMAND)})
        environ.start()
        self.addCleanup(environ.stop)
        self.dir = tempfile.mkdtemp(prefix="rb-ckpt-")
        self.state = os.path.join(self.dir, "budget.db")
        self.ckpt = os.path.join(self.dir, "checkpoints")
        self.ns = verl_upstream.load()
        self.trainers = []

    def tearDown(self):
        for trainer in self.trainers:
            adapter = getattr(trainer, "_rollout_budget", None)
            if adapter is not None:
                adapter.client.close()
        shutil.rmtree(self.dir, ignore_errors=True)

    def trainer(self, url, save_freq=2, total=5, global_steps=0, **settings):
        t = verl_trainer.TrainerStandIn(rollout_n=4, workers=2, dp_size=2, budget_settings=dict(
            {"url": url, "options": {"min_n": 2, "max_n": 8, "seed": 1}}, **settings))
        t.config["trainer"] = {"save_freq": save_freq, "default_local_dir": self.ckpt, "resume_mode": "auto"}
        t.total_training_steps = total
        t.global_steps = global_steps
        self.trainers.append(t)
        return t

    def step(self, trainer):
        out = verl_trainer.patched_step(trainer, verl_trainer.dataset_batch(PROMPTS), PASS, self.ns.AdvantageEstimator.GRPO)
        return len(out)

    def copy_of(self, step):
        return os.path.join(self.ckpt, "global_step_%d" % step, rollout_budget_verl.CHECKPOINT_COPY)


class CopyIntoCheckpointsTest(CheckpointCase):
    def test_each_checkpoint_step_and_the_last_get_the_state_as_of_that_step(self):
        trainer = self.trainer(self.state, save_freq=2, total=5)
        rollouts = []
        for _ in range(5):
            rollouts.append(self.step(trainer))
        # save_freq 2 and the last step (5): verl saves global_step_2, _4 and _5 (ray_trainer.py:1645–1646).
        for step in (2, 4, 5):
            self.assertEqual(held(self.copy_of(step)), (sum(rollouts[:step]), step), step)
        for step in (1, 3):
            self.assertFalse(os.path.exists(os.path.join(self.ckpt, "global_step_%d" % step)), step)

    def test_a_checkpoint_saved_on_another_step_gets_its_copy_at_the_next_plan(self):
        # An ESI expiration makes fit save a checkpoint at a step the integration cannot foresee.
        trainer = self.trainer(self.state, save_freq=10, total=6)
        rollouts = [self.step(trainer) for _ in range(3)]
        os.makedirs(os.path.join(self.ckpt, "global_step_3"))  # _save_checkpoint's local_mkdir_safe
        rollouts.append(self.step(trainer))
        self.assertEqual(held(self.copy_of(3)), (sum(rollouts[:3]), 3))
        self.assertFalse(os.path.exists(os.path.join(self.ckpt, "global_step_4")))

    def test_an_earlier_runs_checkpoint_folder_without_a_copy_is_left_alone(self):
        # A new run (resume_mode disable) in a folder holding an older run's global_step_2.
        old = os.path.join(self.ckpt, "global_step_2")
        os.makedirs(old)
        os.utime(old, (time.time() - 3600, time.time() - 3600))
        trainer = self.trainer(self.state, save_freq=10, total=6)
        for _ in range(3):
            self.step(trainer)
        self.assertEqual(os.listdir(old), [])

    def test_save_freq_off_or_backup_state_none_copies_nothing(self):
        for trainer in (self.trainer(self.state, save_freq=-1), self.trainer(self.state + "2", backup_state="none")):
            for _ in range(2):
                self.step(trainer)
        self.assertFalse(os.path.exists(self.ckpt))

    def test_a_service_url_with_the_states_path_copies_it_while_the_service_runs(self):
        proc, port = support.start_http(self.state)
        try:
            trainer = self.trainer("http://127.0.0.1:%d" % port, save_freq=1, total=3, backup_state=self.state)
            rollouts = [self.step(trainer) for _ in range(3)]
        finally:
            support.stop(proc)
        for step in (1, 2, 3):
            self.assertEqual(held(self.copy_of(step)), (sum(rollouts[:step]), step), step)


class CopyProblemsTest(CheckpointCase):
    def test_a_copy_that_cannot_be_written_is_logged_and_the_training_goes_on(self):
        trainer = self.trainer(self.state, save_freq=1, total=3)
        os.makedirs(os.path.dirname(self.ckpt), exist_ok=True)
        with open(self.ckpt, "w") as f:  # default_local_dir is a file: no folder can be made in it
            f.write("x")
        with self.assertLogs("rollout_budget", level="ERROR") as logs:
            self.step(trainer)
            self.step(trainer)
        self.assertEqual(len(logs.output), 2)
        self.assertIn("step 1: the state %s could not be copied to %s" % (self.state, self.copy_of(1)), logs.output[0])
        self.assertEqual(held(self.state)[1], 2)

    def test_a_backup_state_without_the_cli_is_an_error_at_the_first_step_not_at_the_first_checkpoint(self):
        proc, port = support.start_http(self.state)
        self.addCleanup(support.stop, proc)
        trainer = self.trainer("http://127.0.0.1:%d" % port, backup_state=self.state)
        with mock.patch.dict(os.environ, {"ROLLOUT_BUDGET_CLI": "", "PATH": "/nonexistent"}):
            with self.assertRaises(FileNotFoundError) as caught:
                rollout_budget_verl.adapter_for(trainer)
        self.assertIn("rollout_budget.backup_state %s is copied with the rollout-budget CLI: cannot find the rollout-budget CLI" % self.state,
                      str(caught.exception))


class ResumeTest(CheckpointCase):
    def first_run(self, crash):
        """Steps 1–3 with save_freq 2: a copy at step 2, then step 3 observed past it."""
        trainer = self.trainer(self.state, save_freq=2, total=6)
        rollouts = [self.step(trainer) for _ in range(3)]
        adapter = trainer._rollout_budget
        self.assertEqual(held(self.state)[1], 3)
        if crash:
            # The trainer killed: its child serve --stdio dies with the state's -wal and -shm left.
            adapter.client._proc.kill()
            adapter.client._proc.wait()
            self.assertTrue(os.path.exists(self.state + "-wal"))
        adapter.client.close()
        trainer._rollout_budget = None
        self.trainers.remove(trainer)
        self.assertEqual(os.path.exists(self.state + "-wal"), crash)
        return rollouts

    def test_a_run_resumed_from_a_checkpoint_puts_the_copy_back_before_its_first_plan(self):
        for crash in (False, True):
            with self.subTest(crash=crash):
                rollouts = self.first_run(crash=crash)
                # _load_checkpoint of global_step_2, then fit's + 1: the resumed run's first step is 3.
                resumed = self.trainer(self.state, save_freq=2, total=6, global_steps=2)
                with self.assertLogs("rollout_budget", level="WARNING") as logs:
                    n3 = self.step(resumed)
                self.assertIn("put its copy of the state back into %s" % self.state, logs.output[0])
                # Step 3 again: each rollout applied once, none taken for the first run's (no duplicates warning).
                self.assertEqual(len(logs.output), 1, logs.output)
                resumed._rollout_budget.client.close()
                resumed._rollout_budget = None
                self.assertEqual(held(self.state), (sum(rollouts[:2]) + n3, 3))
                shutil.rmtree(self.ckpt)
                os.unlink(self.state)

    def test_a_state_a_service_has_open_is_not_replaced_and_the_log_says_how(self):
        self.first_run(crash=False)
        before = held(self.state)
        proc, port = support.start_http(self.state)
        try:
            resumed = self.trainer("http://127.0.0.1:%d" % port, save_freq=2, total=6, global_steps=3, backup_state=self.state)
            settings = rollout_budget_verl.settings_from(resumed.config["rollout_budget"])
            with self.assertLogs("rollout_budget", level="WARNING") as logs:
                self.assertEqual(rollout_budget_verl.resume_state(resumed, settings), "warned")
        finally:
            support.stop(proc)
        message = logs.output[0]
        self.assertIn("holds the results up to step 2", message)
        command = "rollout-budget backup --state %s --out %s" % (self.copy_of(2), self.state)
        self.assertIn(command, message)
        self.assertEqual(held(self.state), before)
        # As the log says: with the service stopped, the copy put back by that command.
        done = subprocess.run(support.COMMAND + command.split()[1:], capture_output=True, text=True)
        self.assertEqual(done.returncode, 0, done.stderr)
        self.assertEqual(held(self.state)[1], 2)
        self.assertEqual(rollout_budget_verl.resume_state(resumed, settings), "same")

    def test_a_copy_that_cannot_be_read_is_logged_and_the_state_kept(self):
        self.first_run(crash=False)
        before = held(self.state)
        os.makedirs(os.path.join(self.ckpt, "global_step_3"))
        with open(self.copy_of(3), "w") as f:
            f.write("not a state")  # a copy cut short: the disk filled during the checkpoint
        resumed = self.trainer(self.state, save_freq=2, total=6, global_steps=4)
        settings = rollout_budget_verl.settings_from(resumed.config["rollout_budget"])
        with self.assertLogs("rollout_budget", level="ERROR") as logs:
            self.assertEqual(rollout_budget_verl.resume_state(resumed, settings), "failed")
        self.assertIn("its copy of the state %s could not be used" % self.copy_of(3), logs.output[0])
        self.assertEqual(held(self.state), before)

    def test_a_copy_that_is_an_empty_file_is_not_put_back_over_the_state(self):
        # A copy cut at its start (the disk full at the checkpoint): SQLite took the 0-byte file
        # for a new database, `inspect` wrote a state's tables into it and read it as holding
        # nothing, and that was put back over the state: every posterior lost, logged "restored".
        self.first_run(crash=False)
        before = held(self.state)
        os.makedirs(os.path.join(self.ckpt, "global_step_3"))
        open(self.copy_of(3), "w").close()
        resumed = self.trainer(self.state, save_freq=2, total=6, global_steps=4)
        settings = rollout_budget_verl.settings_from(resumed.config["rollout_budget"])
        with self.assertLogs("rollout_budget", level="ERROR") as logs:
            self.assertEqual(rollout_budget_verl.resume_state(resumed, settings), "failed")
        self.assertIn("its copy of the state %s could not be used (it is an empty file (0 bytes): a copy cut at its start)"
                      % self.copy_of(3), logs.output[0])
        self.assertEqual(held(self.state), before)
        self.assertEqual(os.path.getsize(self.copy_of(3)), 0)

    def test_a_state_that_is_not_there_gets_the_copy(self):
        # Resumed on another node, or its folder cleaned: the copy was left unused, the log said a
        # state "in use" might hold later steps, and the run went on from an empty state.
        self.first_run(crash=False)
        os.unlink(self.state)
        resumed = self.trainer(self.state, save_freq=2, total=6, global_steps=3)  # its first step 3: global_step_2's copy
        settings = rollout_budget_verl.settings_from(resumed.config["rollout_budget"])
        with self.assertLogs("rollout_budget", level="WARNING") as logs:
            self.assertEqual(rollout_budget_verl.resume_state(resumed, settings), "restored")
        self.assertIn("no state at %s, so its copy of the state was put there" % self.state, logs.output[0])
        self.assertEqual(held(self.state), held(self.copy_of(2)))
        self.assertEqual(held(self.state)[1], 2)

    def test_a_new_run_or_a_checkpoint_without_a_copy_changes_nothing(self):
        self.first_run(crash=False)
        before = held(self.state)
        for steps in (0, 1, 4):  # a new run; global_step_3 has no folder, so no copy
            t = self.trainer(self.state, global_steps=steps)
            settings = rollout_budget_verl.settings_from(t.config["rollout_budget"])
            self.assertIsNone(rollout_budget_verl.resume_state(t, settings), steps)
        self.assertEqual(held(self.state), before)


if __name__ == "__main__":
    unittest.main()
