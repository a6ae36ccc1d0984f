"""Lesson 07: multiple-choice calibration, ECE and MCE, binning, temperature scaling."""

import json
import math
import warnings

import pytest
import torch
from torchmetrics.functional.classification import (
    binary_calibration_error,
    multiclass_calibration_error,
)

import evalcore as ec
from conftest import make_tiny

# ------------------------------------------------------------------ ECE and MCE by hand


def test_ece_and_mce_hand_computed():
    conf, hit = [0.15, 0.25, 0.85, 0.95, 0.95], [0, 1, 1, 1, 0]
    # bins of width 0.1: [0.1, 0.2) gap 0.15; [0.2, 0.3) gap 0.75; [0.8, 0.9) gap 0.15;
    # [0.9, 1] holds 0.95 and 0.95 with accuracy 0.5: gap 0.45.
    # ECE = (0.15 + 0.75 + 0.15 + 2 * 0.45) / 5
    assert ec.expected_calibration_error(conf, hit, n_bins=10) == pytest.approx(0.39, abs=1e-12)
    assert ec.max_calibration_error(conf, hit, n_bins=10) == pytest.approx(0.75, abs=1e-12)
    # one bin: |mean confidence - accuracy| = |0.63 - 0.6|
    assert ec.expected_calibration_error(conf, hit, n_bins=1) == pytest.approx(0.03, abs=1e-12)


def test_bins_report_count_confidence_accuracy_and_empty_bins_as_none():
    bins = ec.calibration_bins([0.15, 0.25, 0.85, 0.95, 0.95], [0, 1, 1, 1, 0], n_bins=10)
    assert len(bins) == 10 and [b["count"] for b in bins] == [0, 1, 1, 0, 0, 0, 0, 0, 1, 2]
    top = bins[-1]
    assert (top["lo"], top["hi"]) == pytest.approx((0.9, 1.0))
    assert top["confidence"] == pytest.approx(0.95) and top["accuracy"] == 0.5
    assert bins[0] == {
        "lo": 0.0,
        "hi": 0.1,
        "count": 0,
        "confidence": None,
        "accuracy": None,
        "gap": None,
    }
    json.dumps(bins, allow_nan=False)  # strict JSON: no NaN for an empty bin


def test_confidence_exactly_one_falls_in_the_top_bin_not_an_extra_one():
    conf, hit = [0.95, 1.0], [1, 0]
    bins = ec.calibration_bins(conf, hit, n_bins=10)
    assert len(bins) == 10 and bins[-1]["count"] == 2
    # one bin holding both: |0.5 - 0.975| = 0.475 (the textbook value)
    assert ec.expected_calibration_error(conf, hit, n_bins=10) == pytest.approx(0.475, abs=1e-12)
    # torchmetrics (pinned 1.9.0) puts 1.0 in an (n_bins + 1)-th bin: 0.5 * 0.05 + 0.5 * 1.0
    theirs = binary_calibration_error(torch.tensor(conf), torch.tensor(hit), n_bins=10, norm="l1")
    assert float(theirs) == pytest.approx(0.525, abs=1e-6)


def test_bin_edges_are_left_closed_and_zero_is_in_the_first_bin():
    bins = ec.calibration_bins([0.0, 0.5, 0.25], [1, 1, 0], n_bins=4)
    assert [b["count"] for b in bins] == [
        1,
        1,
        1,
        0,
    ]  # 0.25 opens [0.25, 0.5), 0.5 opens [0.5, 0.75)


@pytest.mark.parametrize("n_bins", [5, 10, 15])
def test_binary_agrees_with_torchmetrics_when_no_confidence_is_one(n_bins):
    g = torch.Generator().manual_seed(n_bins)
    conf = torch.rand(300, generator=g) * 0.999
    hit = (torch.rand(300, generator=g) < conf).long()
    for norm, ours in [("l1", ec.expected_calibration_error), ("max", ec.max_calibration_error)]:
        theirs = float(binary_calibration_error(conf, hit, n_bins=n_bins, norm=norm))
        assert ours(conf, hit, n_bins=n_bins) == pytest.approx(theirs, abs=1e-5)


def test_multiclass_agrees_with_torchmetrics():
    g = torch.Generator().manual_seed(7)
    probs = torch.softmax(torch.randn(250, 4, generator=g) * 2, dim=1)
    target = torch.randint(4, (250,), generator=g)
    conf, top = probs.max(dim=1)
    hit = (top == target).long()
    for norm, ours in [("l1", ec.expected_calibration_error), ("max", ec.max_calibration_error)]:
        theirs = multiclass_calibration_error(probs, target, num_classes=4, n_bins=10, norm=norm)
        assert ours(conf, hit, n_bins=10) == pytest.approx(float(theirs), abs=1e-5)


