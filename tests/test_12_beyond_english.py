"""Lesson 12 (notebooks/12_beyond_english.ipynb): token F1 on text without spaces, NFKC, bits per
character."""

import json
import math

import pytest
import torch

import evalcore as ec

# The CMRC 2018 evaluation script (github.com/ymcui/cmrc2018, squad-style-data/cmrc2018_evaluate.py,
# commit 5c81039): its own punctuation list, its segmentation and its F1, rewritten here from the
# script's logic. Two differences from the script: Python 3 strings, and str.split where the script
# calls nltk.word_tokenize (the same on the lowercase, punctuation-free Latin runs used below).
CMRC_SP_CHAR = set("-:_*^/\\~`+=，。：？！“”；’《》·、「」（）－～『』") | {"……"}


def cmrc_mixed_segmentation(text, rm_punc=False):
    segs, run = [], ""
    for ch in text.lower().strip():
        if rm_punc and ch in CMRC_SP_CHAR:
            continue
        if "\u4e00" <= ch <= "\u9fa5" or ch in CMRC_SP_CHAR:
            segs, run = segs + run.split() + [ch], ""
        else:
            run += ch
    return segs + run.split()


def cmrc_longest_common_substring(a, b):
    best, table = 0, [[0] * (len(b) + 1) for _ in range(len(a) + 1)]
    for i in range(len(a)):
        for j in range(len(b)):
            if a[i] == b[j]:
                table[i + 1][j + 1] = table[i][j] + 1
                best = max(best, table[i + 1][j + 1])
    return best


def cmrc_f1(prediction, answer):
    pred = cmrc_mixed_segmentation(prediction, rm_punc=True)
    ans = cmrc_mixed_segmentation(answer, rm_punc=True)
    common = cmrc_longest_common_substring(ans, pred)
    if common == 0:
        return 0.0
    precision, recall = common / len(pred), common / len(ans)
    return 2 * precision * recall / (precision + recall)


@pytest.mark.parametrize(
    "text, expected",
    [
        ("巴黎是法国的首都", list("巴黎是法国的首都")),
        ("the capital 巴黎 of France", ["the", "capital", "巴", "黎", "of", "France"]),
        ("iPhone手机", ["iPhone", "手", "机"]),
        ("東京タワー", ["東", "京", "タ", "ワ", "ー"]),  # kana are split too
        ("서울은 수도다", ["서울은", "수도다"]),  # Hangul keeps its spaced words
        ("巴黎。", ["巴", "黎"]),  # a mark of punctuation alone is not a token (issue 18 B.3)
        ("“巴黎”、「东京」！", ["巴", "黎", "东", "京"]),
        ("QS-2048。", ["QS-2048"]),  # a CJK mark is split off a Latin token, then dropped
        ("Paris. 巴黎", ["Paris.", "巴", "黎"]),  # Latin punctuation inside a word stays
        ("東京・大阪", ["東", "京", "大", "阪"]),  # the katakana middle dot
        ("𠀀𠀁", ["𠀀", "𠀁"]),  # extension B ideographs, beyond the BMP
        ("", []),
    ],
)
def test_segment_mixed_hand_cases(text, expected):
    assert ec.segment_mixed(text) == expected


@pytest.mark.parametrize(
    "text",
    [
        "巴黎是法国的首都",
        "the capital of 法国 is 巴黎",
        "dna双螺旋 structure",
        "abc",
        "长城 great wall 长城",
    ],
)
def test_segment_mixed_agrees_with_the_cmrc_2018_segmentation(text):
    assert ec.segment_mixed(ec.normalise_f1(text)) == cmrc_mixed_segmentation(text)


@pytest.mark.parametrize(
    "text",
    [
        "青石镇位于白鹭河东岸。",
        "《红楼梦》的作者是曹雪芹，生于南京。",
        "「东京」、大阪（日本）：二城？",
        "他说：“好！”",
        "邮编是qs2048。",
    ],
)
def test_segment_mixed_drops_punctuation_as_cmrc_2018_does_for_f1(text):
    """CMRC 2018 scores F1 on mixed_segmentation(..., rm_punc=True): its punctuation removed."""
    assert ec.segment_mixed(ec.normalise_f1(text)) == cmrc_mixed_segmentation(text, rm_punc=True)


def test_a_trailing_ideographic_full_stop_costs_nothing_under_mixed_segmentation():
    reference = "青石镇位于白鹭河东岸"
    assert ec.token_f1(reference + "。", reference, segmentation="mixed") == 1.0  # was 20 / 21
    assert ec.token_f1(reference + "。", reference) == 0.0  # whitespace: one token each, differ
    assert ec.token_f1("Paris.", "Paris", segmentation="mixed") == 0.0  # Latin: as in lesson 03


def test_token_f1_mixed_hand_computed():
    # all 8 characters shared, in another order: the bag of characters matches in full
    assert ec.token_f1("巴黎是法国的首都", "法国的首都是巴黎", segmentation="mixed") == 1.0
    # 2 of 3 prediction characters in the 4-character reference: P 2/3, R 2/4, F1 = 4/7
    assert ec.token_f1("巴黎市", "巴黎城区", segmentation="mixed") == pytest.approx(
        4 / 7, abs=1e-12
    )
    # a Latin word counts once, not per letter: "paris" + 巴 + 黎 against 巴 + 黎: P 2/3, R 1
    assert ec.token_f1("Paris 巴黎", "巴黎", segmentation="mixed") == pytest.approx(0.8, abs=1e-12)


