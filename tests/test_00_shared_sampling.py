"""Part 0 and lesson 11: sampled decoding (ec.sample) and stop strings, on TinyGPT, on toy models
whose next-token distribution is written by hand, and on wrapped Hugging Face models (the shipped
BPE GPT-2 and a random two-layer Llama with grouped-query attention).

Reproducibility is checked token for token; the sampler's distribution by a chi-square test whose
threshold is the chi-square quantile a correct sampler exceeds once in a million seeds."""

import math
import random

import pytest
import torch

import evalcore as ec
from conftest import TINY, make_tiny

transformers = pytest.importorskip("transformers")
scipy_stats = pytest.importorskip("scipy.stats")

PROMPTS = ["What is the capital of France?", "Hi", "", "Name the red planet.", "x" * 20, "日本"]


def tokens_of(rows):
    """The token lists of _decode's rows, per prompt and sample."""
    return [[row.tokens for row in prompt_rows] for prompt_rows in rows]


@pytest.fixture(scope="module")
def wandering():
    """A random TinyGPT with its weights scaled up: sampled at temperature 1 its answers stop
    (at a special token) after very different numbers of tokens."""
    model = make_tiny(seed=2)
    with torch.no_grad():
        for p in model.parameters():
            p.mul_(4.0)
    return model


@pytest.fixture(scope="module")
def gpt2():
    return ec.load_hf(ec.HF_CHECKPOINT_DIR)


@pytest.fixture(scope="module")
def llama(gpt2):
    """A random two-layer Llama (4 query heads sharing 2 key-value heads, SDPA attention) behind
    the shipped BPE tokenizer: the architecture of SmolLM2, small."""
    torch.manual_seed(0)
    cfg = transformers.LlamaConfig(
        vocab_size=ec.HF_VOCAB_SIZE,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=128,
        attn_implementation="sdpa",
    )
    hf_model = transformers.LlamaForCausalLM(cfg)
    with torch.no_grad():
        hf_model.lm_head.weight.mul_(30.0)  # logits of a few nats: samples far from uniform
    return ec.wrap_hf(hf_model, gpt2[1].hf)


# ----------------------------------------------------------------------------------------------
# Temperature 0 is greedy; one generator per (seed, prompt, sample index)
# ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("which", ["tinygpt", "gpt2", "llama"])
def test_temperature_zero_is_exactly_greedy(which, wandering, tok, gpt2, llama):
    model, t = {"tinygpt": (wandering, tok), "gpt2": gpt2, "llama": llama}[which]
    greedy = ec.generate(model, t, PROMPTS, max_new_tokens=12)
    assert ec.sample(model, t, PROMPTS, n=3, temperature=0, max_new_tokens=12) == [
        [g] * 3 for g in greedy
    ]
    sampled = ec.sample(model, t, PROMPTS, n=3, temperature=1.0, max_new_tokens=12)
    assert sum(s != [g] * 3 for s, g in zip(sampled, greedy)) >= 4  # sampling does sample


@pytest.mark.parametrize("which", ["tinygpt", "llama"])
def test_a_sample_is_the_same_whatever_the_batch_and_the_order(which, wandering, tok, llama):
    model, t = {"tinygpt": (wandering, tok), "llama": llama}[which]
    kw = dict(max_new_tokens=16, temperature=1.0, top_p=0.9, seed=7, stop=("e",))
    one = [ec._decode(model, t, [q], n=1, **kw)[0][0].tokens for q in PROMPTS]
    for batch_size in (1, 3, 8):
        rows = ec._decode(model, t, PROMPTS, n=1, batch_size=batch_size, **kw)
        assert [r[0].tokens for r in rows] == one, batch_size
    order = list(range(len(PROMPTS)))
    random.Random(0).shuffle(order)
    shuffled = ec._decode(model, t, [PROMPTS[i] for i in order], n=1, **kw)
    assert [shuffled[order.index(i)][0].tokens for i in range(len(PROMPTS))] == one
    # n samples a prompt: the first three of five are the three of n=3, in any batch
    three = tokens_of(ec._decode(model, t, PROMPTS, n=3, **kw))
    assert [s[0] for s in three] == one  # sample 0 is the sample of n=1
    for batch_size in (3, 8, 64):
        five = tokens_of(ec._decode(model, t, PROMPTS, n=5, batch_size=batch_size, **kw))
        assert [s[:3] for s in five] == three, batch_size
    # the rows ended (stop token, stop string, max_new_tokens) after many different numbers of
    # tokens, and the samples differ
    lengths = {len(s) for prompt in five for s in prompt}
    assert len(lengths) >= 4 and min(lengths) < 16 and max(lengths) == 16
    assert all(len({tuple(s) for s in prompt}) >= 4 for prompt in five)


