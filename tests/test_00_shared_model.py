"""Part 0: the byte tokenizer, TinyGPT, checkpoints, training and generate()."""

import math

import pytest
import torch

import evalcore as ec
from conftest import make_tiny

# ----------------------------------------------------------------------------------------------
# Tokenizer
# ----------------------------------------------------------------------------------------------


def test_encode_gives_one_id_per_utf8_byte(tok):
    assert tok.encode("") == []
    assert tok.encode("A") == [65]
    assert tok.encode("Hi!") == [72, 105, 33]
    assert tok.encode("é") == [0xC3, 0xA9]  # U+00E9: two bytes
    assert tok.encode("中") == [0xE4, 0xB8, 0xAD]  # U+4E2D: three bytes
    assert tok.encode("🙂") == [0xF0, 0x9F, 0x99, 0x82]  # U+1F642: four bytes
    assert tok.encode("a\nb") == [97, 10, 98]


@pytest.mark.parametrize(
    "text",
    [
        "",
        "plain ASCII text.",
        "naïve café",
        "日本の首都は東京です。",
        "emoji 🙂🚀👩‍👩‍👧",
        "mixed 中文 and English\ttab\nnewline",
        "\u00a0\u3000\u200b zero-width",
        "\x00 control \x7f",
    ],
)
def test_round_trip(tok, text):
    ids = tok.encode(text)
    assert all(0 <= i < 256 for i in ids)
    assert len(ids) == len(text.encode("utf-8"))
    assert tok.decode(ids) == text


def test_specials_lie_outside_the_byte_range_and_vocab_counts_all(tok):
    specials = [tok.inst_id, tok.resp_id, tok.pad_id]
    assert len(set(specials)) == 3
    assert all(s >= 256 for s in specials)
    assert tok.vocab_size == 256 + 3
    assert max(specials) == tok.vocab_size - 1


def test_decode_drops_specials(tok):
    assert tok.decode([tok.inst_id, 72, 105, tok.resp_id, 79, tok.pad_id]) == "HiO"


def test_decode_of_a_cut_multibyte_character_is_replaced(tok):
    assert tok.decode(tok.encode("中")[:2]) == "\ufffd"


def test_prompt_and_example_convention(tok):
    assert tok.encode_prompt("Hi") == [tok.inst_id, 72, 105, tok.resp_id]
    assert tok.encode_example("Hi", "Yo") == [
        tok.inst_id,
        72,
        105,
        tok.resp_id,
        89,
        111,
        tok.pad_id,
    ]
    assert tok.encode_prompt("") == [tok.inst_id, tok.resp_id]
    assert tok.encode_example("é", "") == [tok.inst_id, 0xC3, 0xA9, tok.resp_id, tok.pad_id]


@pytest.mark.parametrize("bad", [None, 5, b"bytes", ["a"], 1.5])
def test_encode_rejects_non_str(tok, bad):
    with pytest.raises(ValueError):
        tok.encode(bad)
    with pytest.raises(ValueError):
        tok.encode_prompt(bad)


@pytest.mark.parametrize("bad", [[-1], [259], [65, 1000]])
def test_decode_rejects_ids_outside_the_vocab(tok, bad):
    with pytest.raises(ValueError):
        tok.decode(bad)


# ----------------------------------------------------------------------------------------------
# TinyGPT
# ----------------------------------------------------------------------------------------------


def test_output_shape(random_model, tok):
    ids = torch.randint(0, 256, (3, 7))
    with torch.no_grad():
        out = random_model(ids)
    assert out.shape == (3, 7, tok.vocab_size)
    assert out.dtype == torch.float32


