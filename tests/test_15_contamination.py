"""Lesson 15 (notebooks/15_contamination.ipynb): n-gram overlap, membership scores and their AUC."""

import codecs
import contextlib
import io
import json
import math
import random
import statistics
import zlib
from collections import Counter

import nbformat
import numpy as np
import pytest
import torch
from scipy.stats import norm, rankdata
from sklearn.metrics import roc_auc_score, roc_curve

import evalcore as ec

# --- the data side: normalisation and n-gram overlap ----------------------------------------------


@pytest.mark.parametrize(
    "text, expected",
    [
        ("Don't STOP!", "dont stop"),
        ("Paris.It is", "parisit is"),  # punctuation is deleted, not turned into a space
        ("x = (a+b)/2;", "x  ab2"),
        ("Éclair À", "Éclair À"),  # the Janitor lowercases ASCII letters only
        ("two\nlines\tand  tabs", "two\nlines\tand  tabs"),
    ],
)
def test_normalise_ngram_follows_the_harness_janitor(text, expected):
    assert ec.normalise_ngram(text) == expected


def test_normalise_ngram_refuses_a_non_string():
    with pytest.raises(ValueError, match="text must be a str"):
        ec.normalise_ngram(b"bytes")


def test_ngram_overlap_by_hand():
    corpus = ["A cat sat on the mat today.", "Dogs bark."]
    [rec] = ec.ngram_overlap(["The cat sat on the mat"], corpus, n=3)
    # test 3-grams: the cat sat / cat sat on / sat on the / on the mat; the first is not in corpus
    assert (rec["n_words"], rec["n_ngrams"], rec["n_found"]) == (6, 4, 3)
    assert rec["share"] == 0.75 and rec["contaminated"] is True
    assert rec["found"] == ["cat sat on", "sat on the", "on the mat"]
    [palm] = ec.ngram_overlap(["The cat sat on the mat"], corpus, n=3, min_share=0.7)
    assert palm["contaminated"] is True
    [strict] = ec.ngram_overlap(["The cat sat on the mat"], corpus, n=3, min_share=0.8)
    assert strict["contaminated"] is False and strict["share"] == 0.75


def test_ngram_overlap_counts_repeated_ngrams_where_they_occur():
    [rec] = ec.ngram_overlap(["a b a b a c"], ["x a b y"], n=2)
    # 2-grams by position: ab ba ab ba ac; "ab" (twice) is in the corpus
    assert (rec["n_ngrams"], rec["n_found"], rec["share"]) == (5, 2, 0.4)
    assert rec["found"] == ["a b"]


def test_ngram_overlap_never_crosses_the_end_of_a_text():
    [rec] = ec.ngram_overlap(["the cat sat"], ["x the cat", "sat y"], n=3)
    assert rec["n_found"] == 0 and rec["contaminated"] is False
    [joined] = ec.ngram_overlap(["the cat sat"], ["x the cat sat y"], n=3)
    assert joined["contaminated"] is True


def test_a_text_shorter_than_n_is_not_checkable():
    recs = ec.ngram_overlap(["too short", "long enough here"], ["too short", "long enough"], n=3)
    assert recs[0]["n_ngrams"] == 0 and recs[0]["share"] is None
    assert recs[0]["contaminated"] is None  # neither clean nor contaminated: not checked
    assert recs[1]["share"] == 0.0 and recs[1]["contaminated"] is False


def naive_overlap(test_texts, corpus_texts, n):
    """The exact definition, with Python sets of word tuples."""
    corpus = set()
    for t in corpus_texts:
        w = ec.normalise_ngram(t).split()
        corpus |= {tuple(w[i : i + n]) for i in range(len(w) - n + 1)}
    out = []
    for t in test_texts:
        w = ec.normalise_ngram(t).split()
        grams = [tuple(w[i : i + n]) for i in range(len(w) - n + 1)]
        out.append(sum(g in corpus for g in grams) / len(grams) if grams else None)
    return out


@pytest.mark.parametrize("n", [1, 2, 4, 8, 13])
def test_ngram_overlap_agrees_with_an_exact_set_of_tuples(n):
    rng = random.Random(n)
    vocab = [f"w{i}" for i in range(12)]  # a small vocabulary: many partial matches

    def text(k):
        return " ".join(rng.choice(vocab) for _ in range(k))

    corpus = [text(rng.randint(0, 60)) for _ in range(40)]
    tests = [text(rng.randint(0, 30)) for _ in range(60)] + corpus[:5]
    shares = [r["share"] for r in ec.ngram_overlap(tests, corpus, n=n)]
    assert shares == naive_overlap(tests, corpus, n)


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(test_texts=[]), "test_texts must be a non-empty list"),
        (dict(corpus_texts=["a", 3]), r"corpus_texts\[1\] must be a str"),
        (dict(n=0), "n must be an int >= 1"),
        (dict(n=2.0), "n must be an int >= 1"),
        (dict(min_share=0), r"min_share must be a finite number in \(0, 1\]"),
        (dict(min_share=1.5), r"min_share must be a finite number in \(0, 1\]"),
        (dict(min_share=math.nan), "min_share must be a finite number"),
    ],
)
def test_ngram_overlap_refuses_bad_arguments(kwargs, match):
    args = dict(test_texts=["a b c"], corpus_texts=["a b c"], n=2) | kwargs
    with pytest.raises(ValueError, match=match):
        ec.ngram_overlap(**args)


@pytest.mark.parametrize(
    "lengths, expected",
    [
        ([20] * 20, 13),  # the cap
        ([10] * 20, 10),
        ([3] * 20, 8),  # the floor
        (list(range(10, 30)), 10),  # numpy's 5th percentile of 10..29 is 10.95: rounded down
        (list(range(1, 101)), 8),  # 5.95, raised to the floor
        ([12] * 19 + [100], 12),
        ([2] + [12] * 19, 11),  # 5th percentile 2 + 0.95 * 10 = 11.5
    ],
)
def test_gpt3_ngram_n_is_the_5th_percentile_length_between_8_and_13(lengths, expected):
    texts = [" ".join(["w"] * k) for k in lengths]
    assert ec.gpt3_ngram_n(texts) == expected
    assert ec.GPT3_N_RANGE == (8, 13)