# ------------------------------------------------------------------ equal-mass bins


def test_equal_mass_bins_hand_computed():
    conf, hit = [0.1, 0.2, 0.3, 0.4], [0, 0, 1, 1]
    bins = ec.calibration_bins(conf, hit, n_bins=2, binning="mass")
    assert [b["count"] for b in bins] == [2, 2]
    assert (bins[0]["lo"], bins[0]["hi"], bins[1]["lo"], bins[1]["hi"]) == (0.1, 0.2, 0.3, 0.4)
    # {0.1, 0.2}: accuracy 0, confidence 0.15; {0.3, 0.4}: accuracy 1, confidence 0.35
    assert ec.expected_calibration_error(conf, hit, 2, "mass") == pytest.approx(0.4, abs=1e-12)
    assert ec.max_calibration_error(conf, hit, 2, "mass") == pytest.approx(0.65, abs=1e-12)
    # equal width puts all four in [0, 0.5): |0.5 - 0.25|
    assert ec.expected_calibration_error(conf, hit, 2, "width") == pytest.approx(0.25, abs=1e-12)


def test_equal_mass_bins_share_the_remainder_and_leave_spare_bins_empty():
    counts = [
        b["count"]
        for b in ec.calibration_bins(
            [0.9, 0.1, 0.5, 0.3, 0.7, 0.2, 0.6], [1] * 7, n_bins=3, binning="mass"
        )
    ]
    assert counts == [3, 2, 2]
    few = ec.calibration_bins([0.3, 0.8], [1, 0], n_bins=4, binning="mass")
    assert [b["count"] for b in few] == [1, 1, 0, 0] and few[3]["confidence"] is None
    assert ec.expected_calibration_error([0.3, 0.8], [1, 0], 4, "mass") == pytest.approx(0.75)


# ------------------------------------------------------------------ validation


@pytest.mark.parametrize("n_bins", [0, -3, 2.5, True, "10", None])
def test_n_bins_must_be_a_positive_int(n_bins):
    with pytest.raises(ValueError, match="n_bins"):
        ec.expected_calibration_error([0.5], [1], n_bins=n_bins)


@pytest.mark.parametrize(
    "conf, hit, word",
    [
        ([], [], "confidences"),
        ([1.5], [1], "confidences"),
        ([float("nan")], [1], "confidences"),
        ([0.5, 0.6], [1], "correct"),
        ([0.5], [0.5], "correct"),
        (["x"], [1], "confidences"),
        ([0.5], None, "correct"),
    ],
)
def test_bad_confidences_or_correct_raise(conf, hit, word):
    with pytest.raises(ValueError, match=word):
        ec.calibration_bins(conf, hit)


def test_unknown_binning_raises():
    with pytest.raises(ValueError, match="binning"):
        ec.calibration_bins([0.5], [1], binning="quantile")


# ------------------------------------------------------------------ softmax and temperature


def test_choice_probabilities_and_temperature():
    p = ec.choice_probabilities([-1.0, -2.0, -4.0])
    assert sum(p) == pytest.approx(1.0) and p[0] > p[1] > p[2]
    sharp, flat = (
        ec.choice_probabilities([-1.0, -2.0], 0.5),
        ec.choice_probabilities([-1.0, -2.0], 2.0),
    )
    assert sharp[0] > p[0] > flat[0] > 0.5
    assert ec.choice_probabilities([0.0, -math.log(3)]) == pytest.approx([0.75, 0.25])
    for bad in (0, -1.0, float("inf"), float("nan"), True):
        with pytest.raises(ValueError, match="temperature"):
            ec.choice_probabilities([-1.0, -2.0], bad)
    with pytest.raises(ValueError, match="logliks"):
        ec.choice_probabilities([-1.0])


def test_fit_temperature_recovers_the_temperature_that_generated_the_labels():
    g = torch.Generator().manual_seed(3)
    logits = torch.randn(2000, 4, generator=g) * 3
    golds = torch.multinomial(torch.softmax(logits / 2.0, dim=1), 1, generator=g)[:, 0]
    with warnings.catch_warnings():
        warnings.simplefilter("error", ec.TemperatureAtGridEdge)  # an interior optimum: no warning
        t = ec.fit_temperature(logits.tolist(), golds.tolist())
    assert 1.7 < t < 2.35


