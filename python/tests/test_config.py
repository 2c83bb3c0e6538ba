"""The integrations' settings (rollout_budget/config.py): what a trainer's config or environment
gives, checked when read, before a step plans on it."""

import unittest

from rollout_budget import config


def settings(**mapping):
    return config.settings_from(mapping, environ={})


class UrlTest(unittest.TestCase):
    def test_a_host_and_port_without_a_scheme_is_an_error_not_a_state_file_of_that_name(self):
        # It was taken for a state path: a private SQLite file named "127.0.0.1:8080" in the
        # working folder, served by a child serve --stdio, and the shared service never reached.
        for url in ("127.0.0.1:8080", "localhost:8080", "rb-host.internal:8080/rb", "[::1]:9000"):
            with self.assertRaises(ValueError) as caught:
                settings(url=url)
            self.assertIn("rollout_budget.url %r is a host and port without a scheme: write http://%s" % (url, url), str(caught.exception))
        for url in ("http://127.0.0.1:8080", "runs/budget.db", "postgres://rb@db:5432/rb", ":memory:"):
            self.assertEqual(settings(url=url).url, url)


class BackupStateTest(unittest.TestCase):
    def test_the_state_copied_into_checkpoints_is_the_url_s_file_unless_set(self):
        self.assertEqual(settings(url="runs/budget.db").backup_state, "runs/budget.db")
        for url in ("http://127.0.0.1:8080", "postgres://rb@db:5432/rb", ":memory:", None):
            self.assertIsNone(settings(url=url).backup_state, url)
        self.assertEqual(settings(url="http://127.0.0.1:8080", backup_state="runs/budget.db").backup_state, "runs/budget.db")
        self.assertEqual(config.settings_from({}, environ={"ROLLOUT_BUDGET_BACKUP_STATE": "/s/b.db"}).backup_state, "/s/b.db")
        for off in ("none", "off", "", "false"):
            self.assertIsNone(settings(url="runs/budget.db", backup_state=off).backup_state, off)
        with self.assertRaises(ValueError) as caught:
            settings(url="http://127.0.0.1:8080", backup_state="postgres://rb@db/rb")
        self.assertIn("must be a SQLite state file, got 'postgres://rb@db/rb': copy a PostgreSQL state's schema with pg_dump", str(caught.exception))


class RewardTest(unittest.TestCase):
    def test_with_a_threshold_every_reward_is_a_pass_or_a_fail(self):
        # A 0–10 judge with threshold 5: 1 counted as a full pass (inside [0, 1], taken as it was) and 3 as a fail.
        s = settings(pass_threshold=5)
        self.assertEqual([s.reward_of(r, "r") for r in (0, 0.5, 1, 3, 5, 5.5, 10)], [0.0, 0.0, 0.0, 0.0, 0.0, 1.0, 1.0])
        dapo = settings(pass_threshold=0)
        self.assertEqual([dapo.reward_of(r, "r") for r in (-1, 1)], [0.0, 1.0])

    def test_without_one_rewards_are_taken_as_they_are_float32_sums_clamped(self):
        s = settings()
        self.assertEqual([s.reward_of(r, "r") for r in (0, 0.25, 1)], [0.0, 0.25, 1.0])
        # Ten 0.1s summed in float32 (torch.full((10,), 0.1).sum()): 1.0000001192092896 was refused.
        self.assertEqual(s.reward_of(1.0000001192092896, "r"), 1.0)
        self.assertEqual(s.reward_of(-1e-9, "r"), 0.0)
        with self.assertRaisesRegex(ValueError, r"^rollout 3: reward 1\.01 is outside \[0, 1\]; set pass_threshold \(verl: "
                                                r"\+rollout_budget\.pass_threshold=<t>; ROLLOUT_BUDGET_PASS_THRESHOLD\)"):
            s.reward_of(1.01, "rollout 3")

    def test_no_url_says_where_to_give_it_in_verl_and_under_ray(self):
        # A variable exported where a Ray job is submitted does not reach its actors on a cluster:
        # the message named only the variable the user had set.
        with self.assertRaises(ValueError) as caught:
            settings().client()
        text = str(caught.exception)
        for part in ("ROLLOUT_BUDGET_URL", "+rollout_budget.url=", "runtime_env env_vars"):
            self.assertIn(part, text)

    def test_nan_is_named_as_such_with_a_threshold_or_without(self):
        for s in (settings(), settings(pass_threshold=0.5)):
            with self.assertRaisesRegex(ValueError, r"^rollout 7: reward is NaN \(not a number\)"):
                s.reward_of(float("nan"), "rollout 7")


    def test_a_threshold_that_is_not_a_finite_number_is_an_error_naming_the_setting(self):
        # float('abc') said only "could not convert string to float"; 'nan' was taken, and every
        # reward, 1 and 10 included, counted as a fail.
        self.assertEqual(config.settings_from({}, environ={"ROLLOUT_BUDGET_PASS_THRESHOLD": "0.5"}).pass_threshold, 0.5)
        self.assertEqual(settings(pass_threshold="-1").pass_threshold, -1.0)
        for bad in ("abc", "", "nan", "inf", "-Infinity", float("nan"), True, [0.5]):
            with self.assertRaises(ValueError) as caught:
                config.settings_from({}, environ={"ROLLOUT_BUDGET_PASS_THRESHOLD": bad}) if isinstance(bad, str) else settings(pass_threshold=bad)
            self.assertEqual(str(caught.exception), "rollout_budget.pass_threshold must be a finite number (rewards above it pass), "
                             "got %r" % (bad,), bad)
        with self.assertRaisesRegex(ValueError, r"^rollout_budget\.pass_threshold must be a finite number"):
            config.Settings(pass_threshold=float("nan"))


