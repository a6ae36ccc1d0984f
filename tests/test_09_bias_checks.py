"""Lesson 09: judge bias checks. Verbosity (does padding move the score?), a judge's pass/fail
agreement with exact match and token F1, and two judges' agreement with each other."""

import random

import pytest
from sklearn.metrics import cohen_kappa_score, confusion_matrix

import evalcore as ec

ITEMS = [
    ("Capital of France?", "Paris is the capital of France.", "Paris is the capital of France."),
    ("Capital of Japan?", "Tokyo", "Tokyo is the capital of Japan."),
    ("Legs of a spider?", "A spider has 8 legs.", "A spider has eight legs."),
    ("Red planet?", "Venus", "Mars is the red planet."),
    ("Bees make?", "Bees make honey.", "Bees make honey."),
]


def content_only_judge(instruction, prediction, reference):
    """Length blind: looks only at whether the reference's first word is in the answer."""
    return (5 if reference.split()[0].lower() in prediction.lower() else 1), "first word"


def length_loving_judge(instruction, prediction, reference):
    """BIASED ON PURPOSE: content_only_judge's score, plus one point for a long answer."""
    score, why = content_only_judge(instruction, prediction, reference)
    return min(5, score + (len(prediction) > 40)), why


# ----------------------------------------------------------------------------------------------
# verbosity
# ----------------------------------------------------------------------------------------------


def test_a_length_blind_judge_does_not_move():
    out = ec.verbosity_check(content_only_judge, ITEMS, times=3)
    assert out["mean_shift"] == 0 and out["same"] == 5 and out["up"] == out["down"] == 0
    assert out["scored"] == out["total"] == 5 and out["unscored"] == []


def test_a_length_loving_judge_is_caught():
    out = ec.verbosity_check(length_loving_judge, ITEMS)
    assert out["mean_shift"] > 0 and out["up"] >= 1


def test_the_mock_judge_never_rewards_padding():
    out = ec.verbosity_check(ec.mock_judge, ITEMS)
    # the filler's words are not in any reference, so token F1's precision can only fall
    assert out["up"] == 0 and out["down"] >= 1 and out["mean_shift"] < 0
    rows = {r["index"]: r for r in out["rows"]}
    assert rows[0]["score"] == 5 and rows[0]["padded_score"] < 5  # padding breaks exact match
    assert [r["shift"] for r in out["rows"]] == [
        r["padded_score"] - r["score"] for r in out["rows"]
    ]


def test_verbosity_check_pads_with_the_filler_given():
    seen = []

    def judge(q, p, r):
        seen.append(p)
        return 3, "ok"

    ec.verbosity_check(judge, ITEMS[:1], filler=" Indeed.", times=2)
    assert seen == [ITEMS[0][1], ITEMS[0][1] + " Indeed. Indeed."]


def test_verbosity_check_skips_what_the_judge_could_not_score():
    def flaky(q, p, r):
        if q.startswith("Red"):
            raise ec.JudgeUnavailable("HTTP 503; gave up after 3 retries")
        return ec.mock_judge(q, p, r)

    out = ec.verbosity_check(flaky, ITEMS)
    assert out["scored"] == 4 and out["total"] == 5
    assert out["unscored"] == [{"index": 3, "reason": "HTTP 503; gave up after 3 retries"}]
    with pytest.raises(ValueError, match="none of the 5"):
        ec.verbosity_check(
            lambda q, p, r: (_ for _ in ()).throw(ec.JudgeUnavailable("down")), ITEMS
        )


def test_verbosity_check_takes_a_judge_result(tok, monkeypatch):
    monkeypatch.setattr(
        ec, "generate", lambda m, t, qs, max_new_tokens=48, **_: [p for _, p, _ in ITEMS]
    )
    result = ec.judge_eval(None, tok, [(q, r) for q, _, r in ITEMS])
    assert ec.verbosity_check(ec.mock_judge, result) == ec.verbosity_check(ec.mock_judge, ITEMS)


@pytest.mark.parametrize("items", [[], None, [("q", "p")], "abc"])
def test_verbosity_check_rejects_bad_items(items):
    with pytest.raises(ValueError, match="items"):
        ec.verbosity_check(ec.mock_judge, items)


def test_verbosity_check_rejects_a_bad_times():
    with pytest.raises(ValueError, match="times"):
        ec.verbosity_check(ec.mock_judge, ITEMS, times=0)


def test_a_broken_judge_still_raises_naming_the_example():
    with pytest.raises(ValueError, match=r"example 0"):
        ec.verbosity_check(lambda q, p, r: (9, "too high"), ITEMS)