def test_the_seed_and_the_prompt_choose_the_stream(wandering, tok):
    kw = dict(n=4, temperature=1.0, max_new_tokens=12)
    a = ec.sample(wandering, tok, PROMPTS, seed=1, **kw)
    assert a == ec.sample(wandering, tok, PROMPTS, seed=1, **kw)
    b = ec.sample(wandering, tok, PROMPTS, seed=2, **kw)
    assert sum(x != y for x, y in zip(a, b)) >= len(PROMPTS) - 1
    # the same instruction twice: the same samples (the seed comes from the prompt, not its place)
    twice = ec.sample(wandering, tok, [PROMPTS[0], PROMPTS[0]], seed=1, **kw)
    assert twice == [a[0], a[0]]


def test_finished_rows_leave_the_batch_and_samples_share_one_prefill(wandering, tok):
    sizes = []
    hook = wandering.register_forward_pre_hook(lambda m, args: sizes.append(tuple(args[0].shape)))
    try:
        ec.sample(wandering, tok, PROMPTS[:4], n=5, temperature=1.0, max_new_tokens=16)
    finally:
        hook.remove()
    assert sizes[0][0] == 4 and sizes[0][1] > 1  # the prefill: each prompt once
    steps = [b for b, t in sizes[1:]]
    assert all(t == 1 for _, t in sizes[1:]) and steps[0] <= 20
    assert steps == sorted(steps, reverse=True) and steps[-1] < steps[0]  # rows left as they ended


def test_a_waiting_row_takes_an_ended_rows_place_at_once(wandering, tok):
    """Continuous batching: with more rows than batch_size, the batch stays full while rows wait
    (each ended row's place taken by the next), each prompt prefilled once but the one whose
    samples the first batch split, and the samples are those of one big batch."""
    calls = []
    hook = wandering.register_forward_pre_hook(lambda m, args: calls.append(tuple(args[0].shape)))
    kw = dict(n=3, temperature=1.0, top_p=0.9, seed=5, max_new_tokens=16)
    try:
        rows = ec._decode(wandering, tok, PROMPTS, batch_size=4, **kw)
    finally:
        hook.remove()
    prefills = [b for b, t in calls if t > 1]  # every prompt is longer than one token
    steps = [b for b, t in calls if t == 1]
    assert sum(prefills) <= len(PROMPTS) + 1  # each prompt once; the split one twice
    assert len(prefills) > 2  # prompts prefilled as places came free, not all up front
    assert max(steps) == 4 and steps.count(4) >= len(steps) // 2
    assert tokens_of(rows) == tokens_of(ec._decode(wandering, tok, PROMPTS, batch_size=64, **kw))


# ----------------------------------------------------------------------------------------------
# The sampler: top-p by hand, and the distribution against softmax(logits / T)
# ----------------------------------------------------------------------------------------------

# Token 3 has probability 1/2, token 0 1/4, token 4 1/8 and tokens 1 and 2 1/16 each.
TOY_P = torch.tensor([[0.25, 0.0625, 0.0625, 0.5, 0.125]], dtype=torch.float64)
TOY_LOGITS = TOY_P.log().float()