def test_gpt3_ngram_n_on_the_courses_texts():
    fx = ec.load_fixtures()
    questions = {name: [q for q, _ in fx[name]] for name in ("em", "f1", "judge")}
    # short questions: GPT-3's rule checks them at its floor, 8, not at 13
    assert {name: ec.gpt3_ngram_n(qs) for name, qs in questions.items()} == dict.fromkeys(
        questions, 8
    )
    famous = [t["text"] for t in ec.load_contamination() if t["group"] == "famous"]
    assert ec.gpt3_ngram_n(famous) == 13  # 44 words and more: the cap
    assert ec.gpt3_ngram_n(["Don't stop, don't!"] * 3) == 8  # words counted after normalising
    with pytest.raises(ValueError, match="texts must be a non-empty list"):
        ec.gpt3_ngram_n([])


def test_lesson_and_readme_state_gpt3s_rule_as_the_paper_does(root):
    """GPT-3's Appendix C sets n per benchmark (8 to 13); 13 is the cap and lm-eval's default."""
    lesson = (root / "notebooks" / "15_contamination.py").read_text(encoding="utf-8")
    readme = (root / "README.md").read_text(encoding="utf-8")
    for text in (lesson, readme):
        flat = " ".join(text.replace("#", " ").split())
        for wrong in (
            "GPT-3 paper used 13-grams",
            "GPT-3 rule (13-grams)",
            "GPT-3's 13-grams",
            "GPT-3 rule (any shared 13-gram)",
        ):
            assert wrong not in flat, wrong
        assert "5th percentile" in flat
        assert "non-synthetic" in flat, "GPT-3's floor of 8 is for its non-synthetic benchmarks"


# --- the model side: the three membership scores ------------------------------------------------


def test_mean_token_loss_and_zlib_ratio_by_hand():
    assert ec.mean_token_loss([1.0, 2.0, 3.0]) == 2.0
    assert ec.mean_token_loss(torch.tensor([0.5])) == 0.5
    # zlib.compress(b"abc") is 11 bytes: a 2-byte header, 5 bytes of deflate, a 4-byte checksum
    assert len(zlib.compress(b"abc")) == 11
    assert ec.zlib_ratio("abc", [1.0, 2.0, 3.0]) == 2.0 / 11
    # a repetitive text compresses well, so the same loss weighs more per compressed byte
    assert ec.zlib_ratio("ab" * 50, [1.0]) > ec.zlib_ratio("the quick brown fox jumps", [1.0])
    # UTF-8 bytes: "é" is two of them
    assert ec.zlib_ratio("é", [1.0]) == 1.0 / len(zlib.compress("é".encode()))


def test_min_k_prob_by_hand():
    losses = [0.1, 2.0, 0.5, 3.0, 1.0]  # log-probabilities -0.1, -2, -0.5, -3, -1
    assert ec.min_k_prob(losses, k=20) == -3.0  # floor(5 * 0.2) = 1 token: the least likely
    assert ec.min_k_prob(losses, k=40) == -2.5  # 2 tokens: -3 and -2
    assert ec.min_k_prob(losses, k=59.9) == -2.5  # floor(2.995) = 2
    assert ec.min_k_prob(losses, k=60) == pytest.approx(-2.0, abs=1e-15)  # -3, -2, -1
    assert ec.min_k_prob(losses, k=100) == pytest.approx(-ec.mean_token_loss(losses), abs=1e-15)
    with pytest.raises(ValueError, match="k=10% of 5 tokens is no token at all"):
        ec.min_k_prob(losses, k=10)


def test_min_k_count_is_exact_where_float_products_round_down():
    assert int(100 * 0.57) == 56  # the float product a direct int() would floor
    assert ec.min_k_count(100, 57) == 57 and ec.min_k_count(100, 0.57) == 0
    assert ec.min_k_count(29, 20) == 5 and ec.min_k_count(30, 20) == 6
    for bad in (0, -5, 101, math.inf, True):
        with pytest.raises(ValueError, match="k must be"):
            ec.min_k_count(10, bad)
    with pytest.raises(ValueError, match="n_tokens must be"):
        ec.min_k_count(0, 20)


@pytest.mark.parametrize("ratio", [0.05, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6])
def test_min_k_prob_is_the_negative_of_detect_pretrain_codes_score(ratio):
    """detect-pretrain-code (swj0419/detect-pretrain-code, src/run.py) computes, from the token
    log-probabilities all_prob: -np.mean(np.sort(all_prob)[:int(len(all_prob) * ratio)])."""
    rng = np.random.default_rng(int(ratio * 100))
    for n_tokens in (20, 37, 64):
        losses = rng.exponential(2.0, n_tokens)
        all_prob = list(-losses)
        k_length = int(len(all_prob) * ratio)
        theirs = -np.mean(np.sort(all_prob)[:k_length]).item()
        assert ec.min_k_count(n_tokens, ratio * 100) == k_length
        assert ec.min_k_prob(losses.tolist(), k=ratio * 100) == pytest.approx(-theirs, rel=1e-12)


@pytest.mark.parametrize(
    "bad", [[], [1.0, math.nan], [math.inf], [-0.1], "abc", [[1.0], [2.0, 3.0]]]
)
def test_scores_refuse_bad_token_losses(bad):
    for fn in (ec.mean_token_loss, lambda x: ec.zlib_ratio("text", x), ec.min_k_prob):
        with pytest.raises(ValueError, match="token_nll must be"):
            fn(bad)


# --- separating members from non-members: AUC, TPR at low FPR, intervals --------------------------


