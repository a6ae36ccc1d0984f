"""How often lesson 16's 95% percentile-bootstrap intervals over problems cover the truth, on
benchmarks simulated to look like its recording (the coverage the lesson quotes).

Each simulated benchmark draws its problems with replacement from the recorded ones, takes each
drawn problem's recorded pass rate (c / 10) as its true rate, draws c ~ Binomial(10, rate) anew,
and builds the interval as the lesson does (ec.bootstrap_ci, 2,000 resamples over problems). The
truth is the mean rate over the recorded problems. A paired difference draws each temperature's c
independently: the recording's common random numbers, which make a problem's samples at two
temperatures alike, are left out.

Options, for the lesson's verdicts on the temperature steps:
- --confidence C (or --comparisons M, for Bonferroni's 1 - 0.05 / M): each interval's level.
- --null: a world with no temperature effect, so each true difference is 0. For a difference
  a - b, each problem's rate at a and at b is its mean over the two; for --family's line, its
  mean over all three temperatures. "above" then counts intervals whose lower end clears 0,
  "below" those whose upper end falls short of it. Only the differences are simulated.
- --family: one more line, the three differences simulated together on the same benchmarks (each
  temperature drawn once): how often all three intervals hold their truths at once, and how often
  at least one lies wholly below or wholly above its truth.

    python tools/bootstrap_coverage.py               # 4,000 benchmarks per quantity (about 30 s)
    python tools/bootstrap_coverage.py --trials 400  # quicker, noisier
    python tools/bootstrap_coverage.py --null --comparisons 3 --family
"""

import argparse
import math
import random
import sys

import torch

import evalcore as ec

SAMPLES = 10  # samples per problem in the recording
TEMPERATURES = ("0.2", "0.8", "1.0")
PAIRS = (("0.2", "0.8"), ("0.8", "1.0"), ("0.2", "1.0"))  # the lesson's three pass@1 steps


def recorded_rates(rec, setting, first=None):
    """{task_id: c / n} for one recorded setting (its first `first` problems, if given)."""
    result = ec.recorded_humaneval(rec, setting, ks=(1,), first=first)[1]
    return {r["task_id"]: r["c"] / r["n"] for r in result.per_example}


def no_effect(rates, temperatures):
    """{temperature: {task_id: rate}} for the given temperatures, each problem's rate replaced at
    every one of them by its mean over them: the same problems, no effect of the temperature."""
    ids = list(rates[temperatures[0]])
    mean = {
        t: sum(rates[temperature][t] for temperature in temperatures) / len(temperatures)
        for t in ids
    }
    return {temperature: dict(mean) for temperature in temperatures}


def coverage(rates_a, rates_b=None, *, trials, seed, confidence=0.95):
    """(covered, below, above) counts of trials: the interval holds the truth, lies below it,
    lies above it. With rates_b, the quantity is the paired difference a - b."""
    ids = list(rates_a)
    truth = sum(rates_a[t] - (rates_b[t] if rates_b else 0) for t in ids) / len(ids)
    draw = random.Random(seed)
    generator = torch.Generator().manual_seed(seed)
    counts = [0, 0, 0]
    for trial in range(trials):
        chosen = [draw.choice(ids) for _ in ids]
        scores = _passes(rates_a, chosen, generator)
        if rates_b:
            scores = [a - b for a, b in zip(scores, _passes(rates_b, chosen, generator))]
        low, high = ec.bootstrap_ci(scores, confidence=confidence, seed=trial)
        counts[_side(low, high, truth)] += 1
    return tuple(counts)