def test_causal_later_tokens_never_change_earlier_logits(random_model):
    torch.manual_seed(3)
    ids = torch.randint(0, 256, (2, 12))
    changed = ids.clone()
    changed[:, 7] = (changed[:, 7] + 1) % 256
    changed[:, 11] = (changed[:, 11] + 5) % 256
    with torch.no_grad():
        a, b = random_model(ids), random_model(changed)
    torch.testing.assert_close(a[:, :7], b[:, :7], rtol=0, atol=1e-6)
    # ...while the changed position itself and what follows do change.
    assert (a[:, 7:] - b[:, 7:]).abs().amax() > 1e-3


def test_head_is_tied_to_the_token_embedding():
    model = make_tiny()
    assert model.head.weight is model.tok_emb.weight
    with torch.no_grad():
        model.tok_emb.weight[5, 0] += 1.0
    assert model.head.weight[5, 0] == model.tok_emb.weight[5, 0]
    assert model.head.bias is None


def test_input_longer_than_max_len_raises():
    model = make_tiny(max_len=8)
    with torch.no_grad():
        assert model(torch.zeros(1, 8, dtype=torch.long)).shape == (1, 8, 259)
        with pytest.raises(ValueError):
            model(torch.zeros(1, 9, dtype=torch.long))


def test_n_head_must_divide_d_model():
    with pytest.raises(ValueError):
        ec.TinyGPT(259, d_model=30, n_head=4)


def test_default_size_is_0_86M_parameters():
    model = ec.TinyGPT(259)
    # By hand (V=259, d=128, 4 layers, max_len=256, head tied so not counted twice):
    #   token embedding 259*128 = 33152, positions 256*128 = 32768, final LayerNorm 256,
    #   per block: 2 LayerNorms 512 + qkv 128*384+384 = 49536 + proj 128*128+128 = 16512
    #              + mlp 128*512+512 = 66048 and 512*128+128 = 65664  -> 198272, times 4 = 793088.
    expected = 33152 + 32768 + 256 + 4 * 198272
    assert expected == 859264
    assert model.num_params() == expected
    assert sum(p.numel() for p in model.parameters()) == expected
    assert 0.85e6 < model.num_params() < 0.87e6
    cfg = model.config
    assert (cfg.d_model, cfg.n_layer, cfg.n_head, cfg.max_len) == (128, 4, 4, 256)


# ----------------------------------------------------------------------------------------------
# Checkpoints and training
# ----------------------------------------------------------------------------------------------


def test_checkpoint_round_trip_and_sha_check(tmp_path):
    model = make_tiny(seed=4)
    path = tmp_path / "ck" / "tiny.pt"
    manifest = ec.save_checkpoint(model, path, seed=4)
    assert manifest["sha256"] == ec._sha256(path)
    assert manifest["num_params"] == model.num_params()
    loaded = ec.load_pretrained(path)
    assert not loaded.training
    assert loaded.config == model.config
    for (k1, v1), (k2, v2) in zip(model.state_dict().items(), loaded.state_dict().items()):
        assert k1 == k2 and torch.equal(v1, v2)
    data = bytearray(path.read_bytes())
    data[-10] ^= 0xFF  # one flipped byte
    path.write_bytes(bytes(data))
    with pytest.raises(ValueError, match="SHA-256"):
        ec.load_pretrained(path)
    with pytest.raises(FileNotFoundError):
        ec.load_pretrained(tmp_path / "missing.pt")


def test_training_is_seeded():
    kw = dict(steps=4, batch_size=4, progress=False, d_model=16, n_layer=1, n_head=2, max_len=128)
    a, b = ec.train_tinygpt(seed=7, **kw), ec.train_tinygpt(seed=7, **kw)
    assert len(a.history) == 4
    assert a.history == b.history
    assert not a.training
    c = ec.train_tinygpt(seed=8, **kw)
    assert c.history != a.history


@pytest.mark.parametrize(
    "bad", [dict(steps=0), dict(steps=-3), dict(steps=1.5), dict(batch_size=0)]
)
def test_training_rejects_bad_arguments(bad):
    with pytest.raises(ValueError):
        ec.train_tinygpt(progress=False, **bad)


