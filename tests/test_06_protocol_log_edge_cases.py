"""Lesson 06's protocol log, edge cases (issue 19): an empty log file, the hash chain linking each
line to the one before it, and what counts as exposed."""

import json

import pytest

import evalcore as ec

RUBRIC = ec.Rubric(
    {"source_support": 2, "format": 1, "clarity": 1}, ("source_support", "format"), 0.75
)
RULE = {"model": None, "wrapper": "source_rule"}


def test_an_empty_log_file_is_an_empty_log(tmp_path):
    path = tmp_path / "log.jsonl"
    path.touch()  # created ahead of time, as `touch` or an editor leaves it
    log = ec.ProtocolLog(path)
    assert log.verify() == [] and log.exposed() == []
    entry = log.append("note", {"text": "first"})
    assert (entry["index"], entry["prev_sha256"]) == (0, None)
    assert path.read_text(encoding="utf-8").count("\n") == 1
    assert log.verify() == [entry]


def test_a_protocol_can_be_frozen_into_an_empty_log_file(tmp_path):
    path = tmp_path / "log.jsonl"
    path.touch()
    log = ec.ProtocolLog(path)
    frozen = ec.freeze_protocol(log, RULE, RUBRIC, "anchor", ["r1", "r2"], 0.95)
    assert log.protocol(frozen["protocol_sha256"]) == frozen


def test_each_entry_is_chained_to_the_one_just_before(tmp_path):
    log = ec.ProtocolLog(tmp_path / "log.jsonl")
    entries = [log.append("note", {"text": t}) for t in ("a", "b", "c")]
    assert [e["index"] for e in entries] == [0, 1, 2]
    assert [e["prev_sha256"] for e in entries] == [
        None,
        entries[0]["entry_sha256"],
        entries[1]["entry_sha256"],
    ]
    assert log.verify() == entries


@pytest.mark.parametrize(
    "keep, bad_line",
    [
        ([0, 2], 2),  # the middle line deleted: each line still hashes to itself
        ([1, 0, 2], 1),  # two lines swapped
        ([1, 2], 1),  # the first line deleted
    ],
)
def test_a_deleted_or_reordered_line_breaks_the_chain(tmp_path, keep, bad_line):
    path = tmp_path / "log.jsonl"
    log = ec.ProtocolLog(path)
    for t in ("a", "b", "c"):
        log.append("note", {"text": t})
    lines = path.read_text(encoding="utf-8").splitlines()
    path.write_text("".join(lines[i] + "\n" for i in keep), encoding="utf-8")
    with pytest.raises(ValueError, match=f"line {bad_line} was changed"):
        log.verify()


def test_frozen_cases_are_not_exposed_until_revealed(tmp_path):
    log = ec.ProtocolLog(tmp_path / "log.jsonl")
    ec.freeze_protocol(log, RULE, RUBRIC, "anchor", ["r1", "r2"], 0.95)
    assert log.exposed() == []
    log.append("exposure", {"cases": ["r2"]})
    assert log.exposed() == ["r2"]


def test_a_nan_in_an_entry_is_written_as_strict_json(tmp_path):
    path = tmp_path / "log.jsonl"
    log = ec.ProtocolLog(path)
    log.append("note", {"value": float("nan"), "values": [1.0, float("inf")]})

    def refuse(constant):
        raise AssertionError(f"non-standard JSON constant {constant}")

    (entry,) = [json.loads(line, parse_constant=refuse) for line in path.read_text().splitlines()]
    assert (entry["value"], entry["values"]) == (None, [1.0, None])
    assert log.verify() == [entry]