def test_membership_auc_by_hand():
    # pairs (member, non-member): 3>1, 3>2, 2>1, 2=2 -> (1 + 1 + 1 + 0.5) / 4
    r = ec.membership_auc([3.0, 2.0], [1.0, 2.0])
    assert r["auc"] == 0.875
    assert (r["n_members"], r["n_nonmembers"]) == (2, 2)
    # a loss-like score: lower means member, so the same numbers separate the other way
    assert ec.membership_auc([3.0, 2.0], [1.0, 2.0], higher_is_member=False)["auc"] == 0.125


def test_membership_auc_agrees_with_scikit_learn():
    rng = np.random.default_rng(0)
    for m, n in [(5, 7), (30, 20), (60, 20)]:
        members = rng.integers(0, 6, m).astype(float)  # few values: many ties
        nonmembers = rng.integers(0, 5, n).astype(float)
        labels = [1] * m + [0] * n
        expected = roc_auc_score(labels, np.concatenate([members, nonmembers]))
        got = ec.membership_auc(members.tolist(), nonmembers.tolist(), n_resamples=10)["auc"]
        assert got == pytest.approx(expected, abs=1e-12)


def test_weighted_auc_agrees_with_scikit_learns_sample_weight():
    """One bootstrap resample is the AUC with each text weighted by how often it was drawn."""
    rng = np.random.default_rng(1)
    members, nonmembers = rng.normal(1, 1, 9), rng.normal(0, 1, 6)
    w_m = ec.bootstrap_weights(9, n_resamples=5, seed=3)
    w_n = ec.bootstrap_weights(6, n_resamples=5, seed=4)
    wins = ec._pair_wins(torch.tensor(members), torch.tensor(nonmembers))
    aucs = ec._weighted_auc(wins, w_m, w_n)
    for r in range(5):
        expected = roc_auc_score(
            [1] * 9 + [0] * 6,
            np.concatenate([members, nonmembers]),
            sample_weight=np.concatenate([w_m[r].numpy(), w_n[r].numpy()]),
        )
        assert aucs[r].item() == pytest.approx(expected, abs=1e-12)


def sklearn_tpr_at_fpr(members, nonmembers, fpr, drop_intermediate=False):
    """detect-pretrain-code's src/eval.py reads TPR at low FPR off scikit-learn's ROC curve as
    tpr[np.where(fpr < .05)[0][-1]] (there with roc_curve's default drop_intermediate=True)."""
    fprs, tprs, _ = roc_curve(
        [1] * len(members) + [0] * len(nonmembers),
        [*members, *nonmembers],
        drop_intermediate=drop_intermediate,
    )
    return tprs[np.where(fprs < fpr)[0][-1]]


def test_tpr_at_fpr_by_hand():
    members, nonmembers = [5.0, 4.0, 3.0, 1.0], [2.0, 0.0]
    # FPR below 0.5 means no non-member flagged: threshold above 2, so 5, 4, 3 are flagged
    assert ec.tpr_at_fpr(members, nonmembers, fpr=0.5) == 0.75
    # below 0.51, FPR 1/2 is allowed: threshold 1 flags non-member 2 and every member
    assert ec.tpr_at_fpr(members, nonmembers, fpr=0.51) == 1.0
    assert ec.tpr_at_fpr(members, nonmembers, fpr=0.5) == 0.75  # strictly below: 1/2 is not
    # a member tied with the highest non-member cannot be flagged without it
    assert ec.tpr_at_fpr([2.0, 3.0], [2.0, 0.0], fpr=0.1) == 0.5
    assert ec.tpr_at_fpr([1.0], [2.0], fpr=0.5) == 0.0


def test_tpr_at_fpr_agrees_with_the_roc_curve_reading():
    rng = np.random.default_rng(2)
    for trial in range(20):
        m, n = rng.integers(2, 40, 2)
        members = rng.normal(0.8, 1, m).round(1)  # rounded: ties across groups
        nonmembers = rng.normal(0, 1, n).round(1)
        for fpr in (0.01, 0.05, 0.1, 0.3):
            expected = sklearn_tpr_at_fpr(members, nonmembers, fpr)
            got = ec.tpr_at_fpr(members.tolist(), nonmembers.tolist(), fpr=fpr)
            assert got == pytest.approx(expected, abs=1e-12), (trial, fpr)
            flipped = ec.tpr_at_fpr((-members).tolist(), (-nonmembers).tolist(), fpr, False)
            assert flipped == pytest.approx(expected, abs=1e-12)


def test_tpr_at_fpr_keeps_the_points_scikit_learn_drops_by_default():
    """With ties across the groups the ROC curve has diagonal stretches; roc_curve's default
    drop_intermediate=True drops the points in the middle of one, and the reading above then
    falls back to an earlier point. Here thresholds 3, 2, 1 give (FPR, TPR) (0, 1/3), (1/3, 2/3),
    (2/3, 1): the middle one, the best below FPR 1/2, lies on a straight line and is dropped."""
    members, nonmembers = [3.0, 2.0, 1.0], [2.0, 1.0, 0.0]
    assert ec.tpr_at_fpr(members, nonmembers, fpr=0.5) == pytest.approx(2 / 3, abs=1e-15)
    assert sklearn_tpr_at_fpr(members, nonmembers, 0.5) == pytest.approx(2 / 3, abs=1e-15)
    assert sklearn_tpr_at_fpr(members, nonmembers, 0.5, drop_intermediate=True) == 1 / 3


def test_membership_auc_intervals():
    rng = np.random.default_rng(3)
    members, nonmembers = rng.normal(1, 1, 25).tolist(), rng.normal(0, 1, 20).tolist()
    r = ec.membership_auc(members, nonmembers)
    assert r["ci95"][0] < r["auc"] < r["ci95"][1]
    assert r["ci95_delong"][0] < r["auc"] < r["ci95_delong"][1]
    assert r["n_flagged"] == round(r["tpr_at_fpr"] * 25) and r["resampled"] == "texts"
    assert "tpr_ci95" not in r  # a threshold set by the few highest non-members has no usable one
    assert r == ec.membership_auc(members, nonmembers)  # seeded: the same every time
    assert r["ci95"] != ec.membership_auc(members, nonmembers, seed=1)["ci95"]
    # the null: random labels give AUCs around 1/2, and this separation is far outside them
    assert r["null95"][0] < 0.5 < r["null95"][1] and r["auc"] > r["null95"][1]
    assert r["p_value"] < 0.01
    one = ec.membership_auc([1.0], [0.0, 0.5])
    assert one["auc"] == 1.0 and one["ci95"] is None and one["ci95_delong"] is None