@pytest.mark.parametrize(
    "top_p, u, token",
    [
        (0.4, 0.99, 3),  # 1/2 reaches 0.4: the most likely token alone
        (0.7, 0.66, 3),  # 1/2 + 1/4 reaches 0.7: tokens 3 and 0, renormalised to 2/3 and 1/3
        (0.7, 0.67, 0),
        (0.7, 0.999, 0),  # never token 4, outside the nucleus
        (0.8, 0.57, 3),  # 7/8 reaches 0.8: 3, 0, 4; 3 below 0.5 / 0.875 = 0.571...
        (0.8, 0.58, 0),  # 0 below 0.75 / 0.875 = 0.857...
        (0.8, 0.85, 0),
        (0.8, 0.86, 4),
        (0.8, 0.999, 4),
        (0.9, 0.99, 1),  # 15/16 reaches 0.9: tokens 1 and 2 tie at 1/16; the lower id comes first
        (1.0, 0.999, 2),  # everything, and the very last of it
        (1.0, 0.0, 3),
    ],
)
def test_top_p_keeps_the_smallest_set_whose_probability_reaches_p(top_p, u, token):
    picked = ec._draw(TOY_LOGITS, 1.0, top_p, torch.tensor([u], dtype=torch.float64))
    assert picked.tolist() == [token]


def reference_draw(logits, temperature, top_p, u):
    """_draw written out from its definition, one row at a time over the whole vocabulary."""
    out = []
    for row, x in zip(logits.tolist(), u.tolist()):
        p = torch.softmax(torch.tensor(row, dtype=torch.float64) / temperature, -1).tolist()
        order = [i for i in sorted(range(len(row)), key=lambda i: (-row[i], i)) if p[i] > 0]
        kept, mass = [], 0.0
        for i in order:
            if top_p < 1 and mass >= top_p:
                break
            kept.append(i)
            mass += p[i]
        target, cum = x * (mass if top_p < 1 else 1.0), 0.0
        for i in kept:
            cum += p[i]
            if cum > target:
                break
        out.append(i)
    return out


@pytest.mark.parametrize("candidates", [256, 5])
def test_the_draw_among_the_top_candidates_equals_the_draw_among_all_tokens(
    monkeypatch, candidates
):
    # logits with many ties (rounded to steps of 0.5), flat rows, peaked rows, -inf tokens; with 5
    # candidates most draws reach past them and are drawn again among all tokens
    monkeypatch.setattr(ec, "_CANDIDATES", candidates)
    g = torch.Generator().manual_seed(0)
    logits = (torch.randn(300, 400, generator=g) * torch.rand(300, 1, generator=g) * 8).round() / 2
    logits[:20] = 0.0
    logits[20:40, 7:] = -math.inf
    u = torch.rand(300, generator=g, dtype=torch.float64)
    for temperature, top_p in ((1.0, 1.0), (0.7, 0.9), (1.3, 0.5), (0.2, 0.999)):
        got = ec._draw(logits, temperature, top_p, u).tolist()
        assert got == reference_draw(logits, temperature, top_p, u), (temperature, top_p)


def test_temperature_scales_the_logits_before_the_softmax():
    # at T = 2 the probabilities are proportional to sqrt(p): 0.5, 0.707.., 0.25, 0.25, 0.354..
    sqrt = TOY_P.sqrt() / TOY_P.sqrt().sum()
    first = float(sqrt[0, 3])  # token 3's share, 0.3487...
    assert (
        abs(first - math.sqrt(0.5) / (math.sqrt(0.5) + 0.5 + 0.25 + 0.25 + math.sqrt(0.125)))
        < 1e-12
    )
    for u, token in ((first - 1e-6, 3), (first + 1e-6, 0)):
        picked = ec._draw(TOY_LOGITS, 2.0, 1.0, torch.tensor([u], dtype=torch.float64))
        assert picked.tolist() == [token]


class FixedNext(ec.TinyGPT):
    """A TinyGPT whose every next-token distribution is the same `logits` (V,)."""

    def __init__(self, logits):
        super().__init__(ec.InstructionTokenizer.vocab_size, **TINY)
        self.fixed = logits

    def forward(self, ids, *args, **kwargs):
        super().forward(ids, *args, **kwargs)  # fills the KV cache the decoder keeps
        return self.fixed.expand(*ids.shape, -1)


def chi_square(counts, probs):
    """Pearson's statistic of counts against probabilities; inf if a count falls where p = 0."""
    n = sum(counts)
    if any(c and p == 0 for c, p in zip(counts, probs)):
        return math.inf
    return sum((c - n * p) ** 2 / (n * p) for c, p in zip(counts, probs) if p > 0)


