"""Lesson 02: exact match and its normalisation, the official SQuAD v2.0 script's rules (its EM
and F1, reproduced independently), and exact_match_eval / token_f1_eval on fixed answers."""

import collections
import re
import string

import pytest

import evalcore as ec

# ----------------------------------------------------------------------------------------------
# normalise_em and exact_match
# ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text,expected",
    [
        ("Paris?!", "paris"),
        ("Paris .", "paris"),
        ("  Paris  ", "paris"),
        ("PARIS", "paris"),
        ("Paris!!!", "paris"),
        ("Paris. ! ?", "paris"),
        ("New\u00a0York", "new york"),  # no-break space
        ("New\u3000York", "new york"),  # ideographic space
        ("New \t\n\u2003 York", "new york"),
        ("\u00a0Tokyo\u3000", "tokyo"),
        ("Mr. Smith", "mr. smith"),  # only trailing . ! ? go
        ("U.S.A.", "u.s.a"),
        ("Hello, world!", "hello, world"),  # comma kept
        ("Paris,", "paris,"),
        ("Wait... what?", "wait... what"),
        ("?!.", ""),
        ("", ""),
        ("   ", ""),
        ("¿Qué?", "¿qué"),
        ("東京。", "東京。"),  # the ideographic full stop is not in . ! ?
    ],
)
def test_normalise_em_hand_cases(text, expected):
    assert ec.normalise_em(text) == expected


TRICKY = [
    "Paris?!",
    "Paris .",
    " . ",
    "a . . !",
    "x!?. ?",
    "  Mixed CASE  text.  ",
    "\u00a0\u3000",
    "New\u00a0York\u3000City!",
    "tab\tand\nnewline?",
    "İstanbul",
    "ǅemal",
    "ΣΊΣΥΦΟΣ.",
    "Straße",
    "ﬁnal.",
    "e\u0301.",
    "...",
    "?",
    "",
    "U.S.A. !",
    "Ends with space ? ",
    "a\u2028b.",
    "a\x1cb",
    "mid?dle",
    "🙂!",
    "東京。!",
    "  Wait... what ? ! ",
]


@pytest.mark.parametrize("text", TRICKY)
def test_normalise_em_is_idempotent(text):
    once = ec.normalise_em(text)
    assert ec.normalise_em(once) == once
    assert once == once.strip()
    assert "  " not in once
    assert not once.endswith((".", "!", "?"))


def test_exact_match_values_and_type():
    assert ec.exact_match("Paris", "paris.") == 1.0
    assert ec.exact_match("  the   Eiffel Tower!", "The Eiffel Tower") == 1.0
    assert ec.exact_match("Paris", "London") == 0.0
    assert ec.exact_match("Paris,", "Paris") == 0.0
    assert ec.exact_match("Tower Eiffel", "Eiffel Tower") == 0.0
    assert isinstance(ec.exact_match("a", "a"), float)


def test_exact_match_best_over_a_list_of_references():
    assert ec.exact_match("8", ["8", "eight"]) == 1.0
    assert ec.exact_match("Eight.", ["8", "eight"]) == 1.0
    assert ec.exact_match("seven", ["8", "eight"]) == 0.0
    assert ec.exact_match("8", ("8",)) == 1.0


def test_exact_match_with_another_normaliser():
    assert ec.exact_match("The Paris", "paris", normalise=ec.normalise_squad) == 1.0
    assert ec.exact_match("The Paris", "paris") == 0.0


@pytest.mark.parametrize(
    "prediction,reference",
    [
        (None, "a"),
        (5, "a"),
        (["a"], "a"),
        (b"a", "a"),
        ("a", None),
        ("a", 5),
        ("a", []),
        ("a", ["b", 3]),
        ("a", [None]),
        ("a", b"a"),
    ],
)
def test_exact_match_bad_input(prediction, reference):
    with pytest.raises(ValueError):
        ec.exact_match(prediction, reference)
    with pytest.raises(ValueError):
        ec.token_f1(prediction, reference)


# ----------------------------------------------------------------------------------------------
# SQuAD v2.0: the official script's behaviour, reproduced here independently
# ----------------------------------------------------------------------------------------------


def squad_normalize_answer(s):
    """evaluate-v2.0.py: lower, remove ASCII punctuation, articles -> ' ', collapse whitespace."""

    def remove_articles(text):
        regex = re.compile(r"\b(a|an|the)\b", re.UNICODE)
        return re.sub(regex, " ", text)

    def white_space_fix(text):
        return " ".join(text.split())

    def remove_punc(text):
        exclude = set(string.punctuation)
        return "".join(ch for ch in text if ch not in exclude)

    return white_space_fix(remove_articles(remove_punc(s.lower())))


def squad_get_tokens(s):
    if not s:
        return []
    return squad_normalize_answer(s).split()


def squad_compute_exact(a_gold, a_pred):
    return int(squad_normalize_answer(a_gold) == squad_normalize_answer(a_pred))


