"""The judge's verdict cache, edge cases (issue 19): a cached entry is served only if it is a
verdict the judge could have given, an integer score from 1 to 5 and a text rationale; anything
else (a hand-edited or damaged file) is a miss, and the judge is asked again."""

import json

import pytest

import evalcore as ec

ITEM = ("Capital of France?", "Paris", "Paris")  # the mock judge gives 5: an exact match


@pytest.fixture(scope="module")
def server():
    with ec.JudgeServer().start() as srv:
        yield srv


@pytest.mark.parametrize(
    "entry",
    [
        {"score": 3.5, "rationale": "half"},  # not an integer
        {"score": True, "rationale": "a bool"},
        {"score": 6, "rationale": "out of range"},
        {"score": 4, "rationale": None},
    ],
)
def test_a_cached_entry_that_is_no_verdict_is_a_miss(server, tmp_path, entry):
    judge = ec.HTTPJudge(server.url, server.model, max_retries=0, cache_dir=tmp_path)
    assert judge(*ITEM) == ec.mock_judge(*ITEM)
    (path,) = tmp_path.iterdir()
    assert json.loads(path.read_text(encoding="utf-8"))["score"] == 5
    path.write_text(json.dumps(entry), encoding="utf-8")
    assert judge(*ITEM) == ec.mock_judge(*ITEM)  # asked again, not served the entry
    assert judge.stats["cache_hits"] == 0 and judge.stats["requests"] == 2


def test_a_valid_cached_entry_is_served_without_a_request(server, tmp_path):
    judge = ec.HTTPJudge(server.url, server.model, max_retries=0, cache_dir=tmp_path)
    judge(*ITEM)
    (path,) = tmp_path.iterdir()
    path.write_text(json.dumps({"score": 2, "rationale": "edited"}), encoding="utf-8")
    assert judge(*ITEM) == (2, "edited")
    assert judge.stats["cache_hits"] == 1 and judge.stats["requests"] == 1