def test_fit_temperature_goes_to_the_grid_ends_for_always_right_or_always_wrong():
    right = [[0.0, -1.0, -2.0]] * 5
    with pytest.warns(ec.TemperatureAtGridEdge, match="as sharp as the grid allows"):
        assert ec.fit_temperature(right, [0] * 5, low=0.1, high=10.0) == pytest.approx(0.1)
    with pytest.warns(ec.TemperatureAtGridEdge, match="uniform"):
        assert ec.fit_temperature(right, [2] * 5, low=0.1, high=10.0) == pytest.approx(10.0)


def test_fit_temperature_validates():
    with pytest.raises(ValueError, match="golds"):
        ec.fit_temperature([[0.0, -1.0]], [2])
    with pytest.raises(ValueError, match="low"):
        ec.fit_temperature([[0.0, -1.0]], [0], low=5.0, high=1.0)
    with pytest.raises(ValueError, match="steps"):
        ec.fit_temperature([[0.0, -1.0]], [0], steps=0)


# ------------------------------------------------------------------ the multiple-choice fixture


def test_multiple_choice_items_are_built_from_the_em_fixture():
    items = ec.multiple_choice_items()
    kinds = json.loads(ec.MULTIPLE_CHOICE_PATH.read_text(encoding="utf-8"))["kinds"]
    em = ec.load_fixtures()["em"]
    assert len(items) == len(em) == 20
    for it, (q, ref) in zip(items, em):
        gold = ref if isinstance(ref, str) else ref[0]
        assert it["question"] == q and it["choices"][it["gold"]] == gold
        assert len(it["choices"]) == 4 and len(set(it["choices"])) == 4
        assert all(c in kinds[it["kind"]] for c in it["choices"])  # distractors of the same kind
        others = [c for i, c in enumerate(it["choices"]) if i != it["gold"]]
        assert not any(ec.exact_match(c, ref) for c in others)  # no distractor is also right
    assert len({it["gold"] for it in items}) > 1  # the gold answer is not always in one place


def test_multiple_choice_items_are_deterministic_given_the_seed():
    assert ec.multiple_choice_items(seed=0) == ec.multiple_choice_items(seed=0)
    assert ec.multiple_choice_items(seed=0) != ec.multiple_choice_items(seed=1)
    assert all(len(it["choices"]) == 2 for it in ec.multiple_choice_items(k=2))
    for bad in (1, 5, 2.0, True):
        with pytest.raises(ValueError, match="k must"):
            ec.multiple_choice_items(k=bad)


# ------------------------------------------------------------------ teacher-forced scores


def test_completion_logliks_match_a_direct_teacher_forced_forward(tok):
    model = make_tiny(seed=4)
    prompt = tok.encode_prompt("Name a city.")
    ids = torch.tensor([prompt + tok.encode("Rome") + [tok.pad_id]])
    with torch.no_grad():
        logp = torch.log_softmax(model(ids[:, :-1]).double(), dim=-1)[0]
    per_token = [float(logp[t - 1, ids[0, t]]) for t in range(len(prompt), ids.shape[1])]
    # default: lm-evaluation-harness's rule, the answer's own tokens only
    ((ll, n),) = ec.completion_logliks(model, tok, ["Name a city."], ["Rome"])
    assert n == len("Rome") and ll == pytest.approx(sum(per_token[:-1]), abs=1e-5)
    # end_token=True: the closing PAD as well
    ((ll, n),) = ec.completion_logliks(model, tok, ["Name a city."], ["Rome"], end_token=True)
    assert n == len("Rome") + 1 and ll == pytest.approx(sum(per_token), abs=1e-5)
    with pytest.raises(ValueError, match="completions"):
        ec.completion_logliks(model, tok, ["a", "b"], ["x"])
    with pytest.raises(ValueError, match=r"completions\[1\] is empty"):
        ec.completion_logliks(model, tok, ["a", "b"], ["x", ""])
    ((ll, n),) = ec.completion_logliks(model, tok, ["a"], [""], end_token=True)
    assert n == 1 and ll < 0  # the closing token alone is still something to score


def test_choice_logliks_are_batch_independent(tok):
    model = make_tiny(seed=5)
    items = ec.multiple_choice_items()[:6]
    together = ec.choice_logliks(model, tok, items, batch_size=16)
    one_by_one = [ec.choice_logliks(model, tok, [it], batch_size=1)[0] for it in items]
    flat = [x for row in together for x in row]
    assert flat == pytest.approx([x for row in one_by_one for x in row], abs=1e-4)


