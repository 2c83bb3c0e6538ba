"""Shared pieces of the Python tests: the real CLI and service, the upstream snapshots, and
loading upstream functions from their source without their packages' heavy imports.

Environment: RB_NODE / RB_CLI name node and bin/rollout-budget.js (defaults: `node` and this
repository's); RB_UPSTREAM_DIR the folder with the verl and slime tarballs (default: the first
`shared/upstream` found beside this repository or above it). With CI=true a missing snapshot or
a missing torch is a failure, not a skip.
"""

import ast
import atexit
import glob
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import threading
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
PYTHON_DIR = os.path.dirname(HERE)
ROOT = os.path.dirname(PYTHON_DIR)
NODE = os.environ.get("RB_NODE", "node")
CLI = os.environ.get("RB_CLI", os.path.join(ROOT, "bin", "rollout-budget.js"))
COMMAND = [NODE, CLI]
PATCH = os.path.join(PYTHON_DIR, "patches", "verl-b178a3c.patch")
IN_CI = os.environ.get("CI") == "true"

if PYTHON_DIR not in sys.path:
    sys.path.insert(0, PYTHON_DIR)


def start_http(state, *args):
    """Starts `rollout-budget serve` on a free port; returns (process, port)."""
    proc = subprocess.Popen(COMMAND + ["serve", "--state", state, "--host", "127.0.0.1", "--port", "0", *args],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    seen = []
    for line in proc.stderr:
        seen.append(line)
        m = re.search(r"listening on http://127\.0\.0\.1:(\d+)", line)
        if m:
            threading.Thread(target=proc.stderr.read, daemon=True).start()  # keep draining
            return proc, int(m.group(1))
    raise RuntimeError("service did not start: %s" % "".join(seen))


def stop(proc):
    proc.terminate()
    proc.wait(timeout=30)
    if proc.stderr is not None:
        proc.stderr.close()


def temp_folder(test, prefix="rb-py-"):
    """A new folder for one test, removed with everything in it when the test ends."""
    folder = tempfile.mkdtemp(prefix=prefix)
    test.addCleanup(shutil.rmtree, folder, True)
    return folder


class ServiceCase(unittest.TestCase):
    """A real `rollout-budget serve` on a fresh SQLite state in a temp folder, per test class."""

    serve_args = ()

    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.mkdtemp(prefix="rb-py-")
        cls.state = os.path.join(cls.dir, "state.db")
        cls.proc, cls.port = start_http(cls.state, *cls.serve_args)
        cls.url = "http://127.0.0.1:%d" % cls.port

    @classmethod
    def tearDownClass(cls):
        stop(cls.proc)
        shutil.rmtree(cls.dir, ignore_errors=True)


def missing(what):
    """Skip (locally) or fail (CI=true) a test whose prerequisite is missing."""
    if IN_CI:
        raise AssertionError("%s is missing but CI=true (run .ci/setup-python.sh)" % what)
    raise unittest.SkipTest("%s is missing" % what)


def have_torch():
    try:
        import numpy  # noqa: F401
        import torch  # noqa: F401
    except ImportError:
        return False
    return True


def require_torch():
    if not have_torch():
        missing("torch and numpy for %s (Debian's python3-torch: run the suite with /usr/bin/python3)" % sys.executable)


def upstream_dir():
    env = os.environ.get("RB_UPSTREAM_DIR")
    if env:
        return env
    folder = ROOT
    for _ in range(4):
        folder = os.path.dirname(folder)
        candidate = os.path.join(folder, "shared", "upstream")
        if os.path.isdir(candidate):
            return candidate
    return None


_unpacked = {}


def unpack(name):
    """Unpacks ../shared/upstream/<name>-*.tar.gz once per process into a temp folder (removed
    at exit); returns the unpacked root (e.g. the folder holding `verl/`)."""
    if name in _unpacked:
        return _unpacked[name]
    folder = upstream_dir()
    tarballs = sorted(glob.glob(os.path.join(folder, "%s-*.tar.gz" % name))) if folder else []
    if not tarballs:
        missing("the %s snapshot (../shared/upstream/%s-*.tar.gz; or set RB_UPSTREAM_DIR)" % (name, name))
    target = tempfile.mkdtemp(prefix="rb-upstream-%s-" % name)
    atexit.register(shutil.rmtree, target, True)
    with tarfile.open(tarballs[0]) as tf:
        tf.extractall(target)
    roots = [os.path.join(target, d) for d in os.listdir(target)]
    _unpacked[name] = roots[0] if len(roots) == 1 and os.path.isdir(roots[0]) else target
    return _unpacked[name]


def load_from_source(path, names, namespace):
    """Executes only the top-level definitions `names` of the Python file `path` (functions,
    classes, assignments), in source order, into `namespace`, and returns it. This runs
    upstream code as written without importing its module (whose imports need Ray, tensordict,
    SGLang...); `namespace` supplies the few names the definitions use. Annotations are not
    evaluated (as under `from __future__ import annotations`)."""
    with open(path, encoding="utf-8") as f:
        tree = ast.parse(f.read(), filename=path)
    wanted = set(names)
    body = []
    for node in tree.body:
        name = None
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            name = node.name
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            name = node.target.id
        elif isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            name = node.targets[0].id
        if name in wanted:
            body.append(node)
            wanted.discard(name)
    if wanted:
        raise LookupError("%s has no top-level %s" % (path, sorted(wanted)))
    module = ast.Module(body=body, type_ignores=[])
    import __future__
    code = compile(module, path, "exec", flags=__future__.annotations.compiler_flag, dont_inherit=True)
    exec(code, namespace)
    return namespace


def method_source(path, class_name, method_name):
    """The source of `class_name.method_name` in `path`, dedented to a top-level function."""
    with open(path, encoding="utf-8") as f:
        text = f.read()
    tree = ast.parse(text, filename=path)
    for node in tree.body:
        if isinstance(node, ast.ClassDef) and node.name == class_name:
            for item in node.body:
                if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)) and item.name == method_name:
                    import textwrap
                    return textwrap.dedent(ast.get_source_segment(text, item)), item.lineno
    raise LookupError("%s has no %s.%s" % (path, class_name, method_name))


def load_method(path, class_name, method_name, namespace):
    """Compiles `class_name.method_name` of `path` as a plain function taking `self`."""
    import __future__
    source, lineno = method_source(path, class_name, method_name)
    code = compile("\n" * (lineno - 1) + source, path, "exec", flags=__future__.annotations.compiler_flag, dont_inherit=True)
    exec(code, namespace)
    return namespace[method_name]
