"""Clients in a forked child and clients sent to another process, against a real service.

A trainer's client made before ``os.fork`` (multiprocessing's default start method on Linux, a
DataLoader's workers) is inherited by the child: its kept-alive socket or its `serve --stdio`
pipes are the parent's. Used from both processes, each read the other's answers: a plan for
other prompts, returned without an error.
"""

import json
import multiprocessing
import os
import pickle
import select
import signal
import ssl
import time
import unittest

from . import support
import rollout_budget as rb

ROUNDS = 30
#: How long a child may take before the test calls it stalled (a lock it inherited held forever).
CHILD_LIMIT_S = 60


def _plans_wrong(client, tag, rounds=ROUNDS):
    """Plans `rounds` steps of prompts only this process names; how many plans named others."""
    wrong = 0
    for k in range(rounds):
        prompts = [{"id": "%s-%d-%d" % (tag, k, i)} for i in range(24)]
        plan = client.plan(prompts, budget_rollouts=8 * len(prompts))
        if sorted(a["prompt_id"] for a in plan["allocations"]) != sorted(p["id"] for p in prompts):
            wrong += 1
    return wrong


def _in_child(work):
    """Forks; the child runs work() and sends back what it returns (or its error) as JSON.
    Returns (pid, a function that waits for the child and gives that back)."""
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(read)
        try:
            answer = {"ok": work()}
        except BaseException as error:  # the child must never go back into the test runner
            answer = {"error": "%s: %s" % (type(error).__name__, error)}
        os.write(write, json.dumps(answer).encode("utf-8"))
        os._exit(0)
    os.close(write)

    def result():
        chunks = []
        with os.fdopen(read, "rb", buffering=0) as pipe:
            while True:
                if not select.select([pipe], [], [], CHILD_LIMIT_S)[0]:
                    os.kill(pid, signal.SIGKILL)
                    os.waitpid(pid, 0)
                    raise AssertionError("the child stalled: no answer in %d s" % CHILD_LIMIT_S)
                chunk = pipe.read(65536)
                if not chunk:
                    break
                chunks.append(chunk)
        text = b"".join(chunks).decode("utf-8")
        _, status = os.waitpid(pid, 0)
        if not text:
            raise AssertionError("the child said nothing (wait status %d)" % status)
        answer = json.loads(text)
        if "error" in answer:
            raise AssertionError("in the child: " + answer["error"])
        return answer["ok"]

    return pid, result


#: A fork while another thread is mid-request, the child then planning with the same client and
#: ending as a program does (sys.exit: its objects finalized). argv: "http" or "stdio", then the
#: service's url or the state's path, then the CLI's command as JSON.
FORK_MID_REQUEST = r"""
import json, os, sys, threading, time
import rollout_budget as rb
kind, target, command = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
client = rb.HttpClient(target) if kind == "http" else rb.StdioClient(state=target, command=command)
client.health()
big = [{"id": "big-%d" % i} for i in range(20000)]
answers = []
worker = threading.Thread(target=lambda: answers.append(client.plan(big, budget_rollouts=8 * len(big))))
worker.start()
time.sleep(0.05)  # the worker is sending the plan or waiting for its answer, its buffers' locks held
pid = os.fork()
if pid == 0:
    plan = client.plan([{"id": "from-the-child"}], budget_rollouts=8)
    client.close()
    sys.exit(0 if [a["prompt_id"] for a in plan["allocations"]] == ["from-the-child"] else 3)
deadline = time.monotonic() + 40
while time.monotonic() < deadline:
    done, status = os.waitpid(pid, os.WNOHANG)
    if done:
        break
    time.sleep(0.05)
else:
    os.kill(pid, 9)
    os.waitpid(pid, 0)
    print("the child stalled")
    sys.exit(1)
worker.join()
client.close()
print("child %d, parent %d prompts" % (os.waitstatus_to_exitcode(status), len(answers[0]["allocations"])))
"""


def _fork_mid_request(kind, target):
    import subprocess
    import sys
    env = dict(os.environ, PYTHONPATH=support.PYTHON_DIR)
    run = subprocess.run([sys.executable, "-c", FORK_MID_REQUEST, kind, target, json.dumps(support.COMMAND)],
                         capture_output=True, text=True, timeout=120, env=env)
    return run.stdout.strip() + run.stderr.strip()


def _plan_in_worker(client):
    """A spawn worker's task: one plan with the client it was sent."""
    plan = client.plan([{"id": "spawned-a"}, {"id": "spawned-b"}], budget_rollouts=16)
    client.close()
    return sorted((a["prompt_id"], a["n"]) for a in plan["allocations"])