def test_calibration_eval_structure_and_strict_json(tok, tmp_path):
    model = make_tiny(seed=6)
    res = ec.calibration_eval(model, tok, n_bins=5)
    assert res.name == "calibration" and len(res.per_example) == 20
    assert res.value == res.extras["ece"] and 0 <= res.value <= 1
    for r in res.per_example:
        assert sum(r["probabilities"]) == pytest.approx(1.0)
        assert r["confidence"] == max(r["probabilities"])
        assert r["score"] == pytest.approx(abs(r["confidence"] - r["correct"]))
        assert (r["prediction"] == r["gold"]) == bool(r["correct"])
    assert sum(b["count"] for b in res.extras["bins"]) == 20 and len(res.extras["bins"]) == 5
    assert res.extras["accuracy"] == pytest.approx(sum(r["correct"] for r in res.per_example) / 20)
    assert sum(r["score"] for r in res.per_example) / 20 >= res.value - 1e-12  # bins average first
    report = ec.aggregate([res], weights={"calibration": 1.0})
    assert report.score == pytest.approx(1 - res.value)
    json.loads(report.to_json(tmp_path / "r.json").read_text())


def test_a_higher_temperature_lowers_confidence(tok):
    model = make_tiny(seed=6)
    items = ec.multiple_choice_items()
    ll = ec.choice_logliks(model, tok, items)
    means = [
        ec.calibration_result(items, ll, temperature=t).extras["mean_confidence"]
        for t in (0.25, 1.0, 4.0)
    ]
    assert means[0] > means[1] > means[2] >= 0.25
    same = ec.calibration_result(items, ll, temperature=3.0)
    assert [r["correct"] for r in same.per_example] == [
        r["correct"] for r in ec.calibration_result(items, ll).per_example
    ]  # argmax unchanged


def test_answer_confidences(tok):
    model = make_tiny(seed=2)
    mean = ec.answer_confidences(model, tok, ["Name a city.", "Say hi."], ["Rome", "hi"])
    prod = ec.answer_confidences(model, tok, ["Name a city.", "Say hi."], ["Rome", "hi"], "product")
    assert all(0 < p <= m <= 1 for p, m in zip(prod, mean))
    with pytest.raises(ValueError, match="reduce"):
        ec.answer_confidences(model, tok, ["q"], ["a"], reduce="max")


# ------------------------------------------------------------------ the aggregate


def test_calibration_normalises_to_one_minus_ece_clipped():
    assert ec.normalise_metric("calibration", 0.25) == pytest.approx(0.75)
    assert ec.normalise_metric("calibration", 0.0) == 1.0
    assert ec.normalise_metric("calibration", 1.5) == 0.0
    assert ec.normalise_metric("calibration", float("nan")) == 0.0


def test_default_weights_leave_the_original_aggregate_unchanged():
    assert ec.DEFAULT_WEIGHTS["calibration"] == 0.0 and ec.DEFAULT_WEIGHTS["robustness"] == 0.0
    four = [
        ec.EvalResult("exact_match", 0.5, [{"score": 0.5}]),
        ec.EvalResult("judge", 4.0, [{"score": 4.0}]),
    ]
    extra = [
        ec.EvalResult("calibration", 0.1, [{"score": 0.1}]),
        ec.EvalResult("robustness", 0.2, [{"score": 0.2}]),
    ]
    assert ec.aggregate(four + extra).score == pytest.approx(ec.aggregate(four).score, abs=1e-15)
    assert ec.aggregate(four + extra).weights["calibration"] == 0.0


@pytest.mark.parametrize("n_bins", [3, 7, 10, 15, 100])
def test_bins_on_edges_follow_numpy_histogram_exactly(n_bins):
    np = pytest.importorskip("numpy")
    edges = np.linspace(0.0, 1.0, n_bins + 1)
    conf = sorted(set(edges.tolist() + [0.29, 0.3, 0.7, 0.1, 0.2, 1.0, 0.0, 0.999999]))
    counts = [b["count"] for b in ec.calibration_bins(conf, [1] * len(conf), n_bins)]
    assert counts == np.histogram(conf, bins=n_bins, range=(0.0, 1.0))[0].tolist()


def test_bin_edge_cases_by_hand():
    # int(0.29 * 100) is 28, but 0.29 is numpy's edge 29; 0.3 lies below numpy's 3rd edge of 10
    def by_bin(c, n):
        return next(i for i, b in enumerate(ec.calibration_bins([c], [1], n)) if b["count"])

    assert by_bin(0.29, 100) == 29
    assert by_bin(0.3, 10) == 2


# ------------------------------------------------------------------ the lesson's exercise checks


