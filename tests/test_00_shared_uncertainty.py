"""Part 0: every number with its interval: bootstrap_ci against scipy, a cluster
case computed by hand, McNemar's exact test against scipy's binomial test, paired_difference."""

import json
import math

import pytest
import torch

import evalcore as ec
from conftest import strict_loads

scipy_stats = pytest.importorskip("scipy.stats")
np = pytest.importorskip("numpy")


def test_bootstrap_ci_agrees_with_scipy_percentile_bootstrap():
    data = np.random.default_rng(0).uniform(size=40)  # continuous, so quantiles do not jump
    R = 20000
    ours = ec.bootstrap_ci(data.tolist(), n_resamples=R, seed=1)
    ref = scipy_stats.bootstrap(
        (data,), np.mean, method="percentile", n_resamples=R, confidence_level=0.95, random_state=2
    ).confidence_interval
    # The two use different random draws. The bootstrap mean has sd ~ 0.29 / sqrt(40) = 0.046;
    # a 2.5% quantile estimated from R draws has Monte Carlo sd ~ sqrt(.025 * .975 / R) / f(q)
    # = 0.0011 / (0.058 / 0.046) = 0.0009, so two runs differ by ~0.0012 sd: 0.006 is 5 sd.
    assert ours[0] == pytest.approx(ref.low, abs=0.006)
    assert ours[1] == pytest.approx(ref.high, abs=0.006)


def test_bootstrap_ci_is_deterministic_given_the_seed_and_contains_the_mean():
    scores = [0.1, 0.9, 0.4, 0.4, 0.7, 0.2, 1.0, 0.0]
    a, b = ec.bootstrap_ci(scores, seed=3), ec.bootstrap_ci(scores, seed=3)
    assert a == b and a != ec.bootstrap_ci(scores, seed=4)
    assert a[0] < sum(scores) / len(scores) < a[1]


def test_cluster_bootstrap_by_hand():
    # Every group has mean 0.5, so resampling whole groups can never move the mean: the interval is
    # the point 0.5. Resampling the six examples one by one gives a wide interval instead.
    scores = [1, 0, 1, 0, 1, 1, 0, 0]
    groups = ["a", "a", "b", "b", "c", "c", "c", "c"]
    assert ec.bootstrap_ci(scores, groups=groups) == (0.5, 0.5)
    low, high = ec.bootstrap_ci(scores)
    assert low < 0.3 and high > 0.7


def test_bootstrap_ci_of_a_ratio_of_sums():
    # perplexity: resample texts, recompute exp(total NLL / total tokens), never a mean of ratios
    rows = [[10.0, 5], [50.0, 20], [30.0, 10], [12.0, 8]]
    ratio = lambda v, w: torch.exp((w * v[:, 0]).sum(-1) / (w * v[:, 1]).sum(-1))  # noqa: E731
    low, high = ec.bootstrap_ci(rows, statistic=ratio, n_resamples=4000)
    point = math.exp(102 / 43)
    assert low < point < high
    assert math.exp(min(r[0] / r[1] for r in rows)) <= low
    assert high <= math.exp(max(r[0] / r[1] for r in rows))


@pytest.mark.parametrize("scores", [[], [0.7]])
def test_bootstrap_ci_is_none_below_two_examples(scores):
    assert ec.bootstrap_ci(scores) is None
    assert ec.bootstrap_ci([1, 0, 1], groups=["a", "a", "a"]) is None  # one group


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(scores=[1, float("nan")]), "finite"),
        (dict(scores=[1, "x"]), "scores"),
        (dict(scores=[1, 0], groups=["a"]), "groups must be a list of 2"),
        (dict(scores=[1, 0], n_resamples=0), "n_resamples"),
        (dict(scores=[1, 0], confidence=95), "confidence"),
    ],
)
def test_bootstrap_ci_rejects_bad_input(kwargs, match):
    with pytest.raises(ValueError, match=match):
        ec.bootstrap_ci(**kwargs)


@pytest.mark.parametrize("broke, rescued", [(6, 0), (3, 1), (0, 0), (5, 5), (12, 3), (0, 9)])
def test_mcnemar_exact_agrees_with_a_binomial_test(broke, rescued):
    n = broke + rescued
    expected = 1.0 if n == 0 else scipy_stats.binomtest(broke, n, 0.5).pvalue
    assert ec.mcnemar_exact(broke, rescued) == pytest.approx(expected, rel=1e-12)