# ----------------------------------------------------------------------------------------------
# generate()
# ----------------------------------------------------------------------------------------------

PROMPTS = [
    "What is the capital of France?",
    "Hi",
    "",
    "日本の首都は？ 🙂",
    "How many legs does a spider have?",
    "x" * 30,
    "Name the red planet.",
]


@torch.no_grad()
def naive_greedy(model, tok, instruction, max_new_tokens):
    """Reference decoder: one prompt, the full forward again at every step, no cache, no padding."""
    ids = tok.encode_prompt(instruction)
    out = []
    for _ in range(max_new_tokens):
        nxt = int(model(torch.tensor([ids]))[0, -1].argmax())
        if nxt in (tok.inst_id, tok.resp_id, tok.pad_id):
            break
        out.append(nxt)
        ids.append(nxt)
    return out


def test_generate_batched_equals_one_at_a_time_random_model(random_model, tok):
    batched = ec.generate(random_model, tok, PROMPTS, max_new_tokens=16)
    single = [ec.generate(random_model, tok, [p], max_new_tokens=16)[0] for p in PROMPTS]
    assert batched == single
    reference = [naive_greedy(random_model, tok, p, 16) for p in PROMPTS]
    assert batched == [tok.decode(r) for r in reference]
    # The case is not trivial: some answers stop at once, others run the full 16 tokens.
    lengths = sorted(len(r) for r in reference)
    assert lengths[0] == 0 and lengths[-1] == 16
    assert len(set(batched)) >= 3


def test_generate_batched_equals_one_at_a_time_with_early_stops(tok):
    """Answers that end (at a special) after different numbers of tokens inside one batch: a
    random model with its weights scaled up, so that its greedy paths wander and stop."""
    model = make_tiny(seed=2)
    with torch.no_grad():
        for p in model.parameters():
            p.mul_(10.0)
    reference = [naive_greedy(model, tok, p, 24) for p in PROMPTS]
    assert len({len(r) for r in reference}) >= 5  # stops at 0, 1, 8, 9, ... tokens and 24
    assert 0 < min(len(r) for r in reference if len(r)) < 24
    batched = ec.generate(model, tok, PROMPTS, max_new_tokens=24)
    assert batched == [tok.decode(r) for r in reference]
    assert batched == [ec.generate(model, tok, [p], max_new_tokens=24)[0] for p in PROMPTS]
    assert batched == ec.generate(lambda ids: model(ids), tok, PROMPTS, max_new_tokens=24)


def test_generate_with_the_shipped_checkpoint(tok):
    """The shipped checkpoint, when it is there: batched == one at a time. Until it is built,
    load_pretrained must say so with FileNotFoundError (never a half-loaded model)."""
    if not ec.CHECKPOINT_PATH.is_file():
        with pytest.raises(FileNotFoundError):
            ec.load_pretrained()
        return
    model = ec.load_pretrained()
    prompts = [q for q, _ in ec.load_fixtures()["em"][:6]] + ["Hi", "日本の首都は？"]
    batched = ec.generate(model, tok, prompts, max_new_tokens=24)
    assert batched == [ec.generate(model, tok, [p], max_new_tokens=24)[0] for p in prompts]


def test_generate_plain_callable_matches_tinygpt(random_model, tok):
    via_callable = ec.generate(lambda ids: random_model(ids), tok, PROMPTS, max_new_tokens=12)
    assert via_callable == ec.generate(random_model, tok, PROMPTS, max_new_tokens=12)


def test_generate_returns_one_str_per_instruction(random_model, tok):
    out = ec.generate(random_model, tok, ("a", "b"), max_new_tokens=1)
    assert isinstance(out, list) and len(out) == 2 and all(isinstance(s, str) for s in out)


@pytest.mark.parametrize("instructions", [[], "a str", None, ["ok", 3], [b"bytes"]])
def test_generate_rejects_bad_instructions(random_model, tok, instructions):
    with pytest.raises(ValueError):
        ec.generate(random_model, tok, instructions)


