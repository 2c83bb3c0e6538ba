"""How the rollout-budget CLI is started from Python: always an explicit program, never `npx`.

`rollout-budget` is not a published npm package, so `npx rollout-budget` outside the clone asks
the public registry for an unrelated name. The command is, in order:
  1. the `command` argument: a path to bin/rollout-budget.js (run with node), or an argv list;
  2. $ROLLOUT_BUDGET_CLI: a path to bin/rollout-budget.js (run with node), or a command line
     (split like a shell does), e.g. "node /opt/rollout-budget/bin/rollout-budget.js"; blank
     (spaces only) counts as unset, as does a blank $ROLLOUT_BUDGET_NODE;
  3. `rollout-budget` on PATH (after `npm link` in the clone).
Node is $ROLLOUT_BUDGET_NODE, else `node` on PATH.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import urllib.parse

__all__ = ["cli_command", "password_out_of_args", "child_env"]


def _node():
    node = (os.environ.get("ROLLOUT_BUDGET_NODE") or "").strip() or shutil.which("node")
    if node is None:
        raise FileNotFoundError("node is not on PATH: set ROLLOUT_BUDGET_NODE to the node binary (Node 20+)")
    return node


def _from_text(text):
    text = text.strip()
    if not text:
        raise ValueError("command must not be empty")
    if text.endswith(".js") and os.path.exists(text):
        return [_node(), text]
    argv = shlex.split(text)
    if len(argv) == 1 and argv[0].endswith(".js"):
        raise FileNotFoundError("rollout-budget CLI %r does not exist (a path to bin/rollout-budget.js is expected)" % argv[0])
    return argv


def cli_command(command=None):
    """The argv prefix that runs the rollout-budget CLI (see the module doc for the order)."""
    if command is not None:
        if isinstance(command, (list, tuple)):
            if not command:
                raise ValueError("command must not be empty")
            return [str(c) for c in command]
        return _from_text(str(command))
    env = os.environ.get("ROLLOUT_BUDGET_CLI")
    if env and env.strip():  # blank: as if unset (it ran `serve` as the program)
        return _from_text(env)
    found = shutil.which("rollout-budget")
    if found is not None:
        return [found]
    raise FileNotFoundError(
        "cannot find the rollout-budget CLI: set ROLLOUT_BUDGET_CLI to /path/to/rollout-budget/bin/rollout-budget.js "
        "(after `npm run build` in the clone), pass command=..., or run `npm link` in the clone to put rollout-budget on PATH"
    )


_POSTGRES = re.compile(r"^postgres(ql)?://", re.IGNORECASE)


def password_out_of_args(args):
    """`args` (a CLI's arguments after its command) with the password of each ``postgres://``
    URL among them taken out, and that password: ``(args, password or None)``. The child gets it
    in its environment instead (`child_env`), as ``PGPASSWORD``, which the state's PostgreSQL
    driver (node-postgres) reads for a URL without one, in every connection it opens (its
    planning threads' too): on a command line a password is readable by every local user (``ps``,
    ``/proc/<pid>/cmdline``) for as long as the child runs. The password of ``user:password@``
    (percent-decoded, as the driver decodes it) and of a ``password=`` query parameter (which the
    driver takes before it) are both taken out; two URLs with different passwords are a
    ValueError, never naming them (one child has one ``PGPASSWORD``)."""
    out, found = [], None
    for arg in args:
        # A URL as an argument of its own, or as a flag's value in one argument (--state=postgres://...).
        flag, _, value = arg.partition("=") if isinstance(arg, str) and arg.startswith("--") else ("", "", arg)
        if isinstance(value, str) and _POSTGRES.match(value):
            value, password = _without_password(value)
            arg = "%s=%s" % (flag, value) if flag else value
            if password is not None:
                if found is not None and password != found:
                    raise ValueError("two postgres:// URLs with different passwords in one command: the password goes to "
                                     "the child as PGPASSWORD, which holds one")
                found = password
        out.append(arg)
    return out, found


def child_env(password):
    """The environment of a child given `password` as ``PGPASSWORD`` (this process's, with it),
    or None (it inherits this process's as it is) when there is none."""
    return None if password is None else dict(os.environ, PGPASSWORD=password)


def _without_password(url):
    """(`url` without its password, the password or None); the rest of `url` kept as written."""
    prefix = url[:url.index("//") + 2]
    parts = urllib.parse.urlsplit(url)
    netloc, password = parts.netloc, None
    user, at, host = netloc.rpartition("@")
    if at and ":" in user:
        name, _, raw = user.partition(":")
        netloc = "%s@%s" % (name, host)
        password = urllib.parse.unquote(raw) or None  # empty: the driver takes PGPASSWORD, as it would
    rest = url[len(prefix) + len(parts.netloc):]
    path, mark, query = rest.partition("?")
    if mark:
        query, hash_mark, fragment = query.partition("#")
        kept = []
        for pair in query.split("&"):
            if urllib.parse.unquote_plus(pair.partition("=")[0]) == "password":
                password = urllib.parse.unquote_plus(pair.partition("=")[2]) or password  # the driver takes it first
            else:
                kept.append(pair)
        rest = path + ("?" + "&".join(kept) if kept else "") + hash_mark + fragment
    return prefix + netloc + rest, password