def test_mcnemar_exact_by_hand_and_bad_input():
    assert ec.mcnemar_exact(6, 0) == pytest.approx(2 / 64)  # 6 broke, none rescued: p = 0.031
    with pytest.raises(ValueError, match="broke"):
        ec.mcnemar_exact(-1, 2)
    with pytest.raises(ValueError, match="rescued"):
        ec.mcnemar_exact(1, 2.0)


def _result(name, scores, key="instruction"):
    return ec.EvalResult(name, 0.0, [{key: f"q{i}", "score": s} for i, s in enumerate(scores)])


def test_paired_difference_counts_broke_and_rescued():
    clean = _result("exact_match", [1, 1, 1, 0, 0, 1])
    perturbed = _result("exact_match", [0, 1, 0, 1, 0, 0])
    out = ec.paired_difference(clean, perturbed)
    assert out["diff"] == pytest.approx(-2 / 6)
    assert (out["broke"], out["rescued"], out["n"], out["dropped"]) == (3, 1, 6, 0)
    assert out["p_mcnemar"] == pytest.approx(0.625)
    assert out["ci95"][0] < out["diff"] < out["ci95"][1]


# Newcombe (1998), "Improved confidence intervals for the difference between binomial proportions
# based on paired data", Statistics in Medicine 17: 2635-2650, method 10. The paper's text was not
# reachable here; these are published results of the method as quoted, with their sources, in the
# tests of the R package ratesci (tests/testthat/test3.R, which checks moverpairci against them):
# (a, b, c, d) = pairs with the event in both, in the first only, in the second only, in neither.
NEWCOMBE_WORKED = [
    ((20, 12, 2, 16), (0.0562, 0.3292), 4),  # Newcombe 1998's own example, his method 10 result
    ((1, 1, 7, 12), (-0.507, -0.026), 3),  # Fagerland, Lydersen & Laake 2014, Table V
    ((7, 25, 2, 68), (0.133, 0.318), 3),  # Chang et al. 2024 (their method 10 figures)
    ((8, 3, 1, 2), (-0.1574, 0.4136), 4),  # Tang, Li & Tang 2010
]


@pytest.mark.parametrize("table, published, digits", NEWCOMBE_WORKED)
def test_newcombe_paired_interval_reproduces_published_examples(table, published, digits):
    low, high = ec.newcombe_paired_interval(*table)
    assert (round(low, digits), round(high, digits)) == published


def _scipy_wilson(k, n):
    ci = scipy_stats.binomtest(k, n).proportion_ci(confidence_level=0.95, method="wilson")
    return ci.low, ci.high


def _newcombe_by_hand(a, b, c, d, corrected=True):
    """Method 10 written out again from the paper's formula, Wilson limits from scipy."""
    n = a + b + c + d
    p1, p2 = (a + b) / n, (a + c) / n
    l1, u1 = _scipy_wilson(a + b, n)
    l2, u2 = _scipy_wilson(a + c, n)
    product = (a + b) * (c + d) * (a + c) * (b + d)
    num = a * d - b * c
    if corrected and num > 0:
        num = max(num - n / 2, 0)
    phi = 0.0 if product == 0 else num / math.sqrt(product)
    below = math.sqrt((p1 - l1) ** 2 - 2 * phi * (p1 - l1) * (u2 - p2) + (u2 - p2) ** 2)
    above = math.sqrt((u1 - p1) ** 2 - 2 * phi * (u1 - p1) * (p2 - l2) + (p2 - l2) ** 2)
    return p1 - p2 - below, p1 - p2 + above


@pytest.mark.parametrize(
    "table", [(0, 6, 0, 14), (3, 1, 2, 4), (10, 0, 0, 10), (0, 0, 0, 5), (5, 5, 5, 5), (2, 9, 1, 0)]
)
def test_newcombe_paired_interval_matches_the_formula_by_hand(table):
    ours = ec.newcombe_paired_interval(*table)
    assert ours == pytest.approx(_newcombe_by_hand(*table), abs=1e-12)
    a, b, c, d = table  # swapping the two conditions mirrors the interval
    low, high = ec.newcombe_paired_interval(a, c, b, d)
    assert (low, high) == pytest.approx((-ours[1], -ours[0]), abs=1e-12)
    assert -1 <= ours[0] <= (b - c) / sum(table) <= ours[1] <= 1


