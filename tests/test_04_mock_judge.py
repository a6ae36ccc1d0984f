"""Lesson 04: the deterministic mock judge, its boundaries, and judge_eval's checks on a judge."""

import math

import pytest

import evalcore as ec


def tokens(prefix, n):
    return [f"{prefix}{i}" for i in range(n)]


def pair_with_f1(shared, n_pred, n_ref):
    """A (prediction, reference) whose token F1 is 2 * shared / (n_pred + n_ref), never an EM."""
    common = tokens("s", shared)
    pred = " ".join(common + tokens("p", n_pred - shared))
    ref = " ".join(common + tokens("r", n_ref - shared))
    return pred, ref


@pytest.mark.parametrize(
    "shared,n_pred,n_ref,f1,score",
    [
        (4, 5, 5, 0.8, 4),  # exactly 0.8
        (39, 49, 49, 78 / 98, 3),  # 0.7959...: just below 0.8
        (1, 2, 2, 0.5, 3),  # exactly 0.5
        (49, 99, 99, 98 / 198, 2),  # 0.4949...: just below 0.5
        (1, 5, 5, 0.2, 2),  # exactly 0.2
        (9, 46, 46, 18 / 92, 1),  # 0.1956...: just below 0.2
        (2, 3, 2, 0.8, 4),  # precision 2/3, recall 1: exactly 0.8 too
        (1, 4, 6, 0.2, 2),
        (0, 3, 3, 0.0, 1),
        (9, 10, 10, 0.9, 4),
    ],
)
def test_mock_judge_boundaries(shared, n_pred, n_ref, f1, score):
    pred, ref = pair_with_f1(shared, n_pred, n_ref)
    assert ec.token_f1(pred, ref) == f1  # the pair really has the F1 the case claims
    assert ec.exact_match(pred, ref) == 0.0
    got, rationale = ec.mock_judge("q", pred, ref)
    assert got == score


def test_exact_match_scores_5():
    assert ec.mock_judge("q", "Paris.", "paris")[0] == 5
    assert ec.mock_judge("q", "  PARIS ?", "Paris")[0] == 5
    # "Paris!" vs "paris": token F1 0 ("paris!" != "paris"), but EM holds
    assert ec.token_f1("Paris!", "paris") == 0.0
    assert ec.mock_judge("q", "Paris!", "paris")[0] == 5
    assert ec.mock_judge("q", "", "")[0] == 5
    # F1 1.0 but the words are in another order: not an exact match
    assert ec.mock_judge("q", "Tower Eiffel", "Eiffel Tower")[0] == 4


def test_mock_judge_with_a_list_of_references():
    assert ec.mock_judge("q", "eight", ["8", "eight"])[0] == 5
    assert ec.mock_judge("q", "eight legs", ["8", "eight"])[0] == 3  # F1 2/3


@pytest.mark.parametrize(
    "pred,ref",
    [
        ("Paris", "Paris"),
        ("the cat sat on mat", "the cat sat on rug"),
        ("a b", "a c"),
        ("x\ny", "z"),
        ("", "something"),
        ("multi\nline\nanswer", "multi line answer"),
    ],
)
def test_rationale_is_one_line_and_deterministic(pred, ref):
    score, rationale = ec.mock_judge("q", pred, ref)
    assert isinstance(score, int) and score in {1, 2, 3, 4, 5}
    assert isinstance(rationale, str) and rationale.strip()
    assert "\n" not in rationale and "\r" not in rationale
    assert ec.mock_judge("q", pred, ref) == (score, rationale)


# ----------------------------------------------------------------------------------------------
# judge_eval
# ----------------------------------------------------------------------------------------------

PAIRS = [
    ("Capital of France?", "Paris is the capital of France."),
    ("Capital of Japan?", "Tokyo is the capital of Japan."),
    ("Legs of a spider?", "A spider has eight legs."),
    ("Red planet?", "Mars is the red planet."),
]
ANSWERS = ["Paris is the capital of France.", "Tokyo is a city.", "Spiders have six legs.", "Venus"]