def test_membership_auc_permutation_p_value_matches_the_exact_one():
    """Three members above three non-members: of the C(6, 3) = 20 equally likely labellings, one
    separates as well, so the exact one-sided p-value is 1/20."""
    r = ec.membership_auc([4.0, 5.0, 6.0], [1.0, 2.0, 3.0], n_resamples=20000)
    assert r["auc"] == 1.0 and r["ci95"] == [1.0, 1.0]  # no resample can break a perfect split
    assert abs(r["p_value"] - 1 / math.comb(6, 3)) < 0.005
    # no separation at all: the observed AUC is the null's centre
    flat = ec.membership_auc([1.0, 2.0, 3.0], [1.0, 2.0, 3.0], n_resamples=20000)
    assert flat["auc"] == 0.5 and flat["p_value"] > 0.5


def test_membership_auc_with_groups_draws_whole_groups_from_one_pool():
    """Each resample draws groups (a group's members and non-members together): every resample's
    AUC is the pair credit with each text weighted by its group's draws (the weighted AUC that
    test_weighted_auc_agrees_with_scikit_learns_sample_weight checks against scikit-learn)."""
    rng = np.random.default_rng(5)
    members, nonmembers = rng.normal(1, 1, 9).tolist(), rng.normal(0, 1, 5).tolist()
    g_m, g_n = list("aabbccdde"), list("abcdf")  # "e" has members only, "f" non-members only
    groups = dict(groups_members=g_m, groups_nonmembers=g_n)
    r = ec.membership_auc(members, nonmembers, n_resamples=300, **groups)
    assert r["resampled"] == "6 groups"
    assert r["ci95_delong"] == ec.delong_auc_interval(members, nonmembers, **groups)  # clustered
    assert r["auc"] == ec.membership_auc(members, nonmembers)["auc"]  # the point estimate
    w = ec.bootstrap_weights(14, g_m + g_n, n_resamples=300, seed=ec.SEED)
    credit = (np.subtract.outer(members, nonmembers) > 0).astype(float)  # no ties here
    aucs = [
        row[:9] @ credit @ row[9:] / (row[:9].sum() * row[9:].sum())
        for row in w.numpy()
        if row[:9].sum() and row[9:].sum()  # a draw with both sides
    ]
    assert r["ci95"] == pytest.approx(np.quantile(aucs, [0.025, 0.975]).tolist(), abs=1e-12)
    # groups on one side only: the other side's texts are each a group of their own
    one_side = ec.membership_auc(members, nonmembers, groups_members=g_m)
    assert one_side["resampled"] == "10 groups"


def test_grouped_resamples_with_one_side_empty_are_left_out():
    # two groups, members only in one, non-members only in the other: half the resamples draw
    # one group twice and have no pair at all; the rest all give the observed AUC
    r = ec.membership_auc([2.0, 3.0], [1.0], groups_members=["x", "x"], groups_nonmembers=["y"])
    assert r["auc"] == 1.0 and r["ci95"] == [1.0, 1.0]
    lone = ec.membership_auc([2.0, 3.0], [1.0], groups_members=["x", "x"], groups_nonmembers=["x"])
    assert lone["ci95"] is None  # a single group: nothing to resample


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(groups_members=["a"]), "groups_members must be a list of 2 labels"),
        (dict(groups_nonmembers="ab"), "groups_nonmembers must be a list of 2 labels"),
        (dict(groups_members=["a", 1.5]), "groups_members must hold str or int labels, got 1.5"),
        (dict(groups_members=[True, "a"]), "groups_members must hold str or int labels"),
    ],
)
def test_membership_auc_refuses_bad_groups(kwargs, match):
    with pytest.raises(ValueError, match=match):
        ec.membership_auc([1.0, 2.0], [0.0, 1.0], **kwargs)


# --- DeLong's interval on the logit scale ---------------------------------------------------------


def test_delong_interval_by_hand():
    # pair credits [[1, 1], [1, 1/2]]: AUC 7/8; each member's mean credit (1, 3/4), each
    # non-member's (1, 3/4): both sample variances 1/32, so Var = 1/64 + 1/64 = 1/32
    low, high = ec.delong_auc_interval([3.0, 2.0], [1.0, 2.0])
    half = 1.959963984540054 * math.sqrt(1 / 32) / (7 / 8 * 1 / 8)
    expit = lambda t: 1 / (1 + math.exp(-t))  # noqa: E731
    assert low == pytest.approx(expit(math.log(7) - half), abs=1e-12)  # 0.2276
    assert high == pytest.approx(expit(math.log(7) + half), abs=1e-12)  # 0.9940
    # the same scores read as losses: the AUC is 1/8 and the interval its mirror image
    flipped = ec.delong_auc_interval([3.0, 2.0], [1.0, 2.0], higher_is_member=False)
    assert flipped == pytest.approx([1 - high, 1 - low], abs=1e-12)


def midrank_delong_variance(x, y):
    """DeLong's variance through midranks (Sun and Xu 2014, "Fast implementation of DeLong's
    algorithm"), with scipy's rankdata: an independent route to the same structural components."""
    m, n = len(x), len(y)
    pooled = rankdata(np.concatenate([x, y]))
    v10 = (pooled[:m] - rankdata(x)) / n  # each member's share of non-members below it
    v01 = 1 - (pooled[m:] - rankdata(y)) / m  # each non-member's share of members above it
    return np.var(v10, ddof=1) / m + np.var(v01, ddof=1) / n