def test_newcombe_correction_shrinks_a_positive_correlation_by_half_n():
    # a d - b c = 18 - 2 = 16 > n / 2 = 10: phi uses 6, not 16 (the uncorrected is narrower)
    table = (9, 1, 2, 8)
    assert ec.newcombe_paired_interval(*table) == pytest.approx(_newcombe_by_hand(*table))
    narrower = _newcombe_by_hand(*table, corrected=False)
    assert (
        narrower[1] - narrower[0]
        < ec.newcombe_paired_interval(*table)[1] - ec.newcombe_paired_interval(*table)[0]
    )


@pytest.mark.parametrize(
    "args, match",
    [((-1, 0, 0, 1), "both"), ((0, 1.5, 0, 1), "first_only"), ((0, 0, 0, 0), "one pair")],
)
def test_newcombe_paired_interval_rejects_bad_counts(args, match):
    with pytest.raises(ValueError, match=match):
        ec.newcombe_paired_interval(*args)


def test_paired_difference_of_0_1_scores_uses_newcombe_and_names_it():
    # a 6-0 split on 20 questions, lesson 05's exact match: right in neither 14, in b only 6
    a = _result("exact_match", [0] * 20)
    b = _result("exact_match", [1] * 6 + [0] * 14)
    out = ec.paired_difference(a, b)
    assert out["ci_method"].startswith("Newcombe paired score interval")
    assert out["ci95"] == pytest.approx(_newcombe_by_hand(0, 6, 0, 14), abs=1e-12)
    assert out["ci95"][0] < 0.1  # the bootstrap's [0.1, 0.5] claimed more than p = 0.031 allows
    assert out["diff"] == pytest.approx(0.3) and out["p_mcnemar"] == pytest.approx(2 / 64)


def test_paired_difference_of_other_scores_is_a_named_bootstrap():
    a, b = _result("token_f1", [0.2, 0.5, 0.9, 0.1]), _result("token_f1", [0.4, 0.5, 1.0, 0.6])
    out = ec.paired_difference(a, b, n_resamples=500)
    assert out["ci_method"] == "paired percentile bootstrap over 4 examples, 500 resamples"
    expected = ec.bootstrap_ci([0.2, 0.0, 0.1, 0.5], n_resamples=500)
    assert out["ci95"] == pytest.approx(list(expected), abs=1e-12)
    assert "broke" not in out


def test_paired_difference_drops_unscored_examples_from_both():
    a = _result("judge", [3, None, 4, 2])
    b = _result("judge", [4, 5, None, 1])
    out = ec.paired_difference(a, b)
    assert (out["n"], out["dropped"]) == (2, 2)
    assert out["diff"] == pytest.approx(((4 - 3) + (1 - 2)) / 2)
    assert "broke" not in out  # not 0/1 scores


def test_paired_difference_of_perplexities_is_a_difference_of_ratios_of_sums(
    tok, random_model, trained_model
):
    texts = ["The capital of France is Paris.", "Bees make honey.", "Owls hunt at night."]
    a = ec.perplexity_eval(random_model, tok, texts)
    b = ec.perplexity_eval(trained_model, tok, texts)
    out = ec.paired_difference(a, b)
    assert out["diff"] == pytest.approx(b.value - a.value, rel=1e-9)
    assert out["n"] == 3 and out["ci95"][0] <= out["diff"] <= out["ci95"][1]


@pytest.mark.parametrize(
    "b",
    [
        _result("exact_match", [1, 0, 1]),
        _result("exact_match", [1, 0], key="question"),
        _result("token_f1", [1, 0]),
    ],
)
def test_paired_difference_refuses_results_on_other_examples(b):
    a = _result("exact_match", [1, 0])
    with pytest.raises(ValueError):
        ec.paired_difference(a, b)


# ----------------------------------------------------------------------------------------------
# Every eval and the report carry an interval
# ----------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def evals(trained_model):
    tok, fx = ec.InstructionTokenizer(), ec.load_fixtures()
    items = ec.multiple_choice_items()
    return {
        "perplexity": ec.perplexity_eval(trained_model, tok, fx["lm"], max_len=128),
        "exact_match": ec.exact_match_eval(trained_model, tok, fx["em"], max_new_tokens=8),
        "token_f1": ec.token_f1_eval(trained_model, tok, fx["f1"], max_new_tokens=8),
        "judge": ec.judge_eval(trained_model, tok, fx["judge"], max_new_tokens=8),
        "calibration": ec.calibration_eval(trained_model, tok, items),
        "robustness": ec.robustness_eval(
            trained_model, tok, fx["em"][:6], perturbations=["uppercase"], max_new_tokens=8
        ),
        "multiple_choice": ec.choice_accuracy(items, ec.choice_logliks(trained_model, tok, items)),
    }


