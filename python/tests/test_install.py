"""`pip install --no-build-isolation ./python` works offline, with the in-tree backend."""

import os
import shutil
import subprocess
import sys
import tempfile
import unittest
import zipfile

from . import support

sys.path.insert(0, os.path.join(support.PYTHON_DIR, "_build"))
import backend  # noqa: E402  (python/_build/backend.py, the PEP 517 backend pip uses)


def has_pip():
    return subprocess.run([sys.executable, "-m", "pip", "--version"], capture_output=True).returncode == 0


class InstallTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="rb-py-install-")

    def tearDown(self):
        shutil.rmtree(self.dir, ignore_errors=True)

    @unittest.skipUnless(has_pip(), "pip is not installed for this Python")
    def test_pip_installs_offline_into_a_target_and_the_package_imports_from_there(self):
        target = os.path.join(self.dir, "site")
        env = dict(os.environ, PIP_NO_INDEX="1", PIP_DISABLE_PIP_VERSION_CHECK="1", PYTHONDONTWRITEBYTECODE="1")
        done = subprocess.run([sys.executable, "-m", "pip", "install", "--no-build-isolation", "--no-index", "--no-deps",
                               "--target", target, support.PYTHON_DIR], capture_output=True, text=True, env=env, timeout=300)
        self.assertEqual(done.returncode, 0, done.stdout + done.stderr)
        self.assertTrue(os.path.isfile(os.path.join(target, "rollout_budget", "__init__.py")))
        self.assertTrue(os.path.isdir(os.path.join(target, "rollout_budget-0.1.0.dist-info")))
        probe = ("import rollout_budget as rb, sys; "
                 "assert rb.__file__.startswith(sys.argv[1]), rb.__file__; "
                 "print(' '.join(n for n in ('expand_plan', 'group_advantages', 'stable_prompt_id') if callable(getattr(rb, n))))")
        run = subprocess.run([sys.executable, "-c", probe, target], capture_output=True, text=True, cwd=self.dir,
                             env=dict(env, PYTHONPATH=target))
        self.assertEqual(run.returncode, 0, run.stderr)
        self.assertEqual(run.stdout.split(), ["expand_plan", "group_advantages", "stable_prompt_id"])
        # The docs' agent_loop_config_path: the installed package's config file for verl's agent loops.
        run = subprocess.run([sys.executable, "-m", "rollout_budget.verl_agent_loop"], capture_output=True, text=True,
                             cwd=self.dir, env=dict(env, PYTHONPATH=target))
        self.assertEqual(run.returncode, 0, run.stderr)
        self.assertEqual(run.stdout.strip(), os.path.join(target, "rollout_budget", "agent_loops.yaml"))
        with open(run.stdout.strip()) as f:
            self.assertIn("rollout_budget.verl_agent_loop.SeededSingleTurnAgentLoop", f.read())

    def test_the_wheel_has_every_module_and_a_record_of_their_digests(self):
        name = backend.build_wheel(self.dir)
        self.assertEqual(name, "rollout_budget-0.1.0-py3-none-any.whl")
        with zipfile.ZipFile(os.path.join(self.dir, name)) as zf:
            names = set(zf.namelist())
            sources = {n for n in os.listdir(os.path.join(support.PYTHON_DIR, "rollout_budget")) if n.endswith((".py", ".yaml"))}
            self.assertIn("agent_loops.yaml", sources)
            self.assertEqual({n.split("/", 1)[1] for n in names if n.startswith("rollout_budget/")}, sources)
            record = zf.read("rollout_budget-0.1.0.dist-info/RECORD").decode().splitlines()
            self.assertEqual(len(record), len(names))
            self.assertIn("Name: rollout-budget", zf.read("rollout_budget-0.1.0.dist-info/METADATA").decode())

    def test_the_sdist_builds_with_the_backend_and_its_pyproject(self):
        import tarfile

        name = backend.build_sdist(self.dir)
        with tarfile.open(os.path.join(self.dir, name)) as tf:
            names = tf.getnames()
        self.assertIn("rollout_budget-0.1.0/pyproject.toml", names)
        self.assertIn("rollout_budget-0.1.0/_build/backend.py", names)
        self.assertIn("rollout_budget-0.1.0/rollout_budget/plan.py", names)


if __name__ == "__main__":
    unittest.main()
