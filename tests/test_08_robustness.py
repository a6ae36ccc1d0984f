"""Lesson 08: perturbations (pure, seeded, unit-tested) and robustness_eval."""

import json
import math

import pytest
import torch

import evalcore as ec
from conftest import make_tiny

QUESTION = "What is the capital of France? It is not Rome, and they are sure."


# ------------------------------------------------------------------ the perturbations


@pytest.mark.parametrize("name", sorted(ec.PERTURBATIONS))
def test_same_seed_same_output(name):
    fn = ec.PERTURBATIONS[name]
    assert fn(QUESTION, seed=3) == fn(QUESTION, seed=3)
    assert isinstance(fn(QUESTION), str)


@pytest.mark.parametrize("name", sorted(ec.PERTURBATIONS))
def test_non_str_text_raises(name):
    with pytest.raises(ValueError, match="text"):
        ec.PERTURBATIONS[name](["not", "a", "str"], seed=0)


def test_rate_zero_leaves_the_text_unchanged():
    assert ec.typos(QUESTION, seed=5, rate=0.0) == QUESTION
    assert ec.extra_whitespace(QUESTION, seed=5, max_extra=0) == QUESTION


def test_typos_depend_on_the_seed_and_grow_with_the_rate():
    outs = {ec.typos(QUESTION, seed=s, rate=0.3) for s in range(5)}
    assert len(outs) == 5 and QUESTION not in outs
    changed = [
        sum(ec.typos(QUESTION, seed=s, rate=r) != QUESTION for s in range(20))
        for r in (0.0, 0.02, 0.5)
    ]
    assert changed[0] == 0 < changed[1] < changed[2] == 20
    # "a" swaps with "b", or is dropped or doubled and then "b" (last: no swap) is kept, dropped
    # or doubled
    possible = {"ba"} | {a + b for a in ("", "aa") for b in ("b", "", "bb")}
    assert {ec.typos("ab", seed=s, rate=1.0) for s in range(40)} <= possible


def test_typos_are_swaps_drops_or_doubles_of_letters_only():
    text = "12, 34; ?!"
    assert ec.typos(text, seed=1, rate=1.0) == text  # no letter, nothing to change
    for s in range(10):
        out = ec.typos("abcdef", seed=s, rate=0.5)
        assert set(out) <= set("abcdef") and 3 <= len(out) <= 12


def test_typos_rate_validated():
    for bad in (-0.1, 1.5, True, "0.1"):
        with pytest.raises(ValueError, match="rate"):
            ec.typos(QUESTION, rate=bad)


def test_case_changes():
    assert ec.lowercase("What is Mars?") == "what is mars?"
    assert ec.uppercase("What is Mars?") == "WHAT IS MARS?"
    assert ec.change_case("what is mars?", mode="title") == "What Is Mars?"
    with pytest.raises(ValueError, match="mode"):
        ec.change_case("x", mode="swap")


def test_extra_whitespace_only_adds_spaces():
    out = ec.extra_whitespace(QUESTION, seed=2)
    assert out != QUESTION and out.split() == QUESTION.split() and len(out) > len(QUESTION)
    assert "  " not in ec.extra_whitespace("nospace", seed=2)
    with pytest.raises(ValueError, match="max_extra"):
        ec.extra_whitespace(QUESTION, max_extra=-1)


def test_contractions_and_expansions():
    assert (
        ec.use_contractions("What is the capital? It is not Rome.")
        == "What's the capital? It's not Rome."
    )
    assert ec.use_contractions("This is not it.") == "This isn't it."
    assert (
        ec.use_contractions(QUESTION)
        == "What's the capital of France? It's not Rome, and they're sure."
    )
    assert ec.expand_contractions("What's up? I don't know.") == "What is up? I do not know."
    assert (
        ec.expand_contractions("Japan's capital is which city?") == "Japan's capital is which city?"
    )  # possessive
    assert ec.expand_contractions(ec.use_contractions(QUESTION)) == QUESTION
    assert ec.expand_contractions("I can't") == "I cannot"
    assert (
        ec.use_contractions("Which ocean is the largest?") == "Which ocean is the largest?"
    )  # nothing to do


