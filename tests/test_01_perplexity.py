"""Lesson 01: perplexity_eval against independent computations, rolling windows, bad inputs."""

import math

import pytest
import torch
import torch.nn.functional as F

import evalcore as ec

TEXTS = [
    "The capital of France is Paris.",
    "Bees make honey.",
    "日本の首都は東京です。🙂",
    "ok",
    "A much longer sentence about spiders, which have eight legs, and insects, which have six.",
    "Water boils at 100 degrees Celsius at sea level.",
]


@torch.no_grad()
def text_losses(model, tok, text):
    """Per-token NLL of one text alone: unpadded, logits[:-1] scored against ids[1:]."""
    ids = torch.tensor(tok.encode(text))
    logits = model(ids[None])[0]
    return F.cross_entropy(logits[:-1], ids[1:], reduction="none").double()


def independent_ppl(model, tok, texts):
    losses = [text_losses(model, tok, t) for t in texts]
    total = sum(float(x.sum()) for x in losses)
    count = sum(len(x) for x in losses)
    assert count == sum(len(tok.encode(t)) - 1 for t in texts)
    return math.exp(total / count)  # sum everything, divide once


def padded_batch(tok, texts):
    width = max(len(tok.encode(t)) for t in texts)
    ids = torch.full((len(texts), width), tok.pad_id, dtype=torch.long)
    for i, t in enumerate(texts):
        e = tok.encode(t)
        ids[i, : len(e)] = torch.tensor(e)
    return ids


# ----------------------------------------------------------------------------------------------
# The number itself
# ----------------------------------------------------------------------------------------------


def test_matches_independent_computation(trained_model, tok):
    result = ec.perplexity_eval(trained_model, tok, TEXTS, max_len=128, batch_size=4)
    assert result.name == "perplexity"
    assert result.value == pytest.approx(independent_ppl(trained_model, tok, TEXTS), rel=1e-6)
    for rec, text in zip(result.per_example, TEXTS):
        assert rec["score"] == pytest.approx(independent_ppl(trained_model, tok, [text]), rel=1e-6)
        assert rec["nll"] == pytest.approx(
            float(text_losses(trained_model, tok, text).sum()), rel=1e-6
        )


def test_is_far_from_uniform_for_the_trained_model(trained_model, tok):
    # guards the tests below: a model near uniform would make every recipe give ~259
    value = ec.perplexity_eval(trained_model, tok, TEXTS, max_len=128).value
    assert value < 100


def test_plain_callable_model_gives_the_same_number(trained_model, tok):
    a = ec.perplexity_eval(trained_model, tok, TEXTS, max_len=128).value
    b = ec.perplexity_eval(lambda ids: trained_model(ids), tok, TEXTS, max_len=128).value
    assert b == pytest.approx(a, rel=1e-6)


def test_batch_size_changes_nothing(trained_model, tok):
    texts = ec.load_fixtures()["lm"]
    runs = [
        ec.perplexity_eval(trained_model, tok, texts, max_len=64, batch_size=b, stride=24)
        for b in (1, 3, 20)
    ]
    for other in runs[1:]:
        assert other.value == pytest.approx(runs[0].value, rel=ec.BATCHED_RTOL)
        assert other.extras["total_tokens"] == runs[0].extras["total_tokens"]
        assert other.extras["windows"] == runs[0].extras["windows"]
        for a, b in zip(runs[0].per_example, other.per_example):
            assert a["text"] == b["text"]
            assert b["score"] == pytest.approx(a["score"], rel=ec.BATCHED_RTOL)


def test_off_by_one_changes_the_number(trained_model, tok):
    """Wrong: score logits at position i against the token at i (no shift)."""
    total, count = 0.0, 0
    with torch.no_grad():
        for t in TEXTS:
            ids = torch.tensor(tok.encode(t))
            logits = trained_model(ids[None])[0]
            total += float(F.cross_entropy(logits[1:], ids[1:], reduction="sum"))
            count += len(ids) - 1
    wrong = math.exp(total / count)
    right = ec.perplexity_eval(trained_model, tok, TEXTS, max_len=128).value
    assert right == pytest.approx(independent_ppl(trained_model, tok, TEXTS), rel=1e-6)
    assert abs(wrong - right) / right > 0.05