@pytest.mark.parametrize(
    "name",
    [
        "perplexity",
        "exact_match",
        "token_f1",
        "judge",
        "calibration",
        "robustness",
        "multiple_choice",
    ],
)
def test_every_eval_carries_a_json_safe_interval_around_its_value(evals, name):
    result = evals[name]
    low, high = result.extras["ci95"]
    assert low <= result.value <= high, (low, result.value, high)
    assert result.extras["n"] >= 2 and result.extras["ci_method"]
    assert strict_loads(json.dumps(ec._json_safe(result.extras), allow_nan=False))["ci95"] == [
        low,
        high,
    ]


def test_binary_evals_use_wilson_and_the_others_a_bootstrap(evals):
    em = evals["exact_match"]
    k = int(sum(r["score"] for r in em.per_example))
    assert em.extras["ci_method"] == "wilson"
    assert em.extras["ci95"] == list(ec.wilson_interval(k, 20))
    assert evals["token_f1"].extras["ci_method"].startswith("percentile bootstrap")


def test_perplexity_interval_resamples_texts_as_a_ratio_of_sums(evals):
    result = evals["perplexity"]
    rows = [[r["nll"], r["n_tokens"]] for r in result.per_example]
    ratio = lambda v, w: torch.exp((w * v[:, 0]).sum(-1) / (w * v[:, 1]).sum(-1))  # noqa: E731
    assert result.extras["ci95"] == list(ec.bootstrap_ci(rows, statistic=ratio))


def test_calibration_interval_matches_a_loop_over_resamples(evals):
    result = evals["calibration"]
    conf = [r["confidence"] for r in result.per_example]
    hits = [r["correct"] for r in result.per_example]
    weights = ec.bootstrap_weights(len(conf), n_resamples=50, seed=5)
    inputs, statistic, _ = ec._resampling_inputs(result)
    fast = statistic(torch.tensor(inputs, dtype=torch.float64), weights)
    for w, got in zip(weights, fast):  # a resample as a list of drawn items, ECE by evalcore
        drawn = [i for i, c in enumerate(w.tolist()) for _ in range(int(c))]
        ece = ec.expected_calibration_error([conf[i] for i in drawn], [hits[i] for i in drawn])
        assert float(got) == pytest.approx(ece, abs=1e-12)


def test_undefined_intervals_are_none_never_nan(tok):
    one = ec.perplexity_eval(lambda ids: torch.zeros(*ids.shape, tok.vocab_size), tok, ["abc"])
    assert one.extras["ci95"] is None and one.extras["n"] == 1
    assert "undefined" in one.extras["ci_method"]


def test_the_report_carries_the_aggregate_interval_and_shows_every_interval(evals):
    core = [evals[n] for n in ("perplexity", "exact_match", "token_f1", "judge")]
    report = ec.aggregate(core)
    low, high = report.ci95
    assert low <= report.score <= high
    d = report.to_dict()
    assert d["aggregate_ci95"] == [low, high] and d["schema_version"] == 3
    assert all(d["evals"][r.name]["ci95"] == r.extras["ci95"] for r in core)
    table = report.table()
    assert f"95% CI [{low:.4f}, {high:.4f}]" in table
    for r in core:
        assert f"[{r.extras['ci95'][0]:.4g}, {r.extras['ci95'][1]:.4g}]" in table


@pytest.mark.parametrize("n", [1, 5, 20, 101])
def test_wilson_interval_is_exact_at_the_ends(n):
    assert ec.wilson_interval(0, n)[0] == 0.0 and ec.wilson_interval(n, n)[1] == 1.0


def test_resampled_values_are_paired_by_seed(evals):
    em = evals["exact_match"]
    flipped = ec.EvalResult(
        "exact_match", 1 - em.value, [{**r, "score": 1 - r["score"]} for r in em.per_example]
    )
    a, b = ec.resampled_values(em, 500, seed=9), ec.resampled_values(flipped, 500, seed=9)
    assert torch.allclose(a + b, torch.ones(500, dtype=torch.float64))  # the same draws for both