def nucleus(logits, temperature, top_p):
    """softmax(logits / T) in float64, zero outside the smallest top set reaching top_p."""
    p = torch.softmax(logits.double() / temperature, -1)
    order = p.argsort(descending=True, stable=True)
    before = p[order].cumsum(0) - p[order]
    kept = order[before < top_p]
    q = torch.zeros_like(p)
    q[kept] = p[kept] / p[kept].sum()
    return q


@pytest.mark.parametrize("temperature, top_p", [(1.0, 1.0), (0.7, 1.0), (1.5, 0.9), (0.7, 0.8)])
def test_the_sampled_distribution_is_softmax_of_the_logits_over_the_temperature(
    tok, temperature, top_p
):
    support = tok.encode("abcdef")
    logits = torch.full((tok.vocab_size,), -math.inf)
    logits[support] = torch.tensor([2.0, 1.0, 0.5, 0.0, -0.5, -3.0])
    n = 4000
    (rows,) = ec._decode(FixedNext(logits).eval(), tok, ["q"], 1, n, temperature, top_p, seed=3)
    firsts = [row.tokens[0] for row in rows]
    counts = [firsts.count(t) for t in support]
    assert sum(counts) == n  # nothing outside the support
    expected = nucleus(logits, temperature, top_p)[support].tolist()
    df = sum(p > 0 for p in expected) - 1
    # a correct sampler exceeds this once in a million seeds (Pearson's statistic ~ chi2(df))
    threshold = scipy_stats.chi2.ppf(1 - 1e-6, df)
    assert chi_square(counts, expected) < threshold, (counts, expected)
    # ... and the test can tell: the distributions of the usual bugs are rejected
    bugs = {
        "temperature ignored": (logits, 1.0, top_p),
        "logits multiplied by the temperature": (logits * temperature**2, temperature, top_p),
        "top-p ignored": (logits, temperature, 1.0),
    }
    for bug, (wrong_logits, t, p) in bugs.items():
        if not torch.equal(wrong_logits, logits) or (t, p) != (temperature, top_p):
            q = nucleus(wrong_logits, t, p)[support].tolist()
            if q != expected:
                assert chi_square(counts, q) > threshold, bug


# ----------------------------------------------------------------------------------------------
# Stop strings
# ----------------------------------------------------------------------------------------------


class Bigram(ec.TinyGPT):
    """A TinyGPT whose next token follows from the current one by a table (else `default`)."""

    def __init__(self, follows, default):
        super().__init__(ec.InstructionTokenizer.vocab_size, **TINY)
        table = torch.full((self.config.vocab_size,), default)
        for a, b in follows.items():
            table[a] = b
        self.logits = torch.nn.functional.one_hot(table, self.config.vocab_size) * 20.0  # (V, V)

    def forward(self, ids, *args, **kwargs):
        super().forward(ids, *args, **kwargs)
        return self.logits[ids].float()


def spelling(tok, text):
    """A Bigram model that answers `text` then repeats its last byte (each byte once in text)."""
    ids = [tok.resp_id] + tok.encode(text)
    assert len(set(ids)) == len(ids)
    return Bigram(dict(zip(ids, ids[1:])), default=ids[-1]).eval()


ANSWER = "ab\ndef xé!"  # é is two bytes, so two tokens


@pytest.mark.parametrize(
    "stop, expected",
    [
        (None, "ab\ndef xé!!!!!!"),
        (["\ndef"], "ab"),  # HumanEval's stop, split over four byte tokens
        (["f x"], "ab\nde"),
        (["é"], "ab\ndef x"),  # half of é decodes to U+FFFD and matches nothing
        (["!!"], "ab\ndef xé"),
        (["zz"], "ab\ndef xé!!!!!!"),  # never met: the answer runs to max_new_tokens
        (["x", "b\n"], "a"),  # the earliest of several stops
        (["ab"], ""),
    ],
)
def test_stop_strings_cut_the_answer_before_the_first_of_them(tok, stop, expected):
    model = spelling(tok, ANSWER)
    assert ec.generate(model, tok, ["q"], max_new_tokens=16, stop=stop) == [expected]
    ((row,),) = ec._decode(model, tok, ["q"], 16, stop=stop or ())
    if stop and stop != ["zz"]:  # the row ended at the token that completed a stop string
        assert any(tok.decode(row.tokens).endswith(s) for s in stop)
        assert not any(s in tok.decode(row.tokens[:-1]) for s in stop)