def test_padded_denominator_changes_the_number(trained_model, tok):
    """Wrong: sum the NLL over real tokens but divide by B * (T - 1), pads included."""
    ids = padded_batch(tok, TEXTS)
    with torch.no_grad():
        logits = trained_model(ids[:, :-1])
    target = ids[:, 1:]
    nll = F.cross_entropy(logits.transpose(1, 2), target, reduction="none")
    real = target != tok.pad_id
    wrong = math.exp(float(nll[real].sum()) / target.numel())
    right_by_hand = math.exp(float(nll[real].sum()) / int(real.sum()))
    right = ec.perplexity_eval(trained_model, tok, TEXTS, max_len=128, batch_size=len(TEXTS)).value
    assert int(real.sum()) < target.numel()  # there is padding in this batch
    assert right == pytest.approx(right_by_hand, rel=1e-6)
    assert abs(wrong - right) / right > 0.05


def test_averaging_per_batch_perplexities_changes_the_number(trained_model, tok):
    """Wrong: the mean of per-batch (here per-text) perplexities instead of one corpus number."""
    right = ec.perplexity_eval(trained_model, tok, TEXTS, max_len=128, batch_size=1).value
    wrong = sum(independent_ppl(trained_model, tok, [t]) for t in TEXTS) / len(TEXTS)
    assert abs(wrong - right) / right > 0.01


def test_agrees_with_torchmetrics_on_a_padded_batch(trained_model, tok):
    from torchmetrics.text import Perplexity

    ids = padded_batch(tok, TEXTS)
    with torch.no_grad():
        logits = trained_model(ids)
    metric = Perplexity(ignore_index=tok.pad_id)  # torchmetrics does not shift: we do
    metric.update(logits[:, :-1], ids[:, 1:])
    theirs = float(metric.compute())
    ours = ec.perplexity_eval(trained_model, tok, TEXTS, max_len=128, batch_size=3).value
    # torchmetrics takes softmax then log in float32: agreement to float32 rounding
    assert ours == pytest.approx(theirs, rel=1e-5)


# ----------------------------------------------------------------------------------------------
# Rolling windows
# ----------------------------------------------------------------------------------------------


def test_rolling_windows_hand_cases():
    # 10 tokens, max_len 4, stride 4: the first window feeds 4 tokens and scores targets 1-4;
    # then targets 5-8 with 1 token of context, then target 9 with its 4-token window.
    assert ec.rolling_windows(10, 4, 4) == [(0, 5, 1), (4, 9, 5), (5, 10, 9)]
    assert ec.rolling_windows(10, 4, 2) == [(0, 5, 1), (2, 7, 5), (4, 9, 7), (5, 10, 9)]
    assert ec.rolling_windows(5, 4, 2) == [(0, 5, 1)]  # max_len + 1 tokens: one window
    assert ec.rolling_windows(6, 4, 2) == [(0, 5, 1), (1, 6, 5)]
    assert ec.rolling_windows(2, 4, 2) == [(0, 2, 1)]
    assert ec.rolling_windows(17, 16, 8) == [(0, 17, 1)]
    assert ec.rolling_windows(18, 16, 8) == [(0, 17, 1), (1, 18, 17)]