def squad_compute_f1(a_gold, a_pred):
    gold_toks = squad_get_tokens(a_gold)
    pred_toks = squad_get_tokens(a_pred)
    common = collections.Counter(gold_toks) & collections.Counter(pred_toks)
    num_same = sum(common.values())
    if len(gold_toks) == 0 or len(pred_toks) == 0:
        return int(gold_toks == pred_toks)  # no-answer: 1 if both empty, else 0
    if num_same == 0:
        return 0
    precision = 1.0 * num_same / len(pred_toks)
    recall = 1.0 * num_same / len(gold_toks)
    return (2 * precision * recall) / (precision + recall)


SQUAD_CASES = [
    ("Paris", "paris"),
    ("Paris。", "Paris"),  # U+3002 is not ASCII punctuation: kept
    ("“Paris”", "Paris"),
    ("Paris — France", "Paris France"),
    ("Paris – France", "Paris - France"),
    ("«Paris»", "Paris"),
    ("¿Qué?", "Qué"),
    ("Paris，France", "Paris France"),
    ("U.S.A.", "USA"),
    ("U.S. A", "US"),
    ("the U.S.A.", "usa"),
    ("The.Eiffel.Tower", "Eiffel Tower"),
    ("The Eiffel Tower", "eiffel tower"),
    ("theatre", "atre"),
    ("anthem", "them"),
    ("an anthem", "anthem"),
    ("A theory", "theory"),
    ("Athens", "thens"),
    ("the the the cat", "the cat"),
    ("cat cat cat dog", "cat dog dog"),
    ("a b c d e", "a f g h i"),
    ("Tower Eiffel", "Eiffel Tower"),
    ("", ""),
    ("A", ""),
    ("", "A"),
    ("the", ""),
    (".", ""),
    ("A", "an"),
    ("", "Paris"),
    ("Paris", ""),
    ("Paris\u00a0France", "paris france"),
    ("Paris\u3000France", "paris france"),
    ("zero\u200bwidth", "zero width"),
    ("ﬁnal", "final"),
    ("café", "cafe\u0301"),
    ("Rock'n'Roll", "rocknroll"),
    ("100 degrees Celsius", "100°C"),
    ("1,000", "1000"),
    ("$5.00", "500"),
    ("New York's Central Park", "central park in new york"),
    ("Cairo is the capital of Egypt and lies on the Nile.", "Cairo is the capital city of Egypt."),
    ("the cat sat on the mat", "a cat sat on a mat"),
    ("Apple an apple a day", "an apple"),
]


@pytest.mark.parametrize("pred,gold", SQUAD_CASES + [(g, p) for p, g in SQUAD_CASES])
def test_squad_compatibility(pred, gold):
    assert ec.normalise_squad(pred) == squad_normalize_answer(pred)
    assert ec.exact_match(pred, gold, normalise=ec.normalise_squad) == squad_compute_exact(
        gold, pred
    )
    assert ec.token_f1(pred, gold, normalise=ec.normalise_squad) == pytest.approx(
        squad_compute_f1(gold, pred), abs=1e-12
    )


@pytest.mark.parametrize(
    "text,expected",
    [
        ("The.Eiffel.Tower", "theeiffeltower"),  # punctuation goes before articles are matched
        ("U.S.A.", "usa"),
        ("U.S. A", "us"),  # the lone "a" left is an article
        ("theatre", "theatre"),
        ("anthem", "anthem"),
        ("A", ""),
        ("An apple, the pear; a plum!", "apple pear plum"),
        ("“Paris”。", "“paris”。"),
        ("Paris — France", "paris — france"),
    ],
)
def test_normalise_squad_hand_cases(text, expected):
    assert ec.normalise_squad(text) == expected


def test_squad_a_versus_empty():
    # 'A' normalises to '': EM 1 and F1 1 against an empty answer, as in the official script
    assert ec.exact_match("", "A", normalise=ec.normalise_squad) == 1.0
    assert ec.token_f1("", "A", normalise=ec.normalise_squad) == 1.0
    assert ec.token_f1("A", "Paris", normalise=ec.normalise_squad) == 0.0


def test_squad_best_over_golds():
    golds = ["Eiffel Tower", "the Eiffel Tower in Paris", "tower"]
    for pred in ["The Eiffel Tower", "tower in Paris", "Paris", "the tower"]:
        assert ec.exact_match(pred, golds, normalise=ec.normalise_squad) == max(
            squad_compute_exact(g, pred) for g in golds
        )
        assert ec.token_f1(pred, golds, normalise=ec.normalise_squad) == pytest.approx(
            max(squad_compute_f1(g, pred) for g in golds), abs=1e-12
        )


def squad_v2_gold_answers(answers):
    """The SQuAD v2.0 script's get_raw_scores: gold answers that normalise to "" are dropped, and
    an unanswerable question (none left) has the one gold answer ""."""
    gold = [a for a in answers if squad_normalize_answer(a)]
    return gold or [""]