class OptionsTest(unittest.TestCase):
    def test_multiple_of_in_options_is_the_setting(self):
        # The integrations pass multiple_of= themselves: in options it was given twice (TypeError at the first step).
        self.assertEqual(settings(options={"multiple_of": 16, "max_n": 32}).multiple_of, 16)
        self.assertEqual(settings(options={"multiple_of": 16}).options, {})
        self.assertEqual(settings(multiple_of=16, options={"multiple_of": 16}).multiple_of, 16)
        with self.assertRaisesRegex(ValueError, "multiple_of 8 and options.multiple_of 16 differ"):
            settings(multiple_of=8, options={"multiple_of": 16})
        with self.assertRaisesRegex(ValueError, r"rollout_budget.options.multiple_of must be ≥ 1, got 0"):
            settings(options='{"multiple_of": 0}')



class RoundsTest(unittest.TestCase):
    def test_rounds_is_an_integer_of_at_least_one_from_the_mapping_or_the_environment_default_one(self):
        self.assertEqual(settings().rounds, 1)
        self.assertEqual(settings(rounds=2).rounds, 2)
        self.assertEqual(settings(rounds=2.0).rounds, 2)
        self.assertEqual(config.settings_from({}, environ={"ROLLOUT_BUDGET_ROUNDS": "3"}).rounds, 3)
        self.assertEqual(config.settings_from({"rounds": 2}, environ={"ROLLOUT_BUDGET_ROUNDS": "3"}).rounds, 2)
        self.assertEqual(config.Settings().rounds, 1)
        for bad, says in (("0", "must be ≥ 1, got '0'"), (0, "must be ≥ 1, got 0"), (-2, "must be ≥ 1, got -2"),
                          ("two", "must be an integer, got 'two'"), ("1.5", "must be an integer, got '1.5'"),
                          (2.5, "must be an integer, got 2.5"), (True, "must be an integer, got True")):
            with self.assertRaises(ValueError) as caught:
                settings(rounds=bad)
            self.assertEqual(str(caught.exception), "rollout_budget.rounds " + says, bad)
        with self.assertRaisesRegex(ValueError, r"^rollout_budget\.rounds must be ≥ 1, got '0'$"):
            config.settings_from({}, environ={"ROLLOUT_BUDGET_ROUNDS": "0"})


if __name__ == "__main__":
    unittest.main()