@unittest.skipUnless(hasattr(os, "fork"), "needs os.fork")
class ForkHttpTest(support.ServiceCase):
    def test_parent_and_child_each_get_their_own_plans(self):
        client = rb.HttpClient(self.url)
        self.assertEqual(client.health()["status"], "ok")  # the connection is open before the fork
        _, child = _in_child(lambda: _plans_wrong(client, "child"))
        parent_wrong = _plans_wrong(client, "parent")
        self.assertEqual((parent_wrong, child()), (0, 0))
        # The child closed only its copy of the socket: the parent's client goes on.
        self.assertEqual(client.plan([{"id": "after"}], budget_rollouts=8)["totals"]["rollouts"], 8)
        client.close()

    def test_a_lock_held_by_another_thread_at_the_fork_does_not_stall_the_child(self):
        client = rb.HttpClient(self.url)
        client.health()
        with client._lock:  # as if another thread were mid-request when the fork came
            _, child = _in_child(lambda: client.health()["status"])
        self.assertEqual(child(), "ok")
        client.close()


    def test_a_fork_while_another_thread_waits_for_an_answer(self):
        self.assertEqual(_fork_mid_request("http", self.url), "child 0, parent 20000 prompts")

    def test_one_client_that_fails_at_the_fork_does_not_keep_the_next_on_the_parents_connection(self):
        from rollout_budget import client_common

        broken, client = rb.HttpClient(self.url), rb.HttpClient(self.url)
        client.health()

        def fail():
            raise OSError("as if closing its copy had failed")

        broken._forked = fail
        saved = client_common._LIVE
        client_common._LIVE = [broken, client]  # the registry's order, fixed: the failing one first
        try:
            with self.assertLogs("rollout_budget", level="ERROR") as logs:
                client_common._after_fork_in_child()  # what the child runs at a fork, run here
        finally:
            client_common._LIVE = saved
        self.assertIsNone(client._conn)  # the next client let go all the same
        self.assertIn("a client could not close what it inherited at a fork", logs.output[0])
        self.assertEqual(client.health()["status"], "ok")  # and opens its own
        client.close()


class PickleTest(support.ServiceCase):
    def test_an_http_client_is_sent_as_its_url_and_settings(self):
        client = rb.HttpClient(self.url + "/", timeout=7.5, token="", state_retries=2, connect_retries=1)
        client.health()
        copy = pickle.loads(pickle.dumps(client))
        self.assertEqual((copy.base_url, copy._timeout, copy.state_retries, copy.connect_retries),
                         (self.url, 7.5, 2, 1))
        self.assertIsNot(copy._lock, client._lock)
        self.assertEqual(copy.plan([{"id": "copied"}], budget_rollouts=8)["totals"]["rollouts"], 8)
        copy.close()
        client.close()

    def test_an_http_client_without_a_token_does_not_take_one_from_the_other_processs_environment(self):
        saved = os.environ.pop("ROLLOUT_BUDGET_TOKEN", None)
        try:
            text = pickle.dumps(rb.HttpClient(self.url))
            os.environ["ROLLOUT_BUDGET_TOKEN"] = "another-token"
            self.assertEqual(pickle.loads(text)._auth, {})
            with_token = pickle.loads(pickle.dumps(rb.HttpClient(self.url, token="s3cret")))
            self.assertEqual(with_token._auth, {"Authorization": "Bearer s3cret"})
        finally:
            os.environ.pop("ROLLOUT_BUDGET_TOKEN", None)
            if saved is not None:
                os.environ["ROLLOUT_BUDGET_TOKEN"] = saved

    def test_a_spawned_worker_plans_with_the_client_it_was_sent(self):
        client = rb.HttpClient(self.url)
        with multiprocessing.get_context("spawn").Pool(1) as pool:
            got = pool.apply(_plan_in_worker, (client,))
        self.assertEqual(got, [("spawned-a", 8), ("spawned-b", 8)])
        client.close()

    def test_what_cannot_be_sent_says_what_to_do_instead(self):
        client = rb.HttpClient("https://rb.example:8443/rb", ssl_context=ssl.create_default_context())
        with self.assertRaisesRegex(TypeError, "ssl_context=.*SSL_CERT_FILE"):
            pickle.dumps(client)
        with rb.StdioClient(state=self.state, command=support.COMMAND) as stdio:
            with self.assertRaisesRegex(TypeError, r"serve --stdio.*rollout_budget\.connect\(state\)"):
                pickle.dumps(stdio)


@unittest.skipUnless(hasattr(os, "fork"), "needs os.fork")
class ForkStdioTest(unittest.TestCase):
    def setUp(self):
        self.state = os.path.join(support.temp_folder(self, "rb-fork-"), "state.db")

    def test_the_child_starts_its_own_process_on_the_same_state_and_the_parent_closes_at_once(self):
        client = rb.StdioClient(state=self.state, command=support.COMMAND)
        self.assertEqual(client.health()["status"], "ok")
        release_read, release_write = os.pipe()

        def child_work():
            os.close(release_write)
            wrong = _plans_wrong(client, "child")
            client.observe([{"prompt_id": "seen-by-child", "step": 0, "rewards": [1, 0, 1, 0], "tokens": [100] * 4}])
            os.read(release_read, 1)  # still alive (its copy of the pipes with it) while the parent closes
            client.close()
            return wrong

        _, child = _in_child(child_work)
        os.close(release_read)
        try:
            self.assertEqual(_plans_wrong(client, "parent"), 0)
            # The child's copy of the parent's input pipe is gone: the parent's process sees the end
            # of its input and exits at once. With the copy, close() waited its 30 s and sent SIGTERM
            # (on which serve also exits 0): a stall check, not a speed target.
            began = time.monotonic()
            self.assertEqual(client.close(), 0)
            self.assertLess(time.monotonic() - began, 15, "close() waited for an end of input the child held back")
        finally:
            os.write(release_write, b"x")
            os.close(release_write)
            client.close()
        self.assertEqual(child(), 0)
        with rb.StdioClient(state=self.state, command=support.COMMAND) as again:
            self.assertEqual(again.prompt("seen-by-child")["rollouts"], 4)

    def test_a_fork_while_another_thread_waits_for_an_answer(self):
        self.assertEqual(_fork_mid_request("stdio", self.state), "child 0, parent 20000 prompts")

    def test_a_closed_client_says_so(self):
        client = rb.StdioClient(state=self.state, command=support.COMMAND)
        self.assertEqual(client.close(), 0)
        with self.assertRaisesRegex(RuntimeError, "this StdioClient is closed"):
            client.health()


if __name__ == "__main__":
    unittest.main()