@pytest.mark.parametrize(
    "n,max_len,stride",
    [
        (n, m, s)
        for n in (2, 5, 16, 17, 18, 40, 101)
        for m in (4, 16)
        for s in sorted({1, m // 2, m})
    ],
)
def test_rolling_windows_score_every_token_once_with_context(n, max_len, stride):
    windows = ec.rolling_windows(n, max_len, stride)
    scored = []
    for k, (begin, end, first) in enumerate(windows):
        assert 0 <= begin < first < end <= n
        assert end - begin - 1 <= max_len  # at most max_len input tokens
        scored += range(first, end)
        if k:
            assert first - begin >= max_len - stride  # context before the first scored target
            assert end - begin - 1 == max_len  # later windows are full
    assert scored == list(range(1, n))  # every token after the first, once, in order


def windowed_nll(model, tok, text, max_len, stride):
    """Independent strided scoring: per window, feed ids[b:e-1], score targets first..e-1."""
    ids = torch.tensor(tok.encode(text))
    n = len(ids)
    total, count, scored_up_to, windows = 0.0, 0, 1, []
    while scored_up_to < n:
        end = min(n, max_len + 1) if scored_up_to == 1 else min(scored_up_to + stride, n)
        begin = max(0, end - max_len - 1)
        with torch.no_grad():
            logits = model(ids[None, begin : end - 1])[0]  # position j-begin-1 predicts token j
        targets = torch.arange(scored_up_to, end)
        nll = F.cross_entropy(logits[targets - begin - 1], ids[targets], reduction="none")
        total += float(nll.double().sum())
        count += len(targets)
        windows.append((begin, end, scored_up_to))
        scored_up_to = end
    return total, count, windows


@pytest.mark.parametrize("max_len,stride", [(16, 8), (16, 16), (16, 5), (8, 1)])
def test_long_texts_are_scored_in_strided_windows(trained_model, tok, max_len, stride):
    texts = [TEXTS[4], "short one", "x" * (max_len + 1), TEXTS[0] * 2]
    result = ec.perplexity_eval(
        trained_model, tok, texts, max_len=max_len, stride=stride, batch_size=3
    )
    total, count = 0.0, 0
    for i, (text, rec) in enumerate(zip(texts, result.per_example)):
        nll, n, windows = windowed_nll(trained_model, tok, text, max_len, stride)
        assert n == len(tok.encode(text)) - 1 == rec["n_tokens"]
        assert rec["nll"] == pytest.approx(nll, rel=1e-6)
        got = [
            (w["begin"], w["end"], w["first_scored"])
            for w in result.extras["windows"]
            if w["text"] == i
        ]
        assert got == windows == ec.rolling_windows(n + 1, max_len, stride)
        total, count = total + nll, count + n
    assert result.value == pytest.approx(math.exp(total / count), rel=1e-6)
    assert result.extras["total_tokens"] == count
    # a text of exactly max_len + 1 tokens is a single window
    assert [w for w in result.extras["windows"] if w["text"] == 2] == [
        {"text": 2, "begin": 0, "end": max_len + 1, "first_scored": 1}
    ]
    assert len([w for w in result.extras["windows"] if w["text"] == 0]) > 1


def test_default_stride_is_half_max_len(trained_model, tok):
    result = ec.perplexity_eval(trained_model, tok, [TEXTS[4]], max_len=16)
    n = len(tok.encode(TEXTS[4]))
    got = [(w["begin"], w["end"], w["first_scored"]) for w in result.extras["windows"]]
    assert got == ec.rolling_windows(n, 16, 8)
    assert result.extras["stride"] == 8


# ----------------------------------------------------------------------------------------------
# Records, extras, short texts
# ----------------------------------------------------------------------------------------------


def test_per_example_in_input_order(trained_model, tok):
    texts = [TEXTS[4], TEXTS[3], TEXTS[0], TEXTS[2]]  # long, short, medium: sorting must not leak
    result = ec.perplexity_eval(trained_model, tok, texts, max_len=128, batch_size=2)
    assert len(result.per_example) == len(texts)
    for rec, text in zip(result.per_example, texts):
        assert rec["text"] == text
        assert rec["n_tokens"] == len(tok.encode(text)) - 1
        assert rec["score"] == pytest.approx(math.exp(rec["nll"] / rec["n_tokens"]), rel=1e-12)


def test_texts_too_short_to_score_get_none_and_stay_out_of_totals(trained_model, tok):
    texts = [TEXTS[0], "", "x", TEXTS[1]]
    result = ec.perplexity_eval(trained_model, tok, texts, max_len=128)
    assert [r["score"] is None for r in result.per_example] == [False, True, True, False]
    assert all(
        isinstance(r["score"], float) for r in (result.per_example[0], result.per_example[3])
    )
    assert result.per_example[1]["text"] == "" and result.per_example[2]["text"] == "x"
    only = ec.perplexity_eval(trained_model, tok, [TEXTS[0], TEXTS[1]], max_len=128)
    assert result.value == pytest.approx(only.value, rel=1e-12)
    assert (
        result.extras["total_tokens"]
        == only.extras["total_tokens"]
        == (len(tok.encode(TEXTS[0])) - 1 + len(tok.encode(TEXTS[1])) - 1)
    )
    assert {w["text"] for w in result.extras["windows"]} == {0, 3}
    # a 2-byte character is 2 tokens: 1 prediction
    one = ec.perplexity_eval(trained_model, tok, ["é"], max_len=128)
    assert one.extras["total_tokens"] == 1


def test_extras(trained_model, tok):
    result = ec.perplexity_eval(trained_model, tok, TEXTS, max_len=16, stride=8)
    ex = result.extras
    assert {"total_tokens", "mean_nll", "bits_per_token", "histogram", "windows"} <= set(ex)
    assert ex["total_tokens"] == sum(len(tok.encode(t)) - 1 for t in TEXTS)
    assert ex["total_tokens"] == sum(r["n_tokens"] for r in result.per_example)
    total_nll = sum(r["nll"] for r in result.per_example)
    assert ex["mean_nll"] == pytest.approx(total_nll / ex["total_tokens"], rel=1e-12)
    assert result.value == pytest.approx(math.exp(ex["mean_nll"]), rel=1e-12)
    assert ex["bits_per_token"] == pytest.approx(ex["mean_nll"] / math.log(2), rel=1e-12)
    assert ex["bits_per_token"] == pytest.approx(math.log2(result.value), rel=1e-12)
    edges, counts = ex["histogram"]["edges"], ex["histogram"]["counts"]
    assert len(edges) == len(counts) + 1
    assert all(a < b for a, b in zip(edges, edges[1:]))
    assert sum(counts) == ex["total_tokens"]
    token_nll = [x for r in result.per_example for x in r["token_nll"]]
    assert edges[0] <= min(token_nll) and max(token_nll) <= edges[-1]
    assert isinstance(ex["windows"], list) and len(ex["windows"]) > len(TEXTS)  # some split
    assert all(set(w) == {"text", "begin", "end", "first_scored"} for w in ex["windows"])


def test_bits_per_byte_counts_every_byte_bits_per_token_only_the_scored_ones(trained_model, tok):
    """Without BOS the first byte of each text is context: bits per token divides by the n - 1
    predictions, bits per byte by all n bytes, so on byte tokens the two differ (issue 18 A.11)."""
    ascii_texts = [t for t in TEXTS if t.isascii()]
    result = ec.perplexity_eval(trained_model, tok, ascii_texts, max_len=128)
    ex, bits = result.extras, result.extras["total_nll"] / math.log(2)
    n_bytes = sum(len(t.encode("utf-8")) for t in ascii_texts)
    assert ex["first_token_scored"] is False and ex["bos"] is False
    assert (ex["total_bytes"], ex["total_tokens"]) == (n_bytes, n_bytes - len(ascii_texts))
    assert ex["bits_per_token"] == pytest.approx(bits / (n_bytes - len(ascii_texts)), rel=1e-12)
    assert ex["bits_per_byte"] == pytest.approx(bits / n_bytes, rel=1e-12)
    assert ex["bits_per_byte"] < ex["bits_per_token"]


# ----------------------------------------------------------------------------------------------
# Bad inputs
# ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "texts", [[], (), ["", "x"], [""], "a plain str", None, ["ok text", 3], [b"bytes!"]]
)
def test_bad_texts_raise(random_model, tok, texts):
    with pytest.raises(ValueError):
        ec.perplexity_eval(random_model, tok, texts, max_len=32)


@pytest.mark.parametrize(
    "kwargs",
    [
        dict(batch_size=0),
        dict(batch_size=-2),
        dict(batch_size=1.5),
        dict(batch_size=True),
        dict(stride=0),
        dict(stride=-1),
        dict(stride=33),
        dict(stride=2.0),
        dict(max_len=0),
        dict(max_len=97),
    ],
)  # 97 > the model's max_len of 96
def test_bad_arguments_raise(random_model, tok, kwargs):
    kwargs = {"max_len": 32, **kwargs}
    with pytest.raises(ValueError):
        ec.perplexity_eval(random_model, tok, ["some text here"], **kwargs)


# ----------------------------------------------------------------------------------------------
# Loss by position in the window (lesson 01: was every position trained?)
# ----------------------------------------------------------------------------------------------


def test_nll_by_position_of_a_uniform_model_is_ln_v_everywhere(tok):
    uniform = lambda ids: torch.zeros(*ids.shape, tok.vocab_size)  # noqa: E731
    per_position = ec.nll_by_position(uniform, tok, ["abcdefgh", "ijklmnop"], window=8, step=3)
    assert len(per_position) == 8
    assert per_position == pytest.approx([math.log(tok.vocab_size)] * 8, rel=1e-7)  # float32 logits


def test_nll_by_position_matches_a_hand_loop(tok, random_model):
    texts = ["The Sun is a star.", "Owls hunt at night."]
    got = ec.nll_by_position(random_model, tok, texts, window=10, step=5, batch_size=2)
    stream = tok.encode(" ".join(texts))
    rows = [stream[b : b + 11] for b in range(0, len(stream) - 10, 5)]
    with torch.no_grad():
        nll = [
            F.cross_entropy(
                random_model(torch.tensor([r[:-1]]))[0], torch.tensor(r[1:]), reduction="none"
            )
            for r in rows
        ]
    expected = torch.stack(nll).double().mean(0)
    assert got == pytest.approx(expected.tolist(), rel=1e-6)


def test_nll_by_position_rejects_a_window_longer_than_the_texts(tok, random_model):
    with pytest.raises(ValueError, match="fewer than window"):
        ec.nll_by_position(random_model, tok, ["short"], window=16)
    with pytest.raises(ValueError, match="step"):
        ec.nll_by_position(random_model, tok, ["short text here"], window=4, step=0)


# ----------------------------------------------------------------------------------------------
# Batches by length, with padding bounded
# ----------------------------------------------------------------------------------------------


def test_length_batches_cap_rows_and_padding():
    lengths = [257, 12, 103, 76, 69, 10, 257, 60, 59, 58, 57, 56, 55, 54, 53]
    batches = ec.length_batches(lengths, batch_size=4)
    assert sorted(i for b in batches for i in b) == list(range(len(lengths)))  # each index once
    assert all(len(b) <= 4 for b in batches)
    for b in batches:
        widths = [lengths[i] for i in b]
        assert widths == sorted(widths, reverse=True)
        assert min(widths) >= 0.75 * max(widths)  # at most 25% of a batch is padding
    assert [lengths[i] for i in batches[0]] == [257, 257] and [lengths[i] for i in batches[1]] == [
        103
    ]


def test_perplexity_eval_feeds_sorted_batches_with_bounded_padding(tok):
    seen = []

    def recording(ids):  # a uniform model that remembers what it was fed
        seen.append(ids.clone())
        return torch.zeros(*ids.shape, tok.vocab_size)

    texts = ec.load_fixtures()["lm"]  # 19 short texts and one of 748 tokens
    ec.perplexity_eval(recording, tok, texts, max_len=256, batch_size=8)
    widths = [ids.shape[1] for ids in seen]
    assert widths == sorted(widths, reverse=True) and all(ids.shape[0] <= 8 for ids in seen)
    real = sum(int((ids != tok.pad_id).sum()) for ids in seen)
    fed = sum(ids.numel() for ids in seen)
    assert 1 - real / fed < 0.10, 1 - real / fed  # it was 73% with 8 texts to a batch