def test_stop_strings_on_a_bpe_model_split_across_tokens(gpt2):
    model, tok = gpt2
    (full,) = ec._generate_hf_ids(model, tok, ["Why is the sky blue?"], 24)
    pieces = [tok.decode([t]) for t in full]
    k = next(i for i in range(1, len(pieces)) if pieces[i - 1] and pieces[i])
    stop = (
        pieces[k - 1][-1] + pieces[k][0]
    )  # the last character of one token, the first of the next
    text = tok.decode_answer(full)
    expected = text[: text.index(stop)]
    assert ec.generate(model, tok, ["Why is the sky blue?"], 24, stop=[stop]) == [expected]
    both = ec.sample(model, tok, ["Why is the sky blue?", "Hi"], n=2, temperature=0, stop=[stop])
    assert both[0] == [expected, expected]


def test_sampled_answers_stop_at_stop_strings(wandering, tok):
    free = ec.sample(wandering, tok, PROMPTS, n=4, temperature=1.0, max_new_tokens=16)
    stop = ["e", "a"]
    stopped = ec.sample(wandering, tok, PROMPTS, n=4, temperature=1.0, max_new_tokens=16, stop=stop)
    cut = 0
    for a, b in zip(free, stopped):
        for x, y in zip(a, b):  # the same draws until the stop: the free answer, cut
            i = min((x.find(s) for s in stop if s in x), default=len(x))
            assert y == x[:i]
            cut += i < len(x)
    assert cut >= 3


# ----------------------------------------------------------------------------------------------
# Bad arguments
# ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"n": 0}, r"n must be an int >= 1, got 0"),
        ({"n": 2.0}, r"n must be an int >= 1, got 2.0"),
        ({"temperature": -0.5}, r"temperature must be a finite number >= 0, got -0.5"),
        ({"temperature": math.nan}, r"temperature must be a finite number >= 0, got nan"),
        ({"temperature": "0.8"}, r"temperature must be a finite number >= 0, got '0.8'"),
        ({"top_p": 0}, r"top_p must be a finite number in \(0, 1\], got 0"),
        ({"top_p": 1.5}, r"top_p must be a finite number in \(0, 1\], got 1.5"),
        ({"seed": 1.5}, r"seed must be an int, got 1.5"),
        ({"seed": True}, r"seed must be an int, got True"),
        ({"stop": "\n"}, r"stop must be a list of str or None, got '\\n'"),
        ({"stop": [""]}, r"stop\[0\] must be a non-empty str, got ''"),
        ({"stop": ["a", 3]}, r"stop\[1\] must be a non-empty str, got 3"),
        ({"max_new_tokens": 0}, r"max_new_tokens must be an int >= 1, got 0"),
    ],
)
def test_bad_sampling_arguments_are_clear_errors(random_model, tok, kwargs, message):
    with pytest.raises(ValueError, match=message):
        ec.sample(random_model, tok, ["hi"], **kwargs)


def test_bad_stop_strings_in_generate_and_nan_logits_are_clear_errors(random_model, tok):
    with pytest.raises(ValueError, match=r"stop\[0\] must be a non-empty str"):
        ec.generate(random_model, tok, ["hi"], stop=[""])
    nan = FixedNext(torch.full((tok.vocab_size,), math.nan)).eval()
    with pytest.raises(ValueError, match="logits are NaN, or -inf for every token"):
        ec.sample(nan, tok, ["hi"], max_new_tokens=2)
    with pytest.raises(ValueError, match="exceeds the model's max_len=96"):
        ec.sample(random_model, tok, ["hi"], max_new_tokens=93)


def test_a_plain_callable_samples_as_tinygpt_does(wandering, tok):
    kw = dict(n=3, temperature=0.8, top_p=0.95, max_new_tokens=10, stop=["e"])
    assert ec.sample(lambda ids: wandering(ids), tok, PROMPTS, **kw) == ec.sample(
        wandering, tok, PROMPTS, **kw
    )
