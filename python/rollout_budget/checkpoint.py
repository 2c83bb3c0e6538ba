"""The state copied into a trainer's checkpoints, and put back when a run resumes from one.

Used by the verl and slime integrations (verl.py, slime.py), which know when their trainer saves
a checkpoint and where. A copy is `rollout-budget backup` of ``settings.backup_state`` (the SQLite
state file: by default ``url`` when that is a state path), consistent while a service writes the
state. A PostgreSQL state is not copied (pg_dump --schema copies its schema).
"""

from __future__ import annotations

import json
import logging
import os
import shlex
import subprocess

from .command import cli_command
from .client_common import RolloutBudgetError

__all__ = ["CHECKPOINT_COPY", "check_copies", "copy_state", "resume_from_copy"]

#: The state's copy in a verl checkpoint folder (slime's: rollout/rollout_budget_state_<id>.db).
CHECKPOINT_COPY = "rollout-budget.db"

_log = logging.getLogger("rollout_budget")


def copy_state(settings, out, when):
    """Copies the state to `out` (its folder made); `when` names the step in the log. Returns
    the backup's summary ``{"out", "prompts", "last_step", "bytes"}``, or None (no state set,
    or no file there: logged)."""
    state = settings.backup_state
    if state is None:
        return None
    if not os.path.exists(state):
        _log.warning("rollout-budget: %s: no state file at %s to copy into the checkpoint (backup_state): "
                     "set backup_state to the service's --state, or none", when, state)
        return None
    from .cli import Cli

    try:
        os.makedirs(os.path.dirname(os.path.abspath(out)), exist_ok=True)
        held = Cli(state=state).backup(out)
    except (OSError, RolloutBudgetError, subprocess.TimeoutExpired) as error:
        # The training goes on (its own checkpoint is what matters most); the resumed run then
        # finds no copy there and keeps the state as it is (docs/trainers.md).
        _log.error("rollout-budget: %s: the state %s could not be copied to %s: %s", when, state, out, error)
        return None
    _log.info("rollout-budget: %s: the state (%d prompts, last step %s) copied to %s", when, held["prompts"], held["last_step"], out)
    return held


def check_copies(settings):
    """Raises now, at a run's first step, what would stop every copy at its checkpoint hours
    later: a `backup_state` set where the rollout-budget CLI cannot be found."""
    if settings.backup_state is not None:
        try:
            cli_command()
        except FileNotFoundError as error:
            raise FileNotFoundError("rollout_budget.backup_state %s is copied with the rollout-budget CLI: %s"
                                    % (settings.backup_state, error)) from None


def _last_step(state):
    from .cli import Cli

    return json.loads(Cli(state=state).run(["inspect", "--state", state]))["last_step"]


def resume_from_copy(settings, copy, folder):
    """At the first plan of a run resumed from checkpoint `folder`, whose copy of the state is
    `copy` (if there is one): puts
    the copy back when the integration runs the state itself (``url`` is the state path) and
    nothing has it open, if its last step differs or there is no state file (a run resumed on
    another node); else, when the state may hold results of
    steps after the checkpoint, logs the commands that put it back. Nothing has the state open
    when no ``-wal`` or ``-shm`` is beside it after `inspect` read it: SQLite removes them when
    its last connection closes (those a crash left, too), so they stay only while a process (a
    service) has it open. Returns what was done: ``"restored"``, ``"same"``, ``"warned"``,
    ``"failed"`` (a copy that could not be read or put back: logged, the state kept), or None
    (no copy, a new run)."""
    if not os.path.exists(copy):
        return None
    try:
        return _resume_from_copy(settings, copy, folder)
    except (OSError, RolloutBudgetError, subprocess.TimeoutExpired, ValueError, KeyError) as error:
        # A copy that cannot be read (cut short, not a state) or put back: the run goes on with
        # the state as it is, as after a checkpoint without a copy.
        _log.error("rollout-budget: resumed from %s: its copy of the state %s could not be used (%s): the state is kept as it is",
                   folder, copy, error)
        return "failed"


def _resume_from_copy(settings, copy, folder):
    if os.path.getsize(copy) == 0:
        # SQLite takes an empty file for a new database: read as a state holding nothing, it was put back over the state.
        raise ValueError("it is an empty file (0 bytes): a copy cut at its start")
    state = settings.backup_state
    at_copy = _last_step(copy)
    if state is not None and state == settings.url and not os.path.exists(state):
        # The integration runs the state and there is none (a resumed run on another node, a
        # cleaned folder): nothing has it open, so the copy is the state.
        from .cli import Cli

        os.makedirs(os.path.dirname(os.path.abspath(state)), exist_ok=True)
        held = Cli(state=copy).backup(state)
        _log.warning("rollout-budget: resumed from %s: no state at %s, so its copy of the state was put there (%d prompts, last step %s)",
                     folder, state, held["prompts"], held["last_step"])
        return "restored"
    if state is not None and os.path.exists(state):
        if _last_step(state) == at_copy:
            return "same"
        open_files = [state + suffix for suffix in ("-wal", "-shm") if os.path.exists(state + suffix)]
        if state == settings.url and not open_files:
            from .cli import Cli

            held = Cli(state=copy).backup(state)
            _log.warning("rollout-budget: resumed from %s: put its copy of the state back into %s (%d prompts, last step %s)",
                         folder, state, held["prompts"], held["last_step"])
            return "restored"
    where = state if state is not None else "<the service's --state>"
    _log.warning(
        "rollout-budget: resumed from %s, whose copy of the state (%s) holds the results up to step %s; the state in use "
        "may also hold the first run's later steps. To resume it exactly, stop what serves it, run `rollout-budget backup "
        "--state %s --out %s` (after a crash, remove %s-wal and %s-shm first) and start it again (docs/trainers.md, "
        "Resuming a run from a checkpoint)", folder, copy, at_copy, shlex.quote(copy), shlex.quote(where), where, where)
    return "warned"