def test_paraphrase_keeps_the_question_and_avoids_training_framings():
    out = ec.paraphrase(QUESTION, seed=0)
    assert QUESTION in out and out != QUESTION
    assert any(t.format(q=QUESTION) == out for t in ec.PARAPHRASE_TEMPLATES)
    assert len({ec.paraphrase(QUESTION, seed=s) for s in range(20)}) > 1
    trained = {f.replace("{bare}", "{q}").replace("{lower}", "{q}") for f in ec.QUESTION_FRAMINGS}
    assert not trained & set(ec.PARAPHRASE_TEMPLATES)


def test_distractor_is_an_irrelevant_sentence_put_first():
    out = ec.add_distractor(QUESTION, seed=0)
    assert out.endswith(" " + QUESTION)
    assert out[: -len(QUESTION) - 1] in ec.DISTRACTOR_SENTENCES


# ------------------------------------------------------------------ robustness_eval


def first_letter_model(ids):
    """A model that answers with the first character of the instruction, then stops."""
    B, T = ids.shape
    logits = torch.zeros(B, T, ec.InstructionTokenizer.vocab_size)
    for b in range(B):
        answering = int(ids[b, -1]) == ec.InstructionTokenizer.resp_id
        nxt = int(ids[b, 1]) if answering else ec.InstructionTokenizer.pad_id
        logits[b, -1, nxt] = 1.0
    return logits


def strict_match(prediction, reference):
    return ec.exact_match(prediction, reference, normalise=lambda s: s)


def test_robustness_eval_hand_computed(tok):
    pairs = [("Apple?", "A"), ("banana?", "B")]
    res = ec.robustness_eval(
        first_letter_model, tok, pairs, ["lowercase", "uppercase"], metric=strict_match
    )
    # answers: clean "A", "b"; lowercase "a", "b"; uppercase "A", "B"
    ex = res.extras
    assert [r["prediction"] for r in res.per_example] == ["A", "b", "a", "b", "A", "B"]
    assert ex["clean"] == 0.5
    assert ex["per_perturbation"] == {"lowercase": 0.0, "uppercase": 1.0}
    assert ex["drop"] == {"lowercase": 0.5, "uppercase": -0.5}
    assert ex["worst_perturbation"] == "lowercase" and ex["worst_perturbation_score"] == 0.0
    assert res.value == ex["worst_case"] == 0.0  # each example fails somewhere
    assert ex["changed"] == {"lowercase": 0.5, "uppercase": 1.0}
    assert ex["metric"] == "strict_match"
    # EM's normalisation forgives every one of these case changes
    forgiving = ec.robustness_eval(first_letter_model, tok, pairs, ["lowercase", "uppercase"])
    assert forgiving.value == forgiving.extras["clean"] == 1.0
    assert forgiving.extras["drop"] == {"lowercase": 0.0, "uppercase": 0.0}


def test_robustness_eval_structure_with_a_tiny_model(tok, tmp_path):
    model = make_tiny(seed=3)
    pairs = ec.load_fixtures()["em"][:4]
    res = ec.robustness_eval(model, tok, pairs, seed=1, max_new_tokens=8)
    names = list(ec.PERTURBATIONS)
    assert res.name == "robustness" and len(res.per_example) == 4 * (1 + len(names))
    tags = [r["perturbation"] for r in res.per_example]
    assert tags == [p for p in ["clean"] + names for _ in range(4)]
    for r in res.per_example:
        q, ref = pairs[r["index"]]
        assert r["reference"] == ref and r["original"] == q  # references are never perturbed
        assert r["changed"] == (r["instruction"] != q)
        if r["perturbation"] == "clean":
            assert r["instruction"] == q
        else:
            assert r["instruction"] == ec.PERTURBATIONS[r["perturbation"]](q, seed=1)
    ex = res.extras
    assert set(ex["per_perturbation"]) == set(ex["drop"]) == set(ex["changed"]) == set(names)
    for p in names:
        assert ex["drop"][p] == pytest.approx(ex["clean"] - ex["per_perturbation"][p])
    assert res.value <= min([ex["clean"]] + list(ex["per_perturbation"].values())) + 1e-12
    report = ec.aggregate([res], weights={"robustness": 1.0})
    assert report.score == pytest.approx(res.value)
    json.loads(report.to_json(tmp_path / "r.json").read_text())


