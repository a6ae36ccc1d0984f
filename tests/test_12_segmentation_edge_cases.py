"""Lesson 12 edge cases (issue 19): compatibility ideographs, NFKC before lowercasing, and
token_f1_eval passing its policy through to the scores, seen through the eval itself."""

import unicodedata

import pytest
import torch

import evalcore as ec


@pytest.mark.parametrize(
    "text, expected",
    [
        ("豈更", ["豈", "更"]),  # U+F900 and U+F901, the first compatibility ideographs
        ("abc豈def", ["abc", "豈", "def"]),
        ("館舘", ["館", "舘"]),  # a unified ideograph, then U+FA2C
        ("\ufa6dy", ["\ufa6d", "y"]),  # the last assigned one before U+FA70
        ("\ufad9x", ["\ufad9", "x"]),  # the last of the block's second run
        ("㐀䶿", ["㐀", "䶿"]),  # U+3400 and U+4DBF, the ends of extension A
    ],
)
def test_compatibility_and_extension_a_ideographs_are_words_of_their_own(text, expected):
    assert ec.segment_mixed(text) == expected


def test_compatibility_ideographs_score_as_characters():
    # 豈 and 更 shared, the reference has a third character: P 2/2, R 2/3, F1 = 4/5
    assert ec.token_f1("豈更", "更豈館", segmentation="mixed") == pytest.approx(0.8, abs=1e-12)
    assert ec.token_f1("豈更", "更豈館") == 0.0  # two whitespace words, different


@pytest.mark.parametrize(
    "text, expected",
    [
        ("5㎒", "5mhz"),  # U+3392 SQUARE MHZ: NFKC gives "MHz", which has capitals to lower
        ("20℃", "20°c"),  # U+2103 DEGREE CELSIUS: NFKC gives "°C"
        ("㎆", "mb"),  # U+3386 SQUARE MB
    ],
)
def test_nfkc_comes_before_lowercasing(text, expected):
    assert text.lower() == text  # none of these has a case of its own: lowering first does nothing
    assert unicodedata.normalize("NFKC", text) != expected  # and NFKC alone leaves capitals
    assert ec.normalise_f1(text, nfkc=True) == expected


def test_token_f1_with_nfkc_matches_a_unit_written_in_one_character():
    assert ec.token_f1("5㎒", "5MHz", nfkc=True) == 1.0
    assert ec.token_f1("5㎒", "5MHz") == 0.0


# ----------------------------------------------------------------------------------------------
# token_f1_eval: the policy reaches the scores, not only the extras
# ----------------------------------------------------------------------------------------------


def answering(tok, answer):
    """A model that answers every question with `answer`, then PAD: after the prompt's RESP it
    predicts the answer's k-th byte at step k, whatever it was asked."""
    target = tok.encode(answer) + [tok.pad_id]

    def model(ids):  # (B, T) -> (B, T, V); only the last position matters for greedy decoding
        logits = torch.zeros(*ids.shape, tok.vocab_size)
        for b, row in enumerate(ids.tolist()):
            k = len(row) - 1 - max(i for i, t in enumerate(row) if t == tok.resp_id)
            logits[b, -1, target[min(k, len(target) - 1)]] = 1.0
        return logits

    return model


QUESTION = "What is the capital of France, in Latin letters and in Chinese?"
REFERENCE = "Paris 巴黎是首都"
ANSWER = "ＰＡＲＩＳ 巴黎"  # full-width Latin, then two ideographs


@pytest.mark.parametrize(
    "segmentation, nfkc, f1, precision, recall",
    [
        # pred [ＰＡＲＩＳ→paris, 巴, 黎] vs ref [paris, 巴, 黎, 是, 首, 都]: 3 shared
        ("mixed", True, 2 * 3 / (3 + 6), 1.0, 0.5),
        # pred [ｐａｒｉｓ, 巴, 黎]: the full-width word shares nothing: 2 shared of 3 and 6
        ("mixed", False, 2 * 2 / (3 + 6), 2 / 3, 1 / 3),
        # pred [paris, 巴黎] vs ref [paris, 巴黎是首都]: 1 shared of 2 and 2
        ("whitespace", True, 0.5, 0.5, 0.5),
        ("whitespace", False, 0.0, 0.0, 0.0),
    ],
)
def test_token_f1_eval_scores_under_the_policy_it_is_given(
    tok, segmentation, nfkc, f1, precision, recall
):
    model = answering(tok, ANSWER)
    assert ec.generate(model, tok, [QUESTION], max_new_tokens=30) == [ANSWER]
    result = ec.token_f1_eval(
        model, tok, [(QUESTION, REFERENCE)], 30, segmentation=segmentation, nfkc=nfkc
    )
    (record,) = result.per_example
    assert record["prediction"] == ANSWER
    assert record["score"] == pytest.approx(f1, abs=1e-12)
    assert (record["precision"], record["recall"]) == pytest.approx((precision, recall), abs=1e-12)
    assert record["prediction_normalised"] == ("paris 巴黎" if nfkc else "ｐａｒｉｓ 巴黎")
    assert result.value == pytest.approx(f1, abs=1e-12)
