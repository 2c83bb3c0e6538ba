"""The stdio client (`rollout-budget serve --stdio` as its child) with children that are not a
well-behaved service: lines that are not answers, a child that closes its output or ignores
SIGTERM, and one that writes much on stderr."""

import os
import sys
import threading
import time
import unittest
from unittest import mock

from . import support
import rollout_budget as rb


class StdioChildTest(unittest.TestCase):
    """Children that are not a well-behaved `serve --stdio`: the CLI behind a wrapper script that
    prints a banner, and stand-ins (python3 -c, labelled) for a child that closes its output
    without exiting and one that ignores SIGTERM while it waits (node cannot run its SIGTERM
    handler while SQLite waits for another writer's lock)."""

    def setUp(self):
        self.state = os.path.join(support.temp_folder(self, "rb-py-child-"), "s.db")

    def test_lines_that_are_not_answers_are_logged_and_skipped(self):
        # A wrapper that echoes before it runs the CLI: the first request raised a bare
        # JSONDecodeError (or AttributeError for a JSON line that is not an object).
        wrapper = ["/bin/sh", "-c", 'echo "starting rollout-budget"; echo \'"ready"\'; exec "$0" "$@"'] + support.COMMAND
        with rb.StdioClient(state=self.state, command=wrapper) as cli:
            with self.assertLogs("rollout_budget", level="WARNING") as logs:
                self.assertEqual(cli.health()["status"], "ok")
            said = "\n".join(logs.output)
            self.assertIn("wrote a line that is not an answer, skipped: 'starting rollout-budget'", said)
            self.assertIn("""skipped: '"ready"'""", said)
            self.assertEqual(cli.prompt("a")["rollouts"], 0)

    def test_a_child_that_closes_its_output_without_exiting_is_stopped_and_named(self):
        # Every request waited 10 s on the same dead pipe and said "it said nothing (exit code None)".
        child = [sys.executable, "-c", "import os, sys, time; sys.stderr.write('closing stdout\\n'); sys.stderr.flush(); "
                 "os.close(1); time.sleep(120)"]
        cli = rb.StdioClient(state=self.state, command=child)
        try:
            with self.assertRaisesRegex(RuntimeError, r"serve --stdio closed its output without exiting, during GET /healthz: "
                                                      r"stopped it; the next request starts it again \(it said: closing stdout\)"):
                cli.health()
            self.assertIsNotNone(cli._proc.poll())
        finally:
            cli.close()

    def test_close_while_a_request_waits_ends_the_child_and_the_request_without_starting_another(self):
        # close() raised subprocess.TimeoutExpired after its waits and left the child running;
        # the request thread could then take the ended child for one killed and start another.
        from rollout_budget import stdio_client

        child = [sys.executable, "-c", "import signal, sys, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); "
                 "sys.stdin.readline(); time.sleep(120)"]
        cli = rb.StdioClient(state=self.state, command=child)
        outcome = {}

        def request():
            try:
                cli.health()
            except Exception as error:  # what the request thread gets is the test's subject
                outcome["error"] = error

        waiting = threading.Thread(target=request)
        waiting.start()
        time.sleep(0.5)
        first = cli._proc
        with mock.patch.object(stdio_client, "CLOSE_WAIT_S", 1), mock.patch.object(stdio_client, "TERM_WAIT_S", 1):
            started = time.monotonic()
            self.assertEqual(cli.close(), -9)
            self.assertLess(time.monotonic() - started, 10)
        waiting.join(timeout=30)
        self.assertFalse(waiting.is_alive())
        self.assertIsInstance(outcome.get("error"), RuntimeError)
        self.assertIn("this StdioClient was closed during GET /healthz", str(outcome["error"]))
        self.assertIs(cli._proc, first)


class StdioStderrTest(unittest.TestCase):
    """A `serve --stdio` that writes much on stderr: each request that fails inside the store logs an
    internal error with its stack trace (about 800 bytes). Left unread, they filled the pipe and
    close() waited its 30 s before SIGTERM. The failing store is a real SQLite state with a
    trigger that refuses every update of its prompts, as a failing disk would."""

    def test_its_stderr_is_read_as_it_comes_and_logged(self):
        import sqlite3

        state = os.path.join(support.temp_folder(self, "rb-py-stderr-"), "state.db")
        cli = rb.StdioClient(state=state, command=support.COMMAND, state_retries=0)
        cli.observe([{"prompt_id": "a", "step": 0, "rewards": [1, 0]}])
        db = sqlite3.connect(state)
        db.execute("CREATE TRIGGER refuse BEFORE UPDATE ON prompts BEGIN SELECT RAISE(ABORT, 'the disk said no'); END")
        db.commit()
        db.close()
        with self.assertLogs("rollout_budget", level="INFO") as logs:
            for step in range(1, 201):
                with self.assertRaisesRegex(rb.RolloutBudgetError, "500 INTERNAL: the disk said no"):
                    cli.observe([{"prompt_id": "a", "step": step, "rewards": [1]}])
            began = time.monotonic()
            self.assertEqual(cli.close(), 0)
            closed_in = time.monotonic() - began
        # A stall check (close() waited 30 s for a process blocked on its stderr), not a speed target.
        self.assertLess(closed_in, 15)
        errors = [line for line in logs.output if "serve --stdio: rollout-budget serve: internal error: SqliteError: the disk said no" in line]
        self.assertEqual(len(errors), 200)
        self.assertGreater(sum(len(line) for line in logs.output), 100000)  # more than a pipe holds


if __name__ == "__main__":
    unittest.main()