def test_delong_interval_agrees_with_the_midrank_algorithm():
    rng = np.random.default_rng(6)
    for m, n in [(5, 7), (12, 12), (30, 20)]:
        x = rng.integers(0, 8, m).astype(float) + 1.0  # ties within and across the groups
        y = rng.integers(0, 6, n).astype(float)
        auc = roc_auc_score([1] * m + [0] * n, np.concatenate([x, y]))
        se = math.sqrt(midrank_delong_variance(x, y))
        logit, half = math.log(auc / (1 - auc)), norm.ppf(0.975) * se / (auc * (1 - auc))
        expected = [1 / (1 + math.exp(-(logit - half))), 1 / (1 + math.exp(-(logit + half)))]
        assert ec.delong_auc_interval(x.tolist(), y.tolist()) == pytest.approx(expected, abs=1e-12)
        r = ec.membership_auc(x.tolist(), y.tolist(), n_resamples=10)
        assert r["ci95_delong"] == pytest.approx(expected, abs=1e-12)
        z90 = norm.ppf(0.95) * se / (auc * (1 - auc))
        narrow = ec.delong_auc_interval(x.tolist(), y.tolist(), confidence=0.9)
        assert narrow == pytest.approx(
            [1 / (1 + math.exp(-(logit - z90))), 1 / (1 + math.exp(-(logit + z90)))], abs=1e-12
        )


def test_clustered_delong_variance_by_hand():
    """Obuchowski's clustered variance on three matched pairs (a, b, c), members [3, 1, 2.5] and
    non-members [2, 0, 2.8]: AUC 6/9 = 2/3. Per member, the share of non-members beaten: 1, 1/3,
    2/3; per non-member, the share of members above it: 2/3, 1, 1/3; minus the AUC, per cluster:
    (1/3, 0), (-1/3, 1/3), (0, -1/3). With K = 3 clusters and M = N = 3:
    S10 = S01 = 3/2 (1/9 + 1/9) = 1/3, S11 = 3/2 (-1/9) = -1/6, and
    var = S10 / M**2 + S01 / N**2 + 2 S11 / (M N) = (1/3 + 1/3 - 1/3) / 9 = 1/27."""
    members, nonmembers, pairs = [3.0, 1.0, 2.5], [2.0, 0.0, 2.8], ["a", "b", "c"]
    wins = ec._pair_wins(
        torch.tensor(members, dtype=torch.float64), torch.tensor(nonmembers, dtype=torch.float64)
    )
    assert ec._clustered_auc_variance(wins, pairs, pairs) == pytest.approx(1 / 27, abs=1e-15)
    z = statistics.NormalDist().inv_cdf(0.975)
    half = z * math.sqrt(1 / 27) / (2 / 3 * 1 / 3)
    expected = [1 / (1 + math.exp(half - math.log(2))), 1 / (1 + math.exp(-half - math.log(2)))]
    got = ec.delong_auc_interval(members, nonmembers, groups_members=pairs, groups_nonmembers=pairs)
    assert got == pytest.approx(expected, abs=1e-12)
    # the same texts unpaired: DeLong's variance (1/3 (1/9 + 1/9) / 3 twice = 2/27), wider
    assert ec._delong_logit_interval(wins, 0.95)[0] < got[0]


def test_clustered_delong_on_matched_pairs_is_delong_plus_the_pairs_covariance():
    """One member and one non-member per cluster: var = var(V10)/n + var(V01)/n + 2 cov/n."""
    rng = np.random.default_rng(12)
    for _ in range(5):
        shared = rng.normal(0, 1, 12)  # a pair's common difficulty
        x, y = shared + rng.normal(1, 1, 12), shared + rng.normal(0, 1, 12)
        wins = ec._pair_wins(torch.tensor(x), torch.tensor(y))
        v10, v01 = wins.mean(1).numpy(), wins.mean(0).numpy()
        expected = (v10.var(ddof=1) + v01.var(ddof=1) + 2 * np.cov(v10, v01)[0, 1]) / 12
        pairs = list(range(12))
        assert ec._clustered_auc_variance(wins, pairs, pairs) == pytest.approx(expected, rel=1e-12)
        r = ec.membership_auc(
            x.tolist(), y.tolist(), n_resamples=50, groups_members=pairs, groups_nonmembers=pairs
        )
        assert r["ci95_delong"] == ec.delong_auc_interval(
            x.tolist(), y.tolist(), groups_members=pairs, groups_nonmembers=pairs
        )
    with pytest.raises(ValueError, match="groups_members must be a list of 2 labels"):
        ec.delong_auc_interval([1.0, 2.0], [0.0, 1.5], groups_members=["a"])


def test_delong_interval_is_none_where_undefined():
    assert ec.delong_auc_interval([2.0, 3.0], [0.0, 1.0]) is None  # AUC 1: no spread to estimate
    assert ec.delong_auc_interval([0.0, 1.0], [2.0, 3.0]) is None  # AUC 0
    assert ec.delong_auc_interval([2.0], [0.0, 3.0]) is None  # one member
    assert ec.delong_auc_interval([1.0, 1.0], [1.0, 1.0]) is None  # all tied: variance 0
    with pytest.raises(ValueError, match=r"confidence must be a finite number in \(0, 1\)"):
        ec.delong_auc_interval([1.0, 2.0], [0.0, 1.5], confidence=1)