# ----------------------------------------------------------------------------------------------
# agreement: kappa against scikit-learn, the confusion table, edge cases
# ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("seed", range(8))
def test_kappa_and_confusion_match_scikit_learn(seed):
    rng = random.Random(seed)
    n = rng.randint(5, 40)
    a = [rng.random() < 0.6 for _ in range(n)]
    b = [x if rng.random() < 0.7 else not x for x in a]
    out = ec.pass_fail_agreement(a, b)
    if len(set(a) | set(b)) > 1:
        assert out["kappa"] == pytest.approx(cohen_kappa_score(a, b), abs=1e-12)
    assert out["confusion"] == confusion_matrix(a, b, labels=[False, True]).tolist()
    assert out["agreement"] == pytest.approx(sum(x == y for x, y in zip(a, b)) / n)
    assert out["n"] == n


def test_kappa_by_hand():
    # 10 items: both pass 4, both fail 3, a-only 2, b-only 1 -> p_o 0.7;
    # p_a = 0.6, p_b = 0.5 -> p_e = 0.3 + 0.2 = 0.5 -> kappa 0.4
    a = [1] * 4 + [0] * 3 + [1] * 2 + [0]
    b = [1] * 4 + [0] * 3 + [0] * 2 + [1]
    out = ec.pass_fail_agreement(a, b)
    assert out["kappa"] == pytest.approx(0.4) and out["agreement"] == pytest.approx(0.7)
    assert out["confusion"] == [[3, 1], [2, 4]]


def test_kappa_is_none_when_undefined():
    assert ec.pass_fail_agreement([True] * 4, [True] * 4)["kappa"] is None  # chance agreement is 1
    assert ec.pass_fail_agreement([True] * 4, [False] * 4)["kappa"] == 0.0


def judge_result(judge_fn):
    records = []
    for q, p, r in ITEMS:
        score, why = judge_fn(q, p, r)
        records.append(
            {"instruction": q, "prediction": p, "reference": r, "score": score, "rationale": why}
        )
    return ec.EvalResult("judge", sum(x["score"] for x in records) / len(records), records)


def test_the_mock_judge_at_5_is_exact_match():
    # score 5 <=> exact match, by construction: kappa 1 at pass_score=5
    out = ec.judge_metric_agreement(judge_result(ec.mock_judge), pass_score=5)
    assert out["exact_match"]["kappa"] == 1.0 and out["exact_match"]["agreement"] == 1.0


def test_judge_metric_agreement_by_hand():
    # mock scores: 5 (EM), 2 (F1 2/7), 4 (F1 0.8: "8" is not "eight"), 1, 5 -> pass at 4: 1,0,1,0,1
    result = judge_result(ec.mock_judge)
    assert [r["score"] for r in result.per_example] == [5, 2, 4, 1, 5]
    out = ec.judge_metric_agreement(result, pass_score=4, f1_pass=0.5)
    assert out["exact_match"]["confusion"] == [[2, 0], [1, 2]]  # judge passes "8 legs", EM does not
    assert out["exact_match"]["kappa"] == pytest.approx(
        cohen_kappa_score([1, 0, 1, 0, 1], [1, 0, 0, 0, 1])
    )
    assert out["token_f1"]["confusion"] == [[2, 0], [0, 3]]
    assert out["token_f1"]["kappa"] == 1.0


def test_judge_metric_agreement_skips_unscored_examples():
    result = judge_result(ec.mock_judge)
    result.per_example[1]["score"] = None
    assert ec.judge_metric_agreement(result)["exact_match"]["n"] == 4


def test_two_judges():
    a, b = judge_result(ec.mock_judge), judge_result(length_loving_judge)
    same = ec.judge_pair_agreement(a, a)
    assert same["kappa"] == 1.0 and same["same_score"] == 1.0 and same["n"] == same["total"] == 5
    out = ec.judge_pair_agreement(a, b)
    sa, sb = [r["score"] for r in a.per_example], [r["score"] for r in b.per_example]
    assert out["same_score"] == sum(x == y for x, y in zip(sa, sb)) / 5 < 1
    assert out["kappa"] == pytest.approx(
        cohen_kappa_score([x >= 4 for x in sa], [y >= 4 for y in sb])
    )
    b.per_example[0]["score"] = None
    assert ec.judge_pair_agreement(a, b)["n"] == 4


def test_two_judges_must_see_the_same_predictions():
    a, b = judge_result(ec.mock_judge), judge_result(ec.mock_judge)
    b.per_example[2]["prediction"] = "something else"
    with pytest.raises(ValueError, match="same predictions"):
        ec.judge_pair_agreement(a, b)


@pytest.mark.parametrize("pass_score", [0, 6, True, "4"])
def test_pass_score_is_checked(pass_score):
    with pytest.raises(ValueError, match="pass_score"):
        ec.judge_metric_agreement(judge_result(ec.mock_judge), pass_score=pass_score)
