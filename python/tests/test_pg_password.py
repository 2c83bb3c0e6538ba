"""A postgres:// state's password never on a child's command line (pyrev4 F2): connect(url),
StdioClient(state=url) and Cli(state=url) (and so the verl and slime integrations, which go
through connect) put it on `serve --stdio --state ...`'s argv, readable by every local user in
`ps` and /proc/<pid>/cmdline for the whole run. It goes to the child as PGPASSWORD instead."""

import json
import os
import secrets
import subprocess
import sys
import unittest
import urllib.parse

from . import support
import rollout_budget as rb
from rollout_budget.command import password_out_of_args

PASSWORD = "s3cret:PW@x"  # ':' and '@' percent-encoded in the URL, decoded in PGPASSWORD
IN_URL = urllib.parse.quote(PASSWORD, safe="")


def _with_password(base, schema):
    """`base` (RB_PG_URL, postgres://user@host:port/db) with PASSWORD and ?schema=<schema>."""
    parts = urllib.parse.urlsplit(base)
    user, _, host = parts.netloc.rpartition("@")
    netloc = "%s:%s@%s" % (user.partition(":")[0] or "rb", IN_URL, host)
    query = "&".join(q for q in (parts.query, "schema=" + schema) if q)
    return urllib.parse.urlunsplit(parts._replace(netloc=netloc, query=query))


def _drop_schema(base, schema):
    script = ("const pg = require('pg'); const c = new pg.Client({connectionString: process.argv[1]});"
              "c.connect().then(() => c.query('DROP SCHEMA IF EXISTS \"' + process.argv[2] + '\" CASCADE')).then(() => c.end())")
    subprocess.run([support.NODE, "-e", script, base, schema], cwd=support.ROOT, check=True, timeout=60)


def _recording_cli(folder):
    """A command that records its argv and PGPASSWORD in <folder>/calls.jsonl, then runs the CLI."""
    script = os.path.join(folder, "record.py")
    with open(script, "w") as f:
        f.write("import json, os, sys\n"
                "with open(%r, 'a') as out:\n"
                "    out.write(json.dumps({'argv': sys.argv[1:], 'PGPASSWORD': os.environ.get('PGPASSWORD')}) + '\\n')\n"
                "os.execvp(%r, [%r, %r] + sys.argv[1:])\n" % (os.path.join(folder, "calls.jsonl"), support.NODE, support.NODE, support.CLI))
    return [sys.executable, script], os.path.join(folder, "calls.jsonl")


class PasswordOutOfArgsTest(unittest.TestCase):
    def test_the_password_leaves_the_url_in_the_userinfo_and_the_query_the_rest_kept_as_written(self):
        cases = [
            ("postgres://rb:%s@127.0.0.1:5432/db?schema=s" % IN_URL, "postgres://rb@127.0.0.1:5432/db?schema=s", PASSWORD),
            ("postgresql://rb@h/db?schema=s&password=p%2Bq&sslmode=require", "postgresql://rb@h/db?schema=s&sslmode=require", "p+q"),
            ("postgres://rb@h/db", "postgres://rb@h/db", None),
            ("state.db", "state.db", None),
        ]
        for url, kept, password in cases:
            with self.subTest(url=url):
                self.assertEqual(password_out_of_args(["--state", url]), (["--state", kept], password))
        # A flag and its URL in one argument, as the CLI takes them (a review found the password left there).
        self.assertEqual(password_out_of_args(["--state=postgres://rb:pw@h/db", "--out=x.json"]), (["--state=postgres://rb@h/db", "--out=x.json"], "pw"))
        self.assertEqual(password_out_of_args(["--out=postgres://rb@h/db?schema=c&password=pw"]), (["--out=postgres://rb@h/db?schema=c"], "pw"))
        with self.assertRaises(ValueError) as caught:
            password_out_of_args(["postgres://a:pwA1@h/db", "postgres://a:pwB2@h/db"])
        self.assertNotRegex(str(caught.exception), "pwA1|pwB2")


class PostgresPasswordTest(unittest.TestCase):
    def setUp(self):
        self.base = os.environ.get("RB_PG_URL")
        if not self.base:
            support.missing("RB_PG_URL (eval \"$(.ci/setup-postgres.sh start)\") for the PostgreSQL password tests")
        self.schema = "t_py_%s" % secrets.token_hex(6)
        self.addCleanup(_drop_schema, self.base, self.schema)
        self.url = _with_password(self.base, self.schema)
        self.assertIn(IN_URL, self.url)

    def test_a_stdio_childs_password_is_in_its_environment_never_on_its_command_line(self):
        with rb.connect(self.url, command=support.COMMAND) as client:
            self.assertEqual(client.health()["status"], "ok")
            pid = client._proc.pid
            with open("/proc/%d/cmdline" % pid, "rb") as f:
                argv = f.read().decode().split("\0")
            with open("/proc/%d/environ" % pid, "rb") as f:
                environ = f.read().decode(errors="replace").split("\0")
            self.assertFalse(any("s3cret" in a for a in argv), argv)
            self.assertIn("postgres://rb@", " ".join(argv))
            self.assertIn("PGPASSWORD=" + PASSWORD, environ)
            # A plan (in a planning thread, which opens its own connection) and an observe on that state.
            client.observe([{"prompt_id": "a", "step": 1, "reward": 1, "rollout_id": "1/a#0"}])
            plan = client.plan([{"id": "a"}, {"id": "b"}], budget_rollouts=8, step=2)
            self.assertEqual(sum(a["n"] for a in plan["allocations"]), 8)

    def test_the_cli_wrappers_password_is_in_its_environment_never_on_its_command_line(self):
        command, calls = _recording_cli(support.temp_folder(self))
        with rb.StdioClient(self.url, command=command) as client:
            client.observe([{"prompt_id": "a", "step": 1, "reward": 1, "rollout_id": "1/a#0"}])
        cli = rb.Cli(state=self.url, command=command)
        self.assertEqual(cli.prompt("a")["rollouts"], 1)
        self.assertEqual(json.loads(cli.run(["inspect", "--state", self.url]))["prompts"], 1)  # as checkpoint.py runs it
        with open(calls) as f:
            seen = [json.loads(line) for line in f]
        self.assertEqual(len(seen), 3)
        for call in seen:
            self.assertFalse(any("s3cret" in a for a in call["argv"]), call["argv"])
            self.assertEqual(call["PGPASSWORD"], PASSWORD)


if __name__ == "__main__":
    unittest.main()