@pytest.mark.parametrize(
    "golds",
    [["the the", "3.14"], ["a", "an"], ["The", "Paris"], ["", "x"], ["Paris", "the Paris"], ["."]],
)
@pytest.mark.parametrize("pred", ["", "3.14", "the", "Paris", "x"])
def test_squad_list_rule_drops_golds_that_normalise_to_empty(pred, golds):
    gold = squad_v2_gold_answers(golds)
    assert ec.exact_match(pred, golds, normalise=ec.normalise_squad) == max(
        squad_compute_exact(g, pred) for g in gold
    )
    assert ec.token_f1(pred, golds, normalise=ec.normalise_squad) == pytest.approx(
        max(squad_compute_f1(g, pred) for g in gold), abs=1e-12
    )


def test_squad_list_rule_by_hand():
    # the empty prediction no longer matches "the the", which the script drops before comparing
    assert ec.exact_match("", ["the the", "3.14"], normalise=ec.normalise_squad) == 0.0
    # evalcore's own normalisation keeps its rule: no gold is dropped
    assert ec.exact_match("", ["", "3.14"]) == 1.0


# ----------------------------------------------------------------------------------------------
# exact_match_eval and token_f1_eval (generation replaced by fixed answers)
# ----------------------------------------------------------------------------------------------

PAIRS = [
    ("What is the capital of France?", "Paris"),
    ("How many legs does a spider have?", ["8", "eight"]),
    ("Which planet is red?", "Mars"),
    ("Describe Tokyo.", "Tokyo is the capital of Japan."),
]
ANSWERS = ["paris.", "Eight", "Jupiter", "Tokyo is the capital city of Japan."]
RECORD_KEYS = {
    "instruction",
    "prediction",
    "reference",
    "score",
    "prediction_normalised",
    "reference_normalised",
}  # what both generation evals record per example


@pytest.fixture
def fixed_answers(monkeypatch):
    calls = []

    def fake_generate(model, tok, instructions, max_new_tokens=48, keep_unanswered=False):
        calls.append(list(instructions))
        return [ANSWERS[[q for q, _ in PAIRS].index(s)] for s in instructions]

    monkeypatch.setattr(ec, "generate", fake_generate)
    return calls


def test_exact_match_eval_records(fixed_answers, tok):
    result = ec.exact_match_eval(None, tok, PAIRS)
    assert fixed_answers == [[q for q, _ in PAIRS]]  # one batched call
    assert result.name == "exact_match"
    assert [r["score"] for r in result.per_example] == [1.0, 1.0, 0.0, 0.0]
    assert result.value == 0.5
    rec = result.per_example[1]
    assert RECORD_KEYS <= set(rec)
    assert rec["instruction"] == PAIRS[1][0] and rec["prediction"] == "Eight"
    assert rec["reference"] == ["8", "eight"]
    assert rec["prediction_normalised"] == "eight"
    assert rec["reference_normalised"] == ["8", "eight"]
    assert result.per_example[0]["reference_normalised"] == "paris"


def test_token_f1_eval_records(fixed_answers, tok):
    result = ec.token_f1_eval(None, tok, PAIRS)
    assert result.name == "token_f1"
    scores = [r["score"] for r in result.per_example]
    # "paris." vs "paris": punctuation kept -> 0; "eight" matches the 2nd reference -> 1;
    # tokyo is the capital [city] of japan. : 6 shared tokens in 7 + 6 -> 12 / 13
    assert scores[:3] == [0.0, 1.0, 0.0]
    assert scores[3] == pytest.approx(12 / 13, abs=1e-15)
    assert result.value == pytest.approx((1 + 12 / 13) / 4, abs=1e-15)
    rec = result.per_example[3]
    assert rec["precision"] == pytest.approx(6 / 7, abs=1e-15)
    assert rec["recall"] == 1.0
    assert RECORD_KEYS <= set(rec)


def test_evals_on_a_real_tiny_model(random_model, tok):
    pairs = [("Hi", "Hello"), ("Capital of France?", ["Paris", "paris"])]
    preds = ec.generate(random_model, tok, [q for q, _ in pairs])
    em = ec.exact_match_eval(random_model, tok, pairs)
    f1 = ec.token_f1_eval(random_model, tok, pairs)
    assert [r["prediction"] for r in em.per_example] == preds
    assert [r["prediction"] for r in f1.per_example] == preds
    assert [r["score"] for r in em.per_example] == [
        ec.exact_match(p, r) for p, (_, r) in zip(preds, pairs)
    ]


@pytest.mark.parametrize(
    "pairs",
    [[], None, "abc", [("q",)], [("q", "a", "b")], [(3, "a")], [("q", 3)], [("q", [])], ["qa"]],
)
def test_evals_reject_bad_pairs(fixed_answers, tok, pairs):
    for run in (ec.exact_match_eval, ec.token_f1_eval, ec.judge_eval):
        with pytest.raises(ValueError):
            run(None, tok, pairs)