def test_paired_aggregate_difference_by_hand(evals):
    core = [evals[n] for n in ("perplexity", "exact_match", "token_f1", "judge")]
    same = ec.paired_aggregate_difference(core, core)
    assert same["diff"] == 0.0 and same["ci95"] == [
        0.0,
        0.0,
    ]  # paired: identical models never differ
    better = [ec.EvalResult(r.name, r.value, r.per_example, r.extras) for r in core]
    better[1] = ec.EvalResult(
        "exact_match", 1.0, [{**x, "score": 1.0} for x in core[1].per_example]
    )
    out = ec.paired_aggregate_difference(core, better)
    assert out["diff"] == pytest.approx(0.3 * (1.0 - core[1].value), abs=1e-12)
    # Every resample gives the same difference here, but its sums run in another order than the
    # point estimate's, by the CPU's vector kernels: under ATEN_CPU_CAPABILITY=default and
    # MKL_ENABLE_INSTRUCTIONS=AVX2 the interval came out 0.30000000000000004 against 0.3, one
    # float64 ulp (issue 26). 1e-15 is about 20 ulps: rounding, not a wrong interval.
    assert out["ci95"][0] - 1e-15 <= out["diff"] <= out["ci95"][1] + 1e-15


def test_paired_aggregate_difference_refuses_other_examples(evals):
    core = [evals[n] for n in ("perplexity", "exact_match", "token_f1", "judge")]
    other = list(core)
    other[2] = ec.EvalResult("token_f1", 0.5, [{"instruction": "elsewhere", "score": 0.5}] * 20)
    with pytest.raises(ValueError, match="same examples"):
        ec.paired_aggregate_difference(core, other)


# ----------------------------------------------------------------------------------------------
# The aggregate resamples facts, shared across evals (issue 18 A.2)
# ----------------------------------------------------------------------------------------------


def _scored_records(scores, facts=None, key="instruction"):
    records = [{key: f"q{i}", "score": s} for i, s in enumerate(scores)]
    for r, f in zip(records, facts or []):
        r["fact"] = f
    return records


def _binary(name, scores, facts=None):
    return ec.EvalResult(name, sum(scores) / len(scores), _scored_records(scores, facts))


SCORES = [1, 0, 1, 1, 0, 0, 1, 0, 1, 1, 0, 1, 0, 0, 1, 1, 0, 1, 0, 1]
FACTS = [f"fact{i}" for i in range(20)]


def test_evals_asking_about_the_same_facts_move_together():
    # Two evals with identical scores on the same facts are one eval twice: their average varies
    # exactly as one eval does under the cluster bootstrap over facts.
    a, b = _binary("exact_match", SCORES, FACTS), _binary("token_f1", SCORES, FACTS)
    joint = ec.aggregate_interval([a, b], {"exact_match": 0.5, "token_f1": 0.5})
    assert joint == list(ec.bootstrap_ci(SCORES, groups=FACTS))


def test_evals_on_unrelated_examples_are_resampled_independently():
    # Without fact ids each eval's examples are drawn on their own: the average of two equal but
    # independent evals has sd / sqrt(2), so its interval is about 0.71 times as wide as one
    # eval's. Two evals sharing their draws (the same seed) would give exactly one eval's width.
    a, b = _binary("exact_match", SCORES), _binary("token_f1", SCORES)
    two = ec.aggregate_interval([a, b], {"exact_match": 0.5, "token_f1": 0.5}, n_resamples=4000)
    one = ec.bootstrap_ci(SCORES, n_resamples=4000)
    ratio = (two[1] - two[0]) / (one[1] - one[0])
    assert 0.6 < ratio < 0.82, ratio
    draws = ec.joint_resampled_values([a, b], 4000)
    assert (
        abs(float(torch.corrcoef(torch.stack([draws["exact_match"], draws["token_f1"]]))[0, 1]))
        < 0.1
    )


def test_shared_facts_widen_the_aggregate_interval_and_the_method_says_so():
    other = [1 - s if i % 5 == 0 else s for i, s in enumerate(SCORES)]  # mostly the same answers
    with_facts = [_binary("exact_match", SCORES, FACTS), _binary("token_f1", other, FACTS)]
    without = [_binary("exact_match", SCORES), _binary("token_f1", other)]
    report, plain = ec.aggregate(with_facts), ec.aggregate(without)
    assert report.score == plain.score
    assert report.ci95[1] - report.ci95[0] > 1.15 * (plain.ci95[1] - plain.ci95[0])
    assert report.ci_method.startswith("percentile bootstrap, 20 facts drawn jointly")
    assert plain.ci_method.startswith("percentile bootstrap, no fact ids")
    assert report.to_dict()["aggregate_ci_method"] == report.ci_method