@pytest.fixture
def fixed_answers(monkeypatch):
    def fake_generate(model, tok, instructions, max_new_tokens=48, keep_unanswered=False):
        return [ANSWERS[[q for q, _ in PAIRS].index(s)] for s in instructions]

    monkeypatch.setattr(ec, "generate", fake_generate)


def test_judge_eval_with_the_mock_judge(fixed_answers, tok):
    result = ec.judge_eval(None, tok, PAIRS)
    assert result.name == "judge"
    # EM -> 5; "tokyo is a city." vs 6 tokens: shared tokyo, is -> 4 / 10 = 0.4 -> 2;
    # "spiders have six legs." vs "a spider has eight legs.": shared "legs." -> 2 / 9 -> 2;
    # "venus" -> 1
    assert [r["score"] for r in result.per_example] == [5, 2, 2, 1]
    assert result.value == 2.5
    for rec, (q, ref), pred in zip(result.per_example, PAIRS, ANSWERS):
        assert set(rec) >= {"instruction", "prediction", "reference", "score", "rationale"}
        assert (rec["instruction"], rec["prediction"], rec["reference"]) == (q, pred, ref)
        assert (rec["score"], rec["rationale"]) == ec.mock_judge(q, pred, ref)


def test_judge_eval_with_a_custom_judge(fixed_answers, tok):
    seen = []

    def judge(instruction, prediction, reference):
        seen.append((instruction, prediction, reference))
        return 1 + len(seen) * 0.5, f"call {len(seen)}"

    result = ec.judge_eval(None, tok, PAIRS, judge_fn=judge)
    assert seen == [(q, a, ref) for (q, ref), a in zip(PAIRS, ANSWERS)]
    assert [r["score"] for r in result.per_example] == [1.5, 2.0, 2.5, 3.0]
    assert [r["rationale"] for r in result.per_example] == ["call 1", "call 2", "call 3", "call 4"]
    assert result.value == 2.25


@pytest.mark.parametrize("score", [1, 5, 1.0, 5.0, 3.7])
def test_judge_eval_accepts_scores_in_range(fixed_answers, tok, score):
    result = ec.judge_eval(None, tok, PAIRS, judge_fn=lambda q, p, r: (score, "fine"))
    assert result.value == pytest.approx(score, abs=1e-12)


@pytest.mark.parametrize(
    "verdict",
    [
        (7, "too high"),
        (0, "too low"),
        (5.5, "just above"),
        (0.99, "just below"),
        (float("nan"), "nan"),
        (math.inf, "inf"),
        (True, "a bool"),
        ("5", "a string"),
        (None, "none"),
        5,
        4.0,
        "5",
        None,
        (5, "ok", "extra"),
        (5,),
        (5, None),
        (5, 3),
    ],
)
def test_judge_eval_rejects_a_broken_judge_naming_the_example(fixed_answers, tok, verdict):
    def judge(instruction, prediction, reference):
        return verdict if instruction == PAIRS[2][0] else (4, "fine")

    with pytest.raises(ValueError, match=r"\bexample 2\b"):
        ec.judge_eval(None, tok, PAIRS, judge_fn=judge)


def test_judge_eval_on_a_real_tiny_model(random_model, tok):
    pairs = [("Hi", "Hello"), ("Capital of France?", "Paris")]
    preds = ec.generate(random_model, tok, [q for q, _ in pairs], max_new_tokens=8)
    result = ec.judge_eval(random_model, tok, pairs, max_new_tokens=8)
    assert [r["prediction"] for r in result.per_example] == preds
    assert [r["score"] for r in result.per_example] == [
        ec.mock_judge(q, p, ref)[0] for (q, ref), p in zip(pairs, preds)
    ]