def test_at_12_against_12_delong_on_the_logit_scale_covers_and_the_percentile_bootstrap_not():
    """Why lesson 15 prints DeLong's interval for SmolLM2's 12 against 12: binormal scores with a
    true AUC of 0.9, 1,000 samples. The percentile bootstrap (membership_auc's ci95 without
    groups) covers the true AUC in 87.1% of them; DeLong's on the logit scale in 95.9%, counting
    the 2.5% of samples with AUC 1 (no interval) as misses. Four other seeds of 2,000 samples gave
    87.7-88.9% and 94.8-95.4% (at a true AUC of 0.8: 92.0-92.8% and 95.4-96.6%)."""
    rng = np.random.default_rng(0)
    true_auc, trials = 0.9, 1000
    shift = math.sqrt(2) * norm.ppf(true_auc)  # P(X > Y) for X ~ N(shift, 1), Y ~ N(0, 1)
    w_m = ec.bootstrap_weights(12, n_resamples=1000, seed=1)
    w_n = ec.bootstrap_weights(12, n_resamples=1000, seed=2)
    boot = delong = 0
    for _ in range(trials):
        x, y = rng.normal(shift, 1, 12), rng.normal(0, 1, 12)
        aucs = ec._weighted_auc(ec._pair_wins(torch.tensor(x), torch.tensor(y)), w_m, w_n)
        low, high = np.quantile(aucs.numpy(), [0.025, 0.975])
        boot += low <= true_auc <= high
        interval = ec.delong_auc_interval(x.tolist(), y.tolist())
        delong += interval is not None and interval[0] <= true_auc <= interval[1]
    assert boot / trials < 0.91 and delong / trials > 0.93, (boot / trials, delong / trials)


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(scores_members=[]), "scores_members must be a non-empty list"),
        (dict(scores_nonmembers=[0.1, math.nan]), "scores_nonmembers must be a non-empty"),
        (dict(scores_members=["a"]), "scores_members must be a list of numbers"),
        (dict(fpr=0), r"fpr must be a finite number in \(0, 1\]"),
        (dict(fpr=1.5), r"fpr must be a finite number in \(0, 1\]"),
        (dict(n_resamples=0), "n_resamples must be an int >= 1"),
    ],
)
def test_membership_auc_refuses_bad_arguments(kwargs, match):
    args = dict(scores_members=[1.0, 2.0], scores_nonmembers=[0.0, 1.0]) | kwargs
    with pytest.raises(ValueError, match=match):
        ec.membership_auc(**args)


# --- on a model: TinyGPT, whose training text is known exactly ------------------------------------


def test_tinygpt_training_texts_are_the_training_sequences_cut_at_specials(tok):
    texts = ec.tinygpt_training_texts(tok)
    train = json.loads(ec.FIXTURES_PATH.read_text(encoding="utf-8"))["train"]
    assert len(texts) == len(set(texts))
    assert {s + " " for s in train["statements"]} <= set(texts)  # each followed by a space
    assert {a for _, a in train["qa"]} <= set(texts)
    assert {f for q, _ in train["qa"] for f in ec.question_framings(q)} <= set(texts)
    rebuilt = "".join(tok.decode(seq) for seq in ec.training_sequences(tok))  # specials dropped
    assert set("".join(texts)) <= set(rebuilt)
    assert all(t in rebuilt for t in texts)


def test_membership_scores_on_a_model(trained_model, tok):
    texts = ["The capital of France is Paris.", "Owls hunt at night and sleep by day."]
    records = ec.membership_scores(trained_model, tok, texts, k=20)
    assert [r["text"] for r in records] == texts
    for text, r in zip(texts, records):
        # an independent float64 computation from the model's logits
        ids = torch.tensor([tok.encode(text)])
        with torch.no_grad():
            logp = torch.log_softmax(trained_model(ids[:, :-1]).double(), -1)
        nll = -logp[0].gather(-1, ids[0, 1:, None])[:, 0]
        assert r["n_tokens"] == len(text.encode()) - 1
        assert r["mean_loss"] == pytest.approx(float(nll.mean()), rel=1e-6)
        assert r["zlib_ratio"] == pytest.approx(
            float(nll.mean()) / len(zlib.compress(text.encode())), rel=1e-6
        )
        k_count = math.floor(len(nll) * 0.2)
        assert r["min_k_prob"] == pytest.approx(-float(nll.sort().values[-k_count:].mean()), 1e-6)
    with pytest.raises(ValueError, match=r"texts\[1\] has fewer than 2 tokens"):
        ec.membership_scores(trained_model, tok, ["long enough", "x"])


# --- the data file ------------------------------------------------------------------------------


def test_contamination_texts_are_paired_and_sourced():
    texts = ec.load_contamination()
    by_group = {g: [t for t in texts if t["group"] == g] for g in ec.CONTAMINATION_GROUPS}
    assert [len(v) for v in by_group.values()] == [12, 12, 12]
    famous = {t["id"] for t in by_group["famous"]}
    for group in ("paraphrase", "fresh"):
        assert sorted(t["of"] for t in by_group[group]) == sorted(famous)
        assert all("written for this course" in t["source"] for t in by_group[group])
    for t in by_group["famous"]:
        assert t["source"] and t["licence"] and "written for this course" not in t["source"]
        assert any(w in t["licence"] for w in ("public domain", "PSF-2.0", "licence text"))
    assert len({t["id"] for t in texts}) == 36


def test_zen_of_python_is_the_standard_librarys_text():
    with contextlib.redirect_stdout(io.StringIO()):  # importing `this` prints the whole Zen
        import this
    zen = codecs.decode(this.s, "rot13").split("\n")
    [item] = [t for t in ec.load_contamination() if t["id"] == "zen_of_python"]
    assert item["text"] == "\n".join(zen[2:13])


def test_paraphrases_and_fresh_texts_share_almost_no_long_ngram_with_the_famous_texts():
    texts = ec.load_contamination()
    famous = [t["text"] for t in texts if t["group"] == "famous"]
    group = {g: [t for t in texts if t["group"] == g] for g in ("paraphrase", "fresh")}
    para = ec.ngram_overlap([t["text"] for t in group["paraphrase"]], famous, n=8)
    # one 8-gram, a name the paraphrase keeps: "this constitution for the united states of america"
    assert [t["id"] for t, r in zip(group["paraphrase"], para) if r["contaminated"]] == [
        "preamble_paraphrase"
    ]
    palm = ec.ngram_overlap([t["text"] for t in group["paraphrase"]], famous, n=8, min_share=0.7)
    assert not any(r["contaminated"] for r in palm)
    fresh = ec.ngram_overlap([t["text"] for t in group["fresh"]], famous, n=5)
    assert not any(r["contaminated"] for r in fresh)


