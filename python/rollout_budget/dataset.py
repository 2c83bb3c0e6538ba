"""A verl dataset as the prompts JSONL `rollout-budget plan`, `execute` and `loop` read.

    python -m rollout_budget.dataset train.parquet --out prompts.jsonl [--max-tokens 4096]

verl's datasets (its examples/data_preprocess scripts) are Parquet files whose rows hold
`data_source`, `prompt` (the chat messages), `reward_model.ground_truth` and `extra_info.index`,
and no id. Each row becomes one candidate:

- `id`: `stable_prompt_id` of the row, the id the verl integration gives the same prompt in
  training (rollout_budget.verl: "<data_source>/<extra_info.index>", else a hash of the
  messages), so a state built offline (`loop` against vLLM, or a replay) carries over into the
  training run; a row with images or videos needs an index (training hashes the decoded image
  in its messages, which this does not make: an error naming the row);
- `messages` (a list) or `prompt` (a string), as `execute` sends them;
- `ground_truth` from `reward_model.ground_truth`, for `execute --verifier math`;
- `group`: the row's `data_source` (the learned prior is fitted per group);
- `max_tokens` when `--max-tokens` is given (verl's `data.max_response_length`).

Parquet (told by its first bytes, whatever the file's name) is read with pandas (and pyarrow,
as verl installs them), a missing value as None (verl's reading); a `.jsonl` file (one row a
line, as `pandas.DataFrame.to_json(orient="records", lines=True)` writes it) needs nothing.
Errors name the file, the row and the field, and write nothing.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile

from .media import holds
from .plan import _as_plain, _no_nan, stable_prompt_id

__all__ = ["DatasetError", "candidates_of", "read_rows", "main"]


class DatasetError(ValueError):
    """A dataset row (or file) that makes no candidate; the message names the file, row and field."""


def _is_parquet(path):
    """Whether `path` is a Parquet file: its first bytes, ``PAR1``, whatever its name (`.pq`,
    `.PARQUET`: read as JSONL, they failed with a bare codec error), else a `.parquet` name."""
    try:
        with open(path, "rb") as f:
            if f.read(4) == b"PAR1":
                return True
    except OSError:
        pass
    return path.lower().endswith((".parquet", ".pq"))


def read_rows(path):
    """The dataset's rows as dicts: Parquet through pandas, else JSONL. Yields (row number, row)."""
    if _is_parquet(path):
        try:
            import pandas
        except ImportError:
            raise DatasetError("%s: reading Parquet needs pandas with pyarrow (pip install pandas pyarrow, as verl "
                             "installs them); or write the rows as JSONL first" % path) from None
        try:
            frame = pandas.read_parquet(path)
        except ImportError as error:
            raise DatasetError("%s: pandas cannot read Parquet here (%s): pip install pyarrow" % (path, error)) from None
        except Exception as error:  # pyarrow's ArrowInvalid and the like: a file that is not Parquet
            raise DatasetError("%s: cannot read it as Parquet (%s: %s)" % (path, type(error).__name__, error)) from None
        for k, row in enumerate(frame.to_dict("records"), start=1):
            yield k, _no_nan(_as_plain(row))
        return
    with open(path, "rb") as f:
        for k, raw in enumerate(f, start=1):
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError as error:
                raise DatasetError("%s:%d: not UTF-8 text (%s): a dataset is Parquet or JSONL rows" % (path, k, error)) from None
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except ValueError as error:
                raise DatasetError("%s:%d: not a JSON object (%s)" % (path, k, error)) from None
            if not isinstance(row, dict):
                raise DatasetError("%s:%d: a row must be a JSON object, got %s" % (path, k, type(row).__name__))
            yield k, row


#: verl's columns of a row's images and videos (RLHFDataset's data.image_key, data.video_key defaults).
_MEDIA_KEYS = ("images", "videos")


