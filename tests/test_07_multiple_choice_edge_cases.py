"""Multiple choice edge cases (issue 19): acc_norm counts characters, not bytes, on non-ASCII
choices; ties go to the first choice in acc, acc_norm and calibration's prediction.

lm-evaluation-harness (lm_eval/api/task.py, ConfigurableTask.process_results) computes
`completion_len = np.array([float(len(i)) for i in choices])` (len of a Python str: characters)
and takes `np.argmax`, which returns the first of equal maxima."""

import math

import pytest
import torch

import evalcore as ec


def item(choices, gold, question="q"):
    return {"question": question, "choices": choices, "gold": gold}


def test_acc_norm_divides_by_characters_not_utf8_bytes():
    # "日本" is 2 characters (6 bytes), "abc" 3 characters (3 bytes)
    # raw: -3 > -4 picks 日本; per character -1.5 < -1.333 picks abc;
    # per byte it would be -0.5 > -1.333, picking 日本
    result = ec.choice_accuracy([item(["日本", "abc"], gold=1)], [[-3.0, -4.0]])
    ((pred, pred_norm),) = [(r["pred"], r["pred_norm"]) for r in result.per_example]
    assert (pred, pred_norm) == (0, 1)
    assert (result.value, result.extras["acc_norm"]) == (0.0, 1.0)
    assert result.extras["disagreements"] == 1


def test_acc_norm_on_accented_choices_by_hand():
    # "café" 4 characters (5 bytes), "tea" 3: -8 / 4 = -2.0 > -6.3 / 3 = -2.1 picks café
    # (per byte -1.6, the same pick); "ça" 2 characters (3 bytes), "no" 2:
    # -3 / 2 = -1.5 < -2.8 / 2 = -1.4 picks "no", where per byte -1.0 would pick "ça"
    items = [item(["café", "tea"], gold=0), item(["ça", "no"], gold=1)]
    result = ec.choice_accuracy(items, [[-8.0, -6.3], [-3.0, -2.8]])
    assert [r["pred_norm"] for r in result.per_example] == [0, 1]
    assert result.extras["acc_norm"] == 1.0


def test_acc_breaks_ties_to_the_first_choice():
    items = [item(["a", "b", "c"], gold=1), item(["a", "b", "c"], gold=2)]
    # a tie between the 2nd and 3rd choices: the 2nd is predicted in both items
    result = ec.choice_accuracy(items, [[-3.0, -1.0, -1.0], [-3.0, -1.0, -1.0]])
    assert [r["pred"] for r in result.per_example] == [1, 1]
    assert [r["score"] for r in result.per_example] == [1.0, 0.0]
    assert result.value == 0.5


def test_acc_norm_breaks_ties_to_the_first_choice():
    # per character: "x" -3 / 1 = -3; "yy" -2 / 2 = -1; "zz" -2 / 2 = -1: a tie of 2nd and 3rd
    items = [item(["x", "yy", "zz"], gold=2)]
    result = ec.choice_accuracy(items, [[-3.0, -2.0, -2.0]])
    (record,) = result.per_example
    assert (record["pred"], record["pred_norm"]) == (1, 1)
    assert result.extras["acc_norm"] == 0.0


def test_calibration_prediction_breaks_ties_to_the_first_choice():
    # three choices, the last two tied at the top: probabilities e^-2, e^0, e^0 over their sum
    items = [item(["a", "b", "c"], gold=2)]
    result = ec.calibration_result(items, [[-2.0, 0.0, 0.0]], n_bins=4)
    (record,) = result.per_example
    assert record["prediction"] == "b" and record["correct"] == 0.0
    top = 1 / (2 + math.exp(-2))
    assert record["confidence"] == pytest.approx(top, rel=1e-12)
    assert result.value == pytest.approx(top, rel=1e-12)  # one item: ECE = |conf - 0|


def uniform(tok):
    """Equal logits everywhere: every scored token costs ln(vocab_size) nats."""
    return lambda ids: torch.zeros(*ids.shape, tok.vocab_size)


def test_choice_logliks_by_hand_keep_each_items_choice_order(tok):
    # a uniform model: a choice of n bytes costs n ln 259 (its closing PAD left out by default)
    items = [item(["a", "bbb", "cc"], gold=0, question="q1"), item(["dddd", "e"], 1, "q2")]
    lls = ec.choice_logliks(uniform(tok), tok, items)
    per_token = -math.log(tok.vocab_size)
    assert lls == [
        pytest.approx([1 * per_token, 3 * per_token, 2 * per_token], rel=1e-6),
        pytest.approx([4 * per_token, 1 * per_token], rel=1e-6),
    ]
    with_end = ec.choice_logliks(uniform(tok), tok, items, end_token=True)
    assert with_end[1] == pytest.approx([5 * per_token, 2 * per_token], rel=1e-6)


def test_answer_confidences_include_the_closing_token(tok):
    # a uniform model: "ab" and its closing PAD are 3 tokens of probability 1/259 each
    (product,) = ec.answer_confidences(uniform(tok), tok, ["q"], ["ab"], reduce="product")
    assert product == pytest.approx(tok.vocab_size**-3, rel=1e-5)
    (mean,) = ec.answer_confidences(uniform(tok), tok, ["q"], ["ab"])
    assert mean == pytest.approx(1 / tok.vocab_size, rel=1e-5)  # the geometric mean
    # "" scores its closing PAD alone: no error, unlike choice log-likelihoods without it
    assert ec.answer_confidences(uniform(tok), tok, ["q"], [""]) == pytest.approx(
        [1 / tok.vocab_size], rel=1e-5
    )


@pytest.mark.parametrize("gold", [2, -1, 1.0, None])
def test_a_gold_that_indexes_no_choice_is_refused_up_front(tok, gold):
    items = [item(["a", "b"], gold=0), item(["c", "d"], gold=gold)]
    with pytest.raises(ValueError, match=r"items\[1\] must be .*'gold': index into choices"):
        ec.choice_accuracy(items, [[-1.0, -2.0], [-1.0, -2.0]])
    with pytest.raises(ValueError, match=r"items\[1\]"):
        ec.choice_logliks(uniform(tok), tok, items)