def test_load_contamination_refuses_a_malformed_file(tmp_path):
    path = tmp_path / "bad.json"
    item = dict(id="x", group="famous", of="x", title="t", text="t", source="s", licence="l")
    path.write_text(json.dumps({"texts": [item | {"group": "seen"}]}), encoding="utf-8")
    with pytest.raises(ValueError, match="has group 'seen'"):
        ec.load_contamination(path)
    path.write_text(json.dumps({"texts": [{k: v for k, v in item.items() if k != "licence"}]}))
    with pytest.raises(ValueError, match=r"texts\[0\] must be a dict with str values"):
        ec.load_contamination(path)


def test_tinygpt_statement_facts_name_every_statement_in_the_fixtures_fact_ids():
    facts = ec.tinygpt_statement_facts()
    train = json.loads(ec.FIXTURES_PATH.read_text(encoding="utf-8"))["train"]
    assert list(facts) == train["statements"]  # every statement, in training order
    vocabulary = {f for ids in ec.load_fixtures()["facts"].values() for f in ids}
    assert set(facts.values()) <= vocabulary
    per_fact = Counter(facts.values())
    assert set(per_fact.values()) == {2, 3}, per_fact
    lm_facts = set(ec.load_fixtures()["facts"]["lm"]) - {"many facts"}  # one text on every fact
    assert lm_facts <= set(per_fact), lm_facts - set(per_fact)
    assert facts["Earth travels around the Sun once every year."] == "year"  # not "sun"
    assert facts["Ice is water that has frozen solid."] == "freezing"


def test_tinygpt_statement_facts_refuses_a_file_that_misses_a_statement(tmp_path):
    raw = json.loads(ec.CONTAMINATION_PATH.read_text(encoding="utf-8"))
    dropped = next(iter(raw["tinygpt_statement_facts"]["facts"]))
    del raw["tinygpt_statement_facts"]["facts"][dropped]
    path = tmp_path / "c.json"
    path.write_text(json.dumps(raw), encoding="utf-8")
    with pytest.raises(ValueError, match="must name each of the 60 training statements once"):
        ec.tinygpt_statement_facts(path)


# --- the exercise checks: right work passes, wrong work is named, the answer never shown ---------


@pytest.fixture(scope="module")
def corpus(tok):
    return ec.tinygpt_training_texts(tok)


EXERCISE_1 = [
    "Tell me which planet is known as the red planet.",
    "In a few words, what is the capital of Japan?",
    "What is the tallest mountain on Earth?",
    "Tell me how a frog starts its life.",
]


def share_without_normalising(question, corpus_texts, n=5):
    """The lesson's buggy overlap: words compared as they are written."""
    grams = {
        tuple(w[i : i + n])
        for t in corpus_texts
        for w in [t.split()]
        for i in range(len(w) - n + 1)
    }
    words = question.split()
    qs = [tuple(words[i : i + n]) for i in range(len(words) - n + 1)]
    return sum(g in grams for g in qs) / len(qs)


def test_exercise_1_check_passes_right_work_and_names_wrong_work(corpus):
    shares = [r["share"] for r in ec.ngram_overlap(EXERCISE_1, corpus, n=5)]
    assert all(shares) and len(set(shares)) == 4, shares  # four different, non-zero answers
    right = lambda q: ec.ngram_overlap([q], corpus, n=5)[0]["share"]  # noqa: E731
    assert ec.ngram_share_mistake(right, EXERCISE_1, corpus) is None
    joined = [ec._hand_share(q, corpus, 5, across_texts=True) for q in EXERCISE_1]
    assert joined == shares  # the four questions alone cannot catch a joined corpus: the probe does
    wrong = {
        "normalise the question and every training text": lambda q: share_without_normalising(
            q, corpus
        ),
        "use n-grams of 5 words": lambda q: ec.ngram_overlap([q], corpus, n=4)[0]["share"],
        "a count of n-grams found": lambda q: ec.ngram_overlap([q], corpus, n=5)[0]["n_found"],
        "NOT found": lambda q: 1 - ec.ngram_overlap([q], corpus, n=5)[0]["share"],
        "is not its share of 5-grams found": lambda q: 0.0,  # today's accepted wrong answer
        "may not run from one training text into the next": lambda q: ec._hand_share(
            q, corpus, 5, across_texts=True
        ),
        "must be a number, got '0.5'": lambda q: "0.5",
        "it must lie from 0 to 1": lambda q: -0.5,
    }
    for hint, fn in wrong.items():
        message = ec.ngram_share_mistake(fn, EXERCISE_1, corpus)
        assert message is not None and hint in message, (hint, message)
        assert not any(f"{v:.3g}" in message or repr(v) in message for v in shares), message
    with pytest.raises(ValueError, match=r"questions\[0\] has fewer than 5 words"):
        ec.ngram_share_mistake(lambda q: 0.0, ["too short", EXERCISE_1[0]], corpus)