def test_default_policy_is_unchanged_whitespace():
    assert ec.token_f1("巴黎是法国的首都", "法国的首都是巴黎") == 0.0  # one "word" each, different
    assert ec.token_f1("the cat sat", "a cat sat") == ec.token_f1(
        "the cat sat", "a cat sat", segmentation="whitespace"
    )


@pytest.mark.parametrize(
    "prediction, answer",
    [
        ("巴黎", "巴黎"),
        ("法国首都巴黎", "巴黎"),
        ("巴黎", "法国首都巴黎"),
        ("长城 great wall", "great wall"),
    ],
)
def test_bag_f1_equals_cmrc_lcs_f1_when_the_overlap_is_one_contiguous_run(prediction, answer):
    assert ec.token_f1(prediction, answer, segmentation="mixed") == pytest.approx(
        cmrc_f1(prediction, answer), abs=1e-12
    )


def test_bag_f1_and_cmrc_lcs_f1_differ_on_reordering():
    # CMRC scores the longest common substring (法国的首都, 5 of 8), evalcore the bag (8 of 8)
    assert cmrc_f1("巴黎是法国的首都", "法国的首都是巴黎") == pytest.approx(5 / 8, abs=1e-12)
    assert ec.token_f1("巴黎是法国的首都", "法国的首都是巴黎", segmentation="mixed") == 1.0


@pytest.mark.parametrize(
    "text, expected",
    [
        ("ＰＡＲＩＳ", "paris"),  # full-width Latin
        ("１２３", "123"),  # full-width digits
        ("①", "1"),  # circled digit
        ("ﬁne", "fine"),  # ligature
        ("ｶﾀｶﾅ", "カタカナ"),  # half-width katakana
        ("5㎏", "5kg"),  # a unit in one compatibility character
        ("Ａ\u3000Ｂ", "a b"),  # ideographic space becomes a space, then collapsed
    ],
)
def test_normalise_f1_nfkc_cases(text, expected):
    assert ec.normalise_f1(text, nfkc=True) == expected
    assert ec.normalise_f1(text) != expected  # without NFKC the forms stay apart


def test_token_f1_nfkc_flips_a_full_width_answer():
    assert ec.token_f1("ＰＡＲＩＳ", "Paris") == 0.0
    assert ec.token_f1("ＰＡＲＩＳ", "Paris", nfkc=True) == 1.0
    assert ec.f1_counts("１２３ 号", "123 号", nfkc=True) == (2, 2, 2)


def test_bad_segmentation_is_a_value_error():
    with pytest.raises(ValueError, match="segmentation must be one of .*'spaces'"):
        ec.token_f1("a", "a", segmentation="spaces")


def test_token_f1_eval_records_its_policy(random_model, tok):
    pairs = [("What is the capital of France?", "巴黎")]
    result = ec.token_f1_eval(
        random_model, tok, pairs, max_new_tokens=4, segmentation="mixed", nfkc=True
    )
    assert (result.extras["segmentation"], result.extras["nfkc"]) == ("mixed", True)
    assert (
        ec.token_f1_eval(random_model, tok, pairs, max_new_tokens=4).extras["segmentation"]
        == "whitespace"
    )


def test_bits_per_char_hand_case(tok):
    """A uniform model over the 259 byte tokens: every prediction costs log2(259) bits."""
    uniform = lambda ids: torch.zeros(*ids.shape, tok.vocab_size)  # noqa: E731
    text = "巴黎 is Paris"  # 2 characters of 3 bytes, 9 of 1: 11 characters, 15 bytes
    result = ec.perplexity_eval(uniform, tok, [text])
    bits = 14 * math.log2(tok.vocab_size)  # 15 byte tokens, 14 predictions
    # each token's loss is computed in float32 (log 259 to about 1e-7 relative), summed in float64
    assert (result.extras["total_bytes"], result.extras["total_chars"]) == (15, 11)
    assert result.per_example[0]["n_chars"] == 11
    assert result.extras["bits_per_byte"] == pytest.approx(bits / 15, rel=1e-6)
    assert result.extras["bits_per_char"] == pytest.approx(bits / 11, rel=1e-6)


def test_the_lesson_fixture_loads_deterministically_with_every_kind():
    data = ec.load_beyond_english()
    assert data == ec.load_beyond_english()
    assert len(data["qa"]) >= 10 and len(data["parallel"]) >= 5
    for item in data["qa"]:
        assert set(ec.PREDICTION_KINDS) <= {p["kind"] for p in item["predictions"]}, item["id"]
    assert sum(item["language"] == "zh" for item in data["qa"]) >= 10


@pytest.mark.parametrize(
    "broken, message",
    [
        ({"qa": [{"id": "x"}], "parallel": []}, r"qa\[0\] must be a dict with keys"),
        (
            {
                "qa": [
                    {
                        "id": "x",
                        "language": "zh",
                        "question": "q",
                        "references": ["a"],
                        "predictions": [{"kind": "right", "text": "a"}],
                    }
                ],
                "parallel": [],
            },
            r"qa\[0\] \(x\) needs a prediction of each kind",
        ),
        ({"qa": [], "parallel": [{"en": "a", "zh": ""}]}, r"parallel\[0\] must hold non-empty"),
    ],
)
def test_a_malformed_fixture_is_a_value_error(tmp_path, broken, message):
    path = tmp_path / "broken.json"
    path.write_text(json.dumps(broken), encoding="utf-8")
    with pytest.raises(ValueError, match=message):
        ec.load_beyond_english(path)