def family_coverage(rates, pairs, *, trials, seed, confidence=0.95):
    """(all covered, any below, any above) counts of trials, for the paired differences a - b of
    every (a, b) in pairs on the same simulated benchmarks: each temperature in rates is drawn
    once a benchmark, so differences that share a temperature share its draws. A trial can count
    as both below and above."""
    ids = list(next(iter(rates.values())))
    truths = {(a, b): sum(rates[a][t] - rates[b][t] for t in ids) / len(ids) for a, b in pairs}
    draw = random.Random(seed)
    generator = torch.Generator().manual_seed(seed)
    counts = [0, 0, 0]
    for trial in range(trials):
        chosen = [draw.choice(ids) for _ in ids]
        scores = {t: _passes(rates[t], chosen, generator) for t in rates}
        sides = set()
        for a, b in pairs:
            diffs = [x - y for x, y in zip(scores[a], scores[b])]
            low, high = ec.bootstrap_ci(diffs, confidence=confidence, seed=trial)
            sides.add(_side(low, high, truths[a, b]))
        counts[0] += sides == {0}
        counts[1] += 1 in sides
        counts[2] += 2 in sides
    return tuple(counts)


def _side(low, high, truth):
    return 0 if low <= truth <= high else (1 if high < truth else 2)


def _passes(rates, chosen, generator):
    p = torch.tensor([rates[t] for t in chosen], dtype=torch.float64)
    c = torch.binomial(torch.full_like(p, SAMPLES), p, generator=generator)
    return (c / SAMPLES).tolist()


def _percent(fraction):
    return f"{100 * fraction:.3g}%"  # 95%, 98.3%, 99.2%


def main(argv=None):
    parser = argparse.ArgumentParser(description=" ".join(__doc__.split("\n\n")[0].split()))
    parser.add_argument("--trials", type=int, default=4000, help="simulated benchmarks each")
    parser.add_argument("--seed", type=int, default=0)
    level = parser.add_mutually_exclusive_group()
    level.add_argument("--confidence", type=float, default=0.95, help="each interval's level")
    level.add_argument("--comparisons", type=int, help="Bonferroni: level 1 - 0.05 / M")
    parser.add_argument("--null", action="store_true", help="no temperature effect (truth 0)")
    parser.add_argument("--family", action="store_true", help="the three differences together")
    args = parser.parse_args(argv)
    confidence = 1 - 0.05 / args.comparisons if args.comparisons else args.confidence
    if not 0 < confidence < 1:
        parser.error(f"the level must lie strictly between 0 and 1, got {confidence}")
    torch.set_num_threads(1)
    rec = ec.load_recording_16()
    subset = ec.RECORD_16_SUBSET
    at = {t: recorded_rates(rec, f"T={t}, chat", first=subset) for t in TEMPERATURES}
    quantities = (
        {}
        if args.null
        else {"pass@1, T=0.8, 164 problems": (recorded_rates(rec, "T=0.8, chat"), None)}
    )
    for a, b in PAIRS:
        pair = no_effect(at, (a, b)) if args.null else at
        quantities[f"pass@1, T={a} - T={b}, first {subset}"] = (pair[a], pair[b])
    half = 1.96 * math.sqrt(confidence * (1 - confidence) / args.trials)
    print(
        f"{args.trials} simulated benchmarks each; a true {_percent(confidence)} reads within "
        f"+/- {half:.1%}"
    )
    if args.null:
        print(
            "no temperature effect: each problem's rate is its mean over the compared "
            "temperatures (all three for the family), so each truth is 0"
        )
    print(f"{'quantity':<34} {'covered':>8} {'below':>6} {'above':>6}")
    for name, (a, b) in quantities.items():
        covered, below, above = coverage(
            a, b, trials=args.trials, seed=args.seed, confidence=confidence
        )
        print(f"{name:<34} {covered / args.trials:>8.1%} {below:>6} {above:>6}")
    if args.family:
        world = no_effect(at, TEMPERATURES) if args.null else at
        covered, below, above = family_coverage(
            world, PAIRS, trials=args.trials, seed=args.seed, confidence=confidence
        )
        name = "all three differences at once"
        print(f"{name:<34} {covered / args.trials:>8.1%} {below:>6} {above:>6}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