def test_robustness_eval_is_deterministic_given_the_seed(tok):
    model = make_tiny(seed=3)
    pairs = ec.load_fixtures()["em"][:3]
    a = ec.robustness_eval(model, tok, pairs, ["typos", "paraphrase"], seed=4, max_new_tokens=6)
    b = ec.robustness_eval(model, tok, pairs, ["typos", "paraphrase"], seed=4, max_new_tokens=6)
    c = ec.robustness_eval(model, tok, pairs, ["typos", "paraphrase"], seed=5, max_new_tokens=6)
    assert a.per_example == b.per_example
    assert [r["instruction"] for r in a.per_example] != [r["instruction"] for r in c.per_example]


def test_robustness_eval_accepts_a_dict_of_functions(tok):
    pairs = [("Apple?", "A"), ("pear?", "P")]
    perts = {
        "shout": lambda t, seed: t.upper(),
        "typos 0.0": lambda t, seed: ec.typos(t, seed, 0.0),
    }
    res = ec.robustness_eval(first_letter_model, tok, pairs, perts, metric=strict_match)
    assert res.extras["per_perturbation"] == {"shout": 1.0, "typos 0.0": 0.5}
    assert res.extras["changed"]["typos 0.0"] == 0.0


def test_robustness_eval_validates(tok):
    pairs = [("Apple?", "A")]
    with pytest.raises(ValueError, match="perturbations"):
        ec.robustness_eval(first_letter_model, tok, pairs, ["no such perturbation"])
    with pytest.raises(ValueError, match="perturbations"):
        ec.robustness_eval(first_letter_model, tok, pairs, {"clean": ec.lowercase})
    with pytest.raises(ValueError, match="perturbation 'bad' returned"):
        ec.robustness_eval(first_letter_model, tok, pairs, {"bad": lambda t, seed: None})
    with pytest.raises(ValueError, match="metric"):
        ec.robustness_eval(first_letter_model, tok, pairs, ["lowercase"], metric=lambda p, r: 2.0)
    with pytest.raises(ValueError, match="pairs"):
        ec.robustness_eval(first_letter_model, tok, [], ["lowercase"])


def test_robustness_normalises_as_it_is_clipped():
    assert ec.normalise_metric("robustness", 0.4) == pytest.approx(0.4)
    assert ec.normalise_metric("robustness", 1.2) == 1.0
    assert ec.normalise_metric("robustness", float("nan")) == 0.0


def test_the_worst_case_includes_the_clean_score():
    # example 0: right clean, wrong perturbed; example 1: wrong clean, right perturbed. Each one's
    # worst over clean and perturbed is 0, so the worst case is 0.0; a worst case over the
    # perturbations alone would say 0.5 and hide that example 1 is wrong as asked.
    records = [
        {"index": 0, "perturbation": "clean", "score": 1.0, "changed": False},
        {"index": 0, "perturbation": "uppercase", "score": 0.0, "changed": True},
        {"index": 1, "perturbation": "clean", "score": 0.0, "changed": False},
        {"index": 1, "perturbation": "uppercase", "score": 1.0, "changed": True},
    ]
    value, extras = ec._robustness_summary(records, ["uppercase"], 2, ec.exact_match, 0)
    assert value == 0.0 and extras["worst_case"] == 0.0
    assert extras["clean"] == 0.5 and extras["per_perturbation"]["uppercase"] == 0.5


# Tarone's correction ------------------------------------------------------------------------------


def test_tarone_count_counts_only_tests_that_could_reach_the_level():
    # Lesson 08's eight McNemar tests: upper case changed 6 answers (smallest p 2/64), the
    # paraphrase 5 (2/32), the distractor 1 (p = 1 at best), five others none (p = 1).
    floors = [2 / 64, 2 / 32, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0]
    # K = 1: one test (2/64 <= 0.05) could reach 0.05, and 1 <= 1.
    assert ec.tarone_count(floors, 0.05) == 1
    # at alpha = 0.1: K = 1 counts two tests (> 1); K = 2: 0.05 admits only 2/64: 1 <= 2
    assert ec.tarone_count(floors, 0.1) == 2
    assert ec.tarone_count([0.0] * 5, 0.05) == 5  # continuous tests: every one counts, Bonferroni