def _exercise_check(number):
    """The check of the lesson's exercise `number`: the lines after its solution, as source."""
    text = (ec.ROOT / "notebooks" / "07_calibration.py").read_text(encoding="utf-8")
    cell = text[text.index(f"\n# Exercise {number}:") :]
    cell = cell[: cell.index("\n# %%")]
    return cell[cell.index("### END SOLUTION") + len("### END SOLUTION") :]


@pytest.fixture(scope="module")
def exercise4_namespace():
    import random

    import pandas as pd

    model, tok = make_tiny(seed=3), ec.InstructionTokenizer()
    items = ec.multiple_choice_items()
    logliks = ec.choice_logliks(model, tok, items)
    rng = random.Random(0)
    devs = [rng.sample(range(20), 20)[:10] for _ in range(12)]
    return {
        "ec": ec,
        "math": math,
        "torch": torch,
        "items": items,
        "logliks": logliks,
        "cal": ec.calibration_result(items, logliks),
        "split_df": pd.DataFrame({"dev": devs}),
    }


def _answer(ns, choose):
    """ece_t, ece_gap and ece_better when each split's T is choose(dev_half, grid, ece_at)."""
    grid = [float(t) for t in torch.logspace(-2, 3, 51, dtype=torch.float64)]
    hits = [r["correct"] for r in ns["cal"].per_example]
    conf = {
        t: [
            r["confidence"]
            for r in ec.calibration_result(ns["items"], ns["logliks"], t).per_example
        ]
        for t in grid + [1.0]
    }

    def ece_at(t, idx):
        t = min(conf, key=lambda g: abs(g - t)) if t not in conf else t
        return ec.expected_calibration_error([conf[t][i] for i in idx], [hits[i] for i in idx])

    ts, gaps = [], []
    for dev in ns["split_df"]["dev"]:
        held = [i for i in range(20) if i not in dev]
        t = choose(dev, grid, ece_at)
        ts.append(t)
        gaps.append(ece_at(t, held) - min(ece_at(g, held) for g in grid))
    return {"ece_t": ts, "ece_gap": gaps, "ece_better": sum(g > 0 for g in gaps) / len(gaps)}


def test_exercise_4_check_accepts_t_chosen_by_development_ece(exercise4_namespace):
    ns = dict(exercise4_namespace)
    ns.update(_answer(ns, lambda dev, grid, ece_at: min(grid, key=lambda t: ece_at(t, dev))))
    exec(_exercise_check(4), ns)  # raises AssertionError if the check refused the right answer


@pytest.mark.parametrize("wrong", ["no fit: T = 1", "T fitted by NLL on the development half"])
def test_exercise_4_check_refuses_t_not_chosen_by_development_ece(exercise4_namespace, wrong):
    ns = dict(exercise4_namespace)
    if wrong.startswith("no fit"):
        choose = lambda dev, grid, ece_at: 1.0  # noqa: E731
    else:

        def choose(dev, grid, ece_at):
            golds = [ns["items"][i]["gold"] for i in dev]
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", ec.TemperatureAtGridEdge)
                return ec.fit_temperature([ns["logliks"][i] for i in dev], golds)

    ns.update(_answer(ns, choose))
    with pytest.raises(AssertionError, match="expected"):
        exec(_exercise_check(4), ns)


def test_exercise_3_check_states_no_bound_and_refuses_another_floor():
    check = _exercise_check(3)
    assert "0.11 <" not in check and "< 0.17" not in check  # no bounds that give the answer away
    import random
    import statistics

    gen, rng = torch.Generator().manual_seed(0), random.Random(0)
    early = [0.3 + 0.02 * i for i in range(20)]  # stand-in confidences of an "early" checkpoint

    def floor(confs, reps=200):
        out = []
        for _ in range(reps):
            c = torch.tensor(rng.choices(confs, k=20), dtype=torch.float64)
            hit = (torch.rand(20, generator=gen, dtype=torch.float64) < c).long()
            out.append(ec.expected_calibration_error(c.tolist(), hit.tolist()))
        return out

    base = {
        "ec": ec,
        "math": math,
        "torch": torch,
        "statistics": statistics,
        "early": ec.EvalResult("calibration", 0.0, [{"confidence": c} for c in early]),
    }
    right = floor(early)
    ns = {**base, "early_floor": right, "early_95": statistics.quantiles(right, n=20)[-1]}
    exec(check, ns)
    sharp = floor([0.99] * 20)  # a calibrated predictor with other confidences: another floor
    ns = {**base, "early_floor": sharp, "early_95": statistics.quantiles(sharp, n=20)[-1]}
    with pytest.raises(AssertionError, match="within Monte Carlo error"):
        exec(check, ns)
