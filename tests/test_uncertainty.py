"""Intervals and paired differences (issue 10, first step): bootstrap_ci against scipy, a cluster
case computed by hand, McNemar's exact test against scipy's binomial test, paired_difference."""

import math

import pytest
import torch

import evalcore as ec

scipy_stats = pytest.importorskip("scipy.stats")
np = pytest.importorskip("numpy")


def test_bootstrap_ci_agrees_with_scipy_percentile_bootstrap():
    data = np.random.default_rng(0).uniform(size=40)  # continuous, so quantiles do not jump
    R = 20000
    ours = ec.bootstrap_ci(data.tolist(), n_resamples=R, seed=1)
    ref = scipy_stats.bootstrap((data,), np.mean, method="percentile", n_resamples=R,
                                confidence_level=0.95, random_state=2).confidence_interval
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


@pytest.mark.parametrize("kwargs, match", [
    (dict(scores=[1, float("nan")]), "finite"),
    (dict(scores=[1, "x"]), "scores"),
    (dict(scores=[1, 0], groups=["a"]), "groups must be a list of 2"),
    (dict(scores=[1, 0], n_resamples=0), "n_resamples"),
    (dict(scores=[1, 0], confidence=95), "confidence"),
])
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


def test_paired_difference_drops_unscored_examples_from_both():
    a = _result("judge", [3, None, 4, 2])
    b = _result("judge", [4, 5, None, 1])
    out = ec.paired_difference(a, b)
    assert (out["n"], out["dropped"]) == (2, 2)
    assert out["diff"] == pytest.approx(((4 - 3) + (1 - 2)) / 2)
    assert "broke" not in out  # not 0/1 scores


def test_paired_difference_of_perplexities_is_a_difference_of_ratios_of_sums(tok, random_model,
                                                                             trained_model):
    texts = ["The capital of France is Paris.", "Bees make honey.", "Owls hunt at night."]
    a = ec.perplexity_eval(random_model, tok, texts)
    b = ec.perplexity_eval(trained_model, tok, texts)
    out = ec.paired_difference(a, b)
    assert out["diff"] == pytest.approx(b.value - a.value, rel=1e-9)
    assert out["n"] == 3 and out["ci95"][0] <= out["diff"] <= out["ci95"][1]


@pytest.mark.parametrize("b", [_result("exact_match", [1, 0, 1]),
                               _result("exact_match", [1, 0], key="question"),
                               _result("token_f1", [1, 0])])
def test_paired_difference_refuses_results_on_other_examples(b):
    a = _result("exact_match", [1, 0])
    with pytest.raises(ValueError):
        ec.paired_difference(a, b)
