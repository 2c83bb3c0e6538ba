"""A digest of images, videos and other values JSON cannot hold (PIL images, numpy arrays,
torch tensors, bytes), by their content, so that a prompt id that covers them is the same at
every step and tells two images apart: slime's ``multimodal_inputs``
(rollout_budget.slime_samples) and verl's chat messages with the images in them
(`RLHFDataset._build_messages`: ``{"type": "image", "image": <PIL image>}``, which
`stable_prompt_id` hashes).
"""

from __future__ import annotations

import hashlib
import logging
import os

__all__ = ["digest", "holds"]

_log = logging.getLogger("rollout_budget")
_unknown = set()


def _parts(value, out):
    """Appends the bytes that tell `value` (an image, a video, a path, or containers of them)
    apart to `out`. PIL images and numpy arrays by their pixels with mode and size (or dtype and
    shape), torch tensors through numpy; a type it does not know by its name only, logged once."""
    if value is None:
        return
    if isinstance(value, os.PathLike):
        value = os.fspath(value)
    if isinstance(value, (str, bytes, bytearray)):
        out.append(value.encode("utf-8") if isinstance(value, str) else bytes(value))
    elif isinstance(value, (bool, int, float)):
        out.append(repr(value).encode("ascii"))
    elif isinstance(value, dict):
        for key in sorted(value, key=str):
            out.append(str(key).encode("utf-8"))
            _parts(value[key], out)
    elif isinstance(value, (list, tuple)):
        out.append(b"[%d]" % len(value))
        for item in value:
            _parts(item, out)
    elif hasattr(value, "detach") and hasattr(value, "cpu"):  # a torch tensor
        tensor = value.detach().cpu()
        try:
            _parts(tensor.numpy(), out)
        except TypeError:  # a dtype numpy has not (bfloat16): its values as float32
            _parts(tensor.float().numpy(), out)
    elif hasattr(value, "tobytes"):  # a PIL image, a numpy array
        if hasattr(value, "mode"):
            shape = (value.mode, getattr(value, "size", None))
        else:
            shape = (str(getattr(value, "dtype", None)), getattr(value, "shape", None))
        out.append(repr(shape).encode("utf-8"))
        out.append(value.tobytes())
    else:
        name = type(value).__name__
        if name not in _unknown:
            _unknown.add(name)
            _log.warning("rollout-budget: a prompt holds a %s, which its id cannot read: two prompts that differ only in "
                         "their %ss share one id (give each prompt an index or an id of its own)", name, name)
        out.append(name.encode("utf-8"))


def holds(value):
    """Whether a value holds anything: not None, and a non-empty list, array, tensor or string
    (an array's truth value is an error, so its length is asked)."""
    if value is None:
        return False
    try:
        return len(value) > 0
    except TypeError:
        return True


def digest(value):
    """The sha256 (hex) of `value`'s parts (`_parts`, each prefixed by its length). O(its bytes)."""
    parts = []
    _parts(value, parts)
    h = hashlib.sha256()
    for part in parts:
        h.update(b"%d:" % len(part))
        h.update(part)
    return h.hexdigest()