def test_joint_resampling_counts_a_drawn_fact_in_every_eval_that_asks_about_it():
    # eval a asks about facts x, y; eval b about y, z. On every resample a's value is computed
    # from the same draw counts of y that b's is.
    a = _binary("exact_match", [1, 0], ["x", "y"])
    b = _binary("token_f1", [0, 1], ["y", "z"])
    draws = ec.joint_resampled_values([a, b], 300, seed=4)
    weights = ec.bootstrap_weights(4, ["x", "y", "y", "z"], n_resamples=300, seed=4)  # a then b
    expect_a = weights[:, 0] / (weights[:, 0] + weights[:, 1])  # score 1 on x only
    expect_b = weights[:, 3] / (weights[:, 2] + weights[:, 3])  # score 1 on z only
    both = torch.stack([draws["exact_match"], expect_a, draws["token_f1"], expect_b])
    assert torch.equal(both[0].isnan(), both[1].isnan())  # a resample without x or y: undefined
    keep = both.isfinite().all(0)
    assert torch.allclose(both[0, keep], both[1, keep]) and torch.allclose(
        both[2, keep], both[3, keep]
    )


def test_aggregate_interval_leaves_out_resamples_without_an_eval():
    a = _binary("exact_match", [1, 0], ["x", "y"])
    b = _binary("token_f1", [0, 1], ["z", "w"])
    low, high = ec.aggregate_interval([a, b], {"exact_match": 0.5, "token_f1": 0.5}, 500)
    assert 0.0 <= low <= high <= 1.0  # finite: the resamples missing an eval were left out


def test_finite_percentiles_leave_out_the_resamples_marked_nan():
    # 40 resamples: 0.0, 0.1, ..., 3.9, and 10 NaN (an eval without an example in them). The 2.5%
    # and 97.5% quantiles of the 40 finite ones, linearly interpolated: 0.0975 and 3.8025.
    finite = torch.arange(40, dtype=torch.float64) / 10
    stats = torch.cat([finite, torch.full((10,), math.nan, dtype=torch.float64)])
    assert ec._finite_percentiles(stats, 0.95) == pytest.approx([0.0975, 3.8025], abs=1e-12)
    assert ec._finite_percentiles(torch.tensor([1.0, math.nan, math.nan]), 0.95) is None


def test_resamples_without_an_eval_are_left_out_not_scored_zero():
    # Two evals right on every example, on four facts: every resample on which each eval has an
    # example scores 1; a resample that draws neither of an eval's facts has no value for it.
    a = _binary("exact_match", [1, 1], ["x", "y"])
    b = _binary("token_f1", [1, 1], ["z", "w"])
    assert ec.aggregate_interval([a, b], {"exact_match": 0.5, "token_f1": 0.5}) == [1.0, 1.0]


def test_paired_resamples_without_an_eval_are_left_out_not_scored_zero():
    # a wrong everywhere, b right everywhere: on every resample that draws each eval, b - a is 1;
    # one that draws neither of an eval's facts has no difference for it (not 0 - 0 = 0).
    a = [_binary("exact_match", [0, 0], ["x", "y"]), _binary("token_f1", [0, 0], ["z", "w"])]
    b = [_binary("exact_match", [1, 1], ["x", "y"]), _binary("token_f1", [1, 1], ["z", "w"])]
    out = ec.paired_aggregate_difference(a, b, weights={"exact_match": 0.5, "token_f1": 0.5})
    assert out["ci95"] == [1.0, 1.0]


def test_core_evals_attach_each_examples_fact(evals):
    fx = ec.load_fixtures()
    for name, key in (("perplexity", "lm"), ("exact_match", "em")):
        result = ec._with_facts(evals[name], fx["facts"][key])
        assert [r["fact"] for r in result.per_example] == fx["facts"][key]
    with pytest.raises(ValueError, match="fact ids"):
        ec._with_facts(evals["token_f1"], ["x"])


def test_paired_aggregate_difference_refuses_different_fact_ids():
    a = [_binary("exact_match", SCORES, FACTS), _binary("token_f1", SCORES, FACTS)]
    b = [_binary("exact_match", SCORES), _binary("token_f1", SCORES, FACTS)]
    with pytest.raises(ValueError, match="fact ids"):
        ec.paired_aggregate_difference(a, b, weights={"exact_match": 0.5, "token_f1": 0.5})
    out = ec.paired_aggregate_difference(a, a, weights={"exact_match": 0.5, "token_f1": 0.5})
    assert out["ci95"] == [0.0, 0.0] and "facts drawn jointly" in out["ci_method"]
