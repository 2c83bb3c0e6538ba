"""A PEP 517 build backend in the standard library, so `pip install ./python` works offline.

The package is pure Python with no build step: a wheel is the `rollout_budget/` sources plus
the `.dist-info` files PEP 427 and the core metadata spec ask for (METADATA, WHEEL, RECORD with
sha256 digests). pip finds this module through pyproject.toml's `backend-path`, so building
needs neither setuptools nor `wheel` (pip install --no-build-isolation ./python, or with
isolation: the build requires nothing). Hooks: build_wheel, build_sdist, build_editable
(PEP 660: a .pth file pointing at this folder), and the get_requires_* hooks (none).
"""

import base64
import hashlib
import io
import os
import tarfile
import zipfile

NAME = "rollout_budget"
DIST = "rollout-budget"
VERSION = "0.1.0"
HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TAG = "py3-none-any"

METADATA = f"""Metadata-Version: 2.1
Name: {DIST}
Version: {VERSION}
Summary: Python client and trainer integrations (verl, slime) of the rollout-budget allocator
License: Apache-2.0
Requires-Python: >=3.8
Provides-Extra: numpy
Requires-Dist: numpy; extra == "numpy"

Client of the rollout-budget service (HTTP and stdio), a wrapper of its CLI, and the helpers
trainer integrations use: expand_plan, group_advantages, stable_prompt_id.
"""

WHEEL = f"""Wheel-Version: 1.0
Generator: rollout_budget in-tree backend
Root-Is-Purelib: true
Tag: {TAG}
"""


def _sources():
    """(path in the archive, absolute path) of every file of the package, sorted."""
    root = os.path.join(HERE, NAME)
    out = []
    for folder, dirs, files in os.walk(root):
        dirs[:] = sorted(d for d in dirs if d != "__pycache__")
        for f in sorted(files):
            if f.endswith((".pyc", ".pyo")):
                continue
            path = os.path.join(folder, f)
            out.append((os.path.relpath(path, HERE).replace(os.sep, "/"), path))
    return out


def _record_line(name, data):
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode("ascii")
    return f"{name},sha256={digest},{len(data)}"


def _write_wheel(wheel_directory, files):
    """files: (archive name, bytes). Adds the dist-info and returns the wheel's file name."""
    dist_info = f"{NAME}-{VERSION}.dist-info"
    files = list(files) + [(f"{dist_info}/METADATA", METADATA.encode()), (f"{dist_info}/WHEEL", WHEEL.encode())]
    record = [_record_line(name, data) for name, data in files] + [f"{dist_info}/RECORD,,"]
    files.append((f"{dist_info}/RECORD", ("\n".join(record) + "\n").encode()))
    filename = f"{NAME}-{VERSION}-{TAG}.whl"
    with zipfile.ZipFile(os.path.join(wheel_directory, filename), "w", zipfile.ZIP_DEFLATED) as zf:
        for name, data in files:
            info = zipfile.ZipInfo(name, date_time=(1980, 1, 1, 0, 0, 0))
            info.external_attr = 0o644 << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            zf.writestr(info, data)
    return filename


def get_requires_for_build_wheel(config_settings=None):
    return []


def get_requires_for_build_sdist(config_settings=None):
    return []


def get_requires_for_build_editable(config_settings=None):
    return []


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    files = []
    for name, path in _sources():
        with open(path, "rb") as f:
            files.append((name, f.read()))
    return _write_wheel(wheel_directory, files)


def build_editable(wheel_directory, config_settings=None, metadata_directory=None):
    return _write_wheel(wheel_directory, [(f"__editable__.{NAME}.pth", (HERE + "\n").encode())])


def build_sdist(sdist_directory, config_settings=None):
    base = f"{NAME}-{VERSION}"
    filename = f"{base}.tar.gz"
    names = ["pyproject.toml", "_build/backend.py"] + [name for name, _ in _sources()]
    with tarfile.open(os.path.join(sdist_directory, filename), "w:gz", format=tarfile.PAX_FORMAT) as tf:
        for name in names:
            tf.add(os.path.join(HERE, name), arcname=f"{base}/{name}", recursive=False)
        pkg_info = METADATA.encode()
        info = tarfile.TarInfo(f"{base}/PKG-INFO")
        info.size = len(pkg_info)
        tf.addfile(info, io.BytesIO(pkg_info))
    return filename