def candidates_of(rows, path="<rows>", prompt_key="prompt", max_tokens=None, seen=None):
    """The candidates of (row number, row) pairs (see the module doc); DatasetError naming the row
    and field of the first bad one, or of a prompt that repeats an earlier row's id (`seen`: the
    ids of earlier files, id → (path, row), filled in here)."""
    seen = {} if seen is None else seen
    for k, row in rows:
        where = "%s:%d" % (path, k)
        text = row.get(prompt_key)
        if not (isinstance(text, str) and text) and not (isinstance(text, list) and text):
            raise DatasetError("%s: %r must be the chat messages (a list) or a non-empty string, got %s; the prompt's "
                             "field is another? pass --prompt-key (verl's data.prompt_key)" % (where, prompt_key, json.dumps(text)[:80]))
        source = row.get("data_source")
        media = [key for key in _MEDIA_KEYS if holds(row.get(key))]
        info = _as_plain(row.get("extra_info"))
        if media and not (isinstance(info, dict) and info.get("index") is not None):
            raise DatasetError("%s: the row has %s and no extra_info.index: in training its id is a hash of the messages with "
                               "the decoded %s in them (rollout_budget.verl), which this converter does not make; give every row "
                               "an extra_info.index (verl's geo3k preprocessing does)" % (where, " and ".join(media), media[0]))
        try:
            pid = stable_prompt_id(prompt=text, data_source=source, extra_info=row.get("extra_info"))
        except (TypeError, ValueError) as error:
            raise DatasetError("%s: cannot make the prompt's id: %s" % (where, error)) from None
        if pid in seen:
            why = "the same prompt, its id a hash of it without an extra_info.index" if pid.startswith("h:") else \
                "the same data_source and extra_info.index"
            first_path, first_row = seen[pid]
            earlier = "row %d's" % first_row if first_path == path else "%s row %d's" % (first_path, first_row)
            raise DatasetError("%s: the prompt id %r is %s too (%s): a prompt must appear once; drop the repeat%s"
                               % (where, pid, earlier, why, "" if first_path == path else
                                  ", or give the files different data_source values (in training both rows would share "
                                  "one posterior, in different steps without an error)"))
        seen[pid] = (path, k)
        candidate = {"id": pid}
        candidate["messages" if isinstance(text, list) else "prompt"] = text
        reward_model = row.get("reward_model")
        truth = reward_model.get("ground_truth") if isinstance(reward_model, dict) else None
        if truth is not None:
            candidate["ground_truth"] = truth if isinstance(truth, str) else json.dumps(truth)
        if source is not None:
            candidate["group"] = str(source)
        if max_tokens is not None:
            candidate["max_tokens"] = max_tokens
        yield candidate


def _write(lines, out):
    """To stdout, or to `out` whole or not at all (a temp file beside it, renamed over it)."""
    if out == "-":
        for line in lines:
            sys.stdout.write(line)
        return 0
    folder = os.path.dirname(os.path.abspath(out))
    if not os.path.isdir(folder):
        raise DatasetError("--out %s: no folder %s to write it in" % (out, folder))
    fd, tmp = tempfile.mkstemp(prefix=".%s." % os.path.basename(out), dir=folder)
    count = 0
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            for line in lines:
                f.write(line)
                count += 1
        os.replace(tmp, out)
    except BaseException:
        os.unlink(tmp)
        raise
    return count


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m rollout_budget.dataset",
                                     description="A verl dataset (Parquet or JSONL rows) as rollout-budget's prompts JSONL.")
    parser.add_argument("dataset", nargs="+", help="verl dataset: .parquet (needs pandas and pyarrow) or .jsonl; several (verl's "
                        "data.train_files) are one prompts file, and an id in two of them is an error")
    parser.add_argument("--out", default="-", help="prompts JSONL to write (default: stdout)")
    parser.add_argument("--prompt-key", default="prompt", help="the rows' prompt field (verl's data.prompt_key; default: prompt)")
    parser.add_argument("--max-tokens", type=int, default=None, help="each prompt's max_tokens (verl's data.max_response_length)")
    args = parser.parse_args(argv)
    if args.max_tokens is not None and args.max_tokens < 1:
        parser.error("--max-tokens must be an integer >= 1, got %d" % args.max_tokens)
    try:
        for path in args.dataset:
            if not os.path.isfile(path):
                raise DatasetError("%s: no such file" % path)
        # Every row is checked before the first line is written: a bad row leaves no partial file.
        seen, rows = {}, []
        for path in args.dataset:
            rows.extend(candidates_of(read_rows(path), path, args.prompt_key, args.max_tokens, seen))
        written = _write((json.dumps(c, ensure_ascii=False) + "\n" for c in rows), args.out)
    except (DatasetError, OSError, UnicodeDecodeError) as error:
        sys.stderr.write("rollout_budget.dataset: %s\n" % error)
        return 2
    if args.out != "-":
        sys.stderr.write("rollout_budget.dataset: %d prompts from %s written to %s\n" % (written, ", ".join(args.dataset), args.out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