def test_exercise_2_check_passes_right_work_and_names_wrong_work():
    rng = np.random.default_rng(8)
    famous = [rng.exponential(1.0, rng.integers(40, 90)).tolist() for _ in range(12)]
    fresh = [rng.exponential(1.15, rng.integers(40, 90)).tolist() for _ in range(12)]

    def auc(score):
        return roc_auc_score([1] * 12 + [0] * 12, [score(x) for x in famous + fresh])

    right = auc(lambda x: ec.min_k_prob(x, 40))
    assert ec.min_k_auc_mistake(right, famous, fresh) is None
    wrong = {
        "direction is reversed": 1 - right,
        "the AUC at k = 20": auc(lambda x: ec.min_k_prob(x, 20)),
        "mean token loss's AUC": auc(lambda x: -ec.mean_token_loss(x)),
        "averages the most likely tokens": auc(lambda x: -np.mean(sorted(x)[: len(x) * 40 // 100])),
        "it must lie from 0 to 1": 1.5,
    }
    assert len({round(v, 12) for v in wrong.values()} | {round(right, 12)}) == 6  # distinct
    for hint, value in wrong.items():
        message = ec.min_k_auc_mistake(value, famous, fresh)
        assert message is not None and hint in message, (hint, message)
        assert f"{right:.3g}" not in message and f"{right:.4g}" not in message


def test_exercise_4_check_passes_right_work_and_names_wrong_work():
    famous = [1.0, 2.0, 3.5, 4.5, 6.0]
    fresh = [3.0, 4.0, 5.0]
    # no fresh text flagged: below 3.0 (2 famous); one: below 4.0 (3); two: below 5.0 (4); all
    right = [2, 3, 4, 5]
    assert ec.flagged_counts_mistake(right, famous, fresh) is None
    assert ec.flagged_counts_mistake(np.array(right).tolist(), famous, fresh) is None
    assert ec.flagged_counts_mistake(list(np.array(right)), famous, fresh) is None  # numpy ints
    assert ec.flagged_counts_mistake(np.array(right), famous, fresh) is None
    wrong = {
        "shifted by one": [3, 4, 5, 5],
        "NOT flagged": [3, 2, 1, 0],
        "flagged_counts[2], the famous texts flagged with 2 fresh text(s) flagged": [2, 3, 3, 5],
        "must hold counts of famous texts": [0.4, 0.6, 0.8, 1.0],
        "must be a list of 4 counts": [2, 3, 4],
    }
    for hint, counts in wrong.items():
        message = ec.flagged_counts_mistake(counts, famous, fresh)
        assert message is not None and hint in message, (hint, message)
        assert str(right) not in message


def test_tinygpt_question_facts_name_every_training_question_in_the_fixtures_fact_ids():
    facts = ec.tinygpt_question_facts()
    train = json.loads(ec.FIXTURES_PATH.read_text(encoding="utf-8"))["train"]
    assert list(facts) == [q for q, _ in train["qa"]]
    assert set(Counter(facts.values()).values()) == {5}, Counter(facts.values())
    assert set(facts.values()) <= set(ec.tinygpt_statement_facts().values())
    assert facts["Which river flows through Cairo?"] == "egypt"
    assert facts["Which day comes after Monday?"] == "week"


def test_exercise_3_check_passes_right_work_and_names_wrong_work(trained_model, tok, corpus):
    fx = ec.load_fixtures()
    (members, nonmembers), (g_m, g_n) = ec._exercise_3_parts(trained_model, tok, corpus, fx)
    assert len(set(g_m + g_n)) == 24 and len(nonmembers) == 60

    def auc(score, **groups):
        m, n = [x[score] for x in members], [x[score] for x in nonmembers]
        return ec.membership_auc(m, n, higher_is_member=ec.MEMBERSHIP_SCORES[score], **groups)

    right = auc("mean_loss", groups_members=g_m, groups_nonmembers=g_n)
    check = lambda r: ec.question_auc_mistake(r, trained_model, tok, corpus, fx)  # noqa: E731
    assert check(right) is None
    wrong = {
        "zlib ratio's AUC": auc("zlib_ratio", groups_members=g_m, groups_nonmembers=g_n),
        "Min-K% Prob's AUC": auc("min_k_prob"),
        "it resamples single texts": auc("mean_loss"),
        "it groups only the trained questions": auc("mean_loss", groups_members=g_m),
        "must be the dict": None,
        "members and": {**right, "n_nonmembers": 20},
    }
    for hint, value in wrong.items():
        message = check(value)
        assert message is not None and hint in message, (hint, message)
        assert f"{right['auc']:.3g}" not in message, message


def test_lesson_15_says_what_its_figures_show(root):
    """The second review of lesson 15: the SmolLM2 texts are matched triplets, and the intervals
    say so; the gap share is a share of the measured gap, its interval labelled; rankings within
    noise are not made; claims about peers are sourced or softened."""
    lesson = (root / "notebooks" / "15_contamination.py").read_text(encoding="utf-8")
    flat = " ".join(lesson.replace("#", " ").split())
    assert "12 **matched triplets**" in flat and "Obuchowski" in flat
    assert "groups_members=triplet_of[a], groups_nonmembers=triplet_of[b]" in flat
    assert "a share of the **measured** gap to fresh text" in flat
    assert "(percentile bootstrap, 12 pairs: approximate)" in flat
    assert "overlapping almost entirely, cannot rank them" in flat
    assert "does a little less well" not in flat
    assert (
        "Papers report TPR at 0.1% FPR" not in flat
        and "Membership Inference Attacks From First" in flat
    )
    assert "Shi et al. chose k" not in flat
    assert "in effect on two" in flat  # exercise 4's near tie
    assert "From `seconds`" not in flat
    nb = nbformat.read(root / "notebooks" / "15_contamination.ipynb", as_version=4)
    outputs = "".join(
        o.get("text", "") for c in nb.cells if c.cell_type == "code" for o in c.outputs
    )
    assert "95% CI (triplets)" in outputs and "0.0004998" not in outputs and "< 0.001" in outputs
    assert "held out: 90 bytes" in outputs and "trained: 45 bytes" in outputs
    assert "'ci95': [0.145, 0.519]" in outputs


def test_tinygpt_question_facts_refuses_a_file_with_a_bad_fact(tmp_path):
    raw = json.loads(ec.CONTAMINATION_PATH.read_text(encoding="utf-8"))
    raw["tinygpt_question_facts"]["facts"]["Can penguins fly?"] = ""
    path = tmp_path / "c.json"
    path.write_text(json.dumps(raw), encoding="utf-8")
    with pytest.raises(ValueError, match="each question's fact must be a non-empty str"):
        ec.tinygpt_question_facts(path)
    del raw["tinygpt_question_facts"]["facts"]["Can penguins fly?"]
    path.write_text(json.dumps(raw), encoding="utf-8")
    with pytest.raises(ValueError, match="must name each of the 110 training questions once"):
        ec.tinygpt_question_facts(path)