def test_tarone_holm_by_hand_on_the_lesson_case():
    p = [2 / 64, 0.375, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0]
    floors = [2 / 64, 2 / 32, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0]
    # step 1: K = 1, 0.03125 <= 0.05/1: upper case rejected. Step 2: of the seven left none could
    # reach 0.05 (K = 1), and 0.375 > 0.05: stop. Holm would compare 0.03125 with 0.05/8.
    assert ec.tarone_holm(p, floors) == [True] + [False] * 7


def test_tarone_holm_by_hand_steps_down_further_than_holm():
    p = [0.001, 0.004, 0.02, 0.03, 0.5]
    floors = [0.001, 0.001, 0.01, 0.03, 0.2]
    # Step 1, all five left: K=1 counts 4 floors <= 0.05 (> 1); K=2: 3 <= 0.025 (> 2); K=3: 3 <=
    # 0.0167 (3 <= 3). 0.001 <= 0.05/3: reject. Step 2, four left: K=1 counts 3; K=2: floors
    # 0.001, 0.01 <= 0.025: 2 <= 2. 0.004 <= 0.025: reject. Step 3, three left: K=1 counts 0.01
    # and 0.03 (2 > 1); K=2: 0.01 only. 0.02 <= 0.025: reject. Step 4, two left: K=1 counts 0.03
    # (1 <= 1). 0.03 <= 0.05: reject. Step 5: 0.5 > 0.05: stop.
    assert ec.tarone_holm(p, floors) == [True, True, True, True, False]
    # Holm: 0.001 * 5, 0.004 * 4 pass; 0.02 * 3 = 0.06 > 0.05 stops there
    holm = [q * (5 - k) <= 0.05 for k, q in enumerate(sorted(p))]
    assert holm == [True, True, False, False, False]
    # with every floor 0 (continuous tests) it is Holm exactly
    assert ec.tarone_holm(p, [0.0] * 5) == [True, True, False, False, False]


def test_tarone_holm_starts_from_the_smallest_p_and_rejects_at_the_level_itself():
    # Continuous tests (every floor 0), so K is the number of tests left: Holm. Given out of
    # order: 0.01 <= 0.05/3 rejects; 0.025 <= 0.05/2 and 0.05 <= 0.05/1 reject too, each exactly
    # at its level (Holm rejects p <= alpha / K; halving 0.05 is exact in binary).
    assert ec.tarone_holm([0.05, 0.01, 0.025], [0.0] * 3) == [True, True, True]
    # 0.04 is the smallest of these four only in input order: Holm starts from 0.001 (<= 0.0125)
    # and stops at 0.02 > 0.05/3
    assert ec.tarone_holm([0.04, 0.001, 0.02, 0.3], [0.0] * 4) == [False, True, False, False]


@pytest.mark.parametrize(
    "args, match",
    [
        (([0.5], [0.1, 0.1]), "min_p_values must be a non-empty list of 1"),
        (([0.01], [0.05]), "below its smallest attainable p"),
        (([1.5], [0.1]), "p_values"),
        (([0.5], [0.1], 0.0), "alpha"),
    ],
)
def test_tarone_holm_rejects_bad_input(args, match):
    with pytest.raises(ValueError, match=match):
        ec.tarone_holm(*args)


# The robustness interval --------------------------------------------------------------------------


def test_robustness_wilson_interval_counts_examples_not_records():
    # 3 questions x (clean + 2 perturbations) = 9 records; worst case per question: 1, 0, 0.
    records = [
        {"index": i, "perturbation": p, "score": s}
        for i, scores in enumerate([(1, 1, 1), (1, 0, 1), (0, 0, 0)])
        for p, s in zip(("clean", "a", "b"), scores)
    ]
    result = ec.with_interval(ec.EvalResult("robustness", 1 / 3, records))
    assert result.extras["n"] == 3 and result.extras["ci_method"] == "wilson"
    assert result.extras["ci95"] == pytest.approx(_wilson(1, 3))  # not Wilson(k, 9)


def _wilson(k, n, z=1.959963984540054):
    p = k / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return [centre - half, centre + half]