@pytest.mark.parametrize("max_new_tokens", [0, -1, 1.5, True, "4"])
def test_generate_rejects_bad_max_new_tokens(random_model, tok, max_new_tokens):
    with pytest.raises(ValueError):
        ec.generate(random_model, tok, ["hi"], max_new_tokens=max_new_tokens)


def test_generate_rejects_prompt_plus_new_tokens_beyond_max_len(tok):
    model = make_tiny(max_len=16)
    # prompt "abc" is 5 tokens with INST and RESP: 5 + 11 = 16 fits, 5 + 12 does not
    assert len(ec.generate(model, tok, ["abc"], max_new_tokens=11)) == 1
    with pytest.raises(ValueError):
        ec.generate(model, tok, ["abc"], max_new_tokens=12)


@pytest.mark.parametrize("steps", [1, 9, 10, 19, 20])
def test_training_runs_for_any_positive_number_of_steps(steps):
    # OneCycleLR divides by zero at 10 steps; short runs use a constant learning rate instead
    model = ec.train_tinygpt(
        steps=steps, batch_size=2, progress=False, d_model=16, n_layer=1, n_head=2, max_len=32
    )
    assert len(model.history) == steps and all(map(math.isfinite, model.history))


def test_packed_stream_holds_every_sequence_once_per_pass_groups_together(tok):
    groups = ec.training_groups(tok)
    seqs = [seq for g in groups for seq in g]
    stream, starts = ec.packed_stream(groups, torch.Generator().manual_seed(0), passes=2)
    assert len(stream) == 2 * sum(map(len, seqs)) and len(starts) == 2 * len(seqs)
    ends = starts.tolist()[1:] + [len(stream)]
    pieces = [stream[b:e].tolist() for b, e in zip(starts.tolist(), ends)]
    assert sorted(pieces) == sorted(seqs * 2)  # every sequence, whole, once per pass
    owner = {tuple(seq): gi for gi, g in enumerate(groups) for seq in g}
    runs = [owner[tuple(p)] for p in pieces]
    changes = sum(a != b for a, b in zip(runs, runs[1:]))
    assert changes == 2 * len(groups) - 1  # each group's members sit side by side


def test_packed_batches_are_full_windows_shifted_by_one(tok):
    g = torch.Generator().manual_seed(0)
    stream, starts = ec.packed_stream(ec.training_groups(tok), g, passes=1)
    ids, targets = ec._packed_batch(stream, starts, 64, 256, g)
    assert ids.shape == targets.shape == (64, 256)
    assert torch.equal(ids[:, 1:], targets[:, :-1])  # the next-token shift, no padding anywhere
    begins = [int((stream.unfold(0, 256, 1) == row).all(1).nonzero()[0]) for row in ids]
    aligned = sum(b in set(starts.tolist()) for b in begins)
    assert 16 <= aligned <= 56, aligned  # about half start where a sequence starts


def test_topic_paragraphs_keep_related_sentences_together():
    # content words: 4+ letters, a final "s" dropped, common words ignored ("make", "have")
    sentences = [
        "Bees make honey.",
        "Honey is sweet.",
        "Snakes have no legs.",
        "A snake slides.",
        "We make tea.",
    ]
    assert ec.topic_paragraphs(sentences) == [sentences[:2], sentences[2:4], sentences[4:]]


def test_training_sets_the_thread_count_when_asked():
    before = torch.get_num_threads()
    try:
        ec.train_tinygpt(
            steps=1,
            batch_size=2,
            progress=False,
            d_model=16,
            n_layer=1,
            n_head=2,
            max_len=32,
            threads=2,
        )
        assert torch.get_num_threads() == 2
        with pytest.raises(ValueError, match="threads"):
            ec.train_tinygpt(steps=1, progress=False, threads=0)
    finally:
        torch.set_num_threads(before)
