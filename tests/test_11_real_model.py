"""Lesson 11: any Hugging Face causal LM behind evalcore's interface (wrap_hf, load_hf), the
course's own BPE GPT-2, and bits per byte. Nothing here downloads: the models are the shipped
folder and tiny ones built in the test."""

import json
import math
import shutil

import pytest
import torch
import torch.nn.functional as F

import evalcore as ec

transformers = pytest.importorskip("transformers")

TEXTS = ["The capital of France is Paris.", "Owls hunt at night.", "Bees make honey from nectar."]


@pytest.fixture(scope="module")
def shipped():
    """The course's BPE GPT-2, loaded exactly as a student loads a hub model."""
    return ec.load_hf(ec.HF_CHECKPOINT_DIR)


@pytest.fixture(scope="module")
def bpe_tokenizer():
    return ec.train_bpe_tokenizer(TEXTS * 3, vocab_size=300)


def tiny_gpt2(vocab_size, n_positions=64, seed=0):
    """A random GPT-2 of a few thousand parameters; a fresh HF model starts in train mode."""
    torch.manual_seed(seed)
    cfg = transformers.GPT2Config(
        vocab_size=vocab_size, n_positions=n_positions, n_embd=16, n_layer=1, n_head=2
    )
    return transformers.GPT2LMHeadModel(cfg)


# ----------------------------------------------------------------------------------------------
# The adapter agrees with Hugging Face's own computations
# ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("add_bos", [False, True])
def test_perplexity_equals_hf_own_loss(shipped, add_bos):
    model, tok = shipped
    hf_model, hf_tok = model.hf, tok.hf
    text = ec.load_fixtures()["lm"][0]
    ids = ([hf_tok.eos_token_id] if add_bos else []) + hf_tok.encode(text, add_special_tokens=False)
    x = torch.tensor([ids])
    with torch.no_grad():
        hf_loss = float(hf_model(input_ids=x, labels=x).loss)  # HF shifts the labels itself
    _, tok_bos = ec.wrap_hf(hf_model, hf_tok, add_bos=add_bos)
    ours = ec.perplexity_eval(model, tok_bos, [text])
    assert ours.extras["total_tokens"] == len(ids) - 1
    assert ours.value == pytest.approx(math.exp(hf_loss), rel=1e-5)


def test_perplexity_is_batch_size_invariant(shipped):
    model, tok = shipped
    texts = ec.load_fixtures()["lm"]
    one = ec.perplexity_eval(model, tok, texts, batch_size=1)
    many = ec.perplexity_eval(model, tok, texts, batch_size=7)
    assert many.value == pytest.approx(one.value, rel=ec.BATCHED_RTOL)
    assert [r["n_tokens"] for r in one.per_example] == [r["n_tokens"] for r in many.per_example]


def test_generate_equals_hf_greedy_generate(shipped):
    model, tok = shipped
    questions = [q for q, _ in ec.load_fixtures()["em"][:8]]
    ours = ec.generate(model, tok, questions, max_new_tokens=24)
    for q, answer in zip(questions, ours):
        prompt = torch.tensor([tok.encode_prompt(q)])
        with torch.no_grad():
            out = model.hf.generate(
                prompt,
                attention_mask=torch.ones_like(prompt),
                do_sample=False,
                max_new_tokens=24,
                eos_token_id=tok.eos_id,
                pad_token_id=tok.pad_id,
            )
        new = [t for t in out[0, prompt.shape[1] :].tolist() if t != tok.eos_id]
        assert answer == tok.decode_answer(new), q


def test_wrapped_model_is_evaluated_in_eval_mode_and_its_mode_restored(bpe_tokenizer):
    hf_model = tiny_gpt2(len(bpe_tokenizer))
    assert hf_model.training  # the trap: dropout on in a freshly built model
    model, tok = ec.wrap_hf(hf_model, bpe_tokenizer)
    assert not hf_model.training
    hf_model.train()  # someone puts the inner model back in train mode
    a = ec.perplexity_eval(model, tok, TEXTS).value
    b = ec.perplexity_eval(model, tok, TEXTS).value
    assert a == b
    assert hf_model.training  # restored as it was found
    hf_model.eval()
    assert ec.perplexity_eval(model, tok, TEXTS).value == pytest.approx(a, rel=1e-6)


def test_max_len_defaults_to_the_models_context(bpe_tokenizer):
    model, tok = ec.wrap_hf(tiny_gpt2(len(bpe_tokenizer), n_positions=16), bpe_tokenizer)
    assert model.config.max_len == 16
    long_text = " ".join(TEXTS * 4)
    assert len(tok.encode(long_text)) > 16
    result = ec.perplexity_eval(model, tok, [long_text])
    assert result.extras["max_len"] == 16
    assert all(w["end"] - w["begin"] <= 17 for w in result.extras["windows"])
    with pytest.raises(ValueError, match="max_len=32 exceeds the model's max_len=16"):
        ec.perplexity_eval(model, tok, [long_text], max_len=32)


# ----------------------------------------------------------------------------------------------
# The tokenizer adapter
# ----------------------------------------------------------------------------------------------


def test_plain_prompt_format_and_answer_round_trip(shipped):
    _, tok = shipped
    assert tok.prompt_format == "plain"
    prompt = tok.encode_prompt("Which planet is red?")
    assert tok.decode(prompt) == "Question: Which planet is red?\nAnswer:"
    answer = tok.encode_answer("Mars")
    assert answer[-1] == tok.eos_id
    assert tok.decode_answer(answer[:-1]) == "Mars"
    assert tok.decode(tok.encode("Owls hunt at night.")) == "Owls hunt at night."


def test_bos_flag_prefixes_texts_and_plain_prompts(shipped):
    model, _ = shipped
    _, with_bos = ec.wrap_hf(model.hf, shipped[1].hf, add_bos=True)
    assert with_bos.bos_ids == (with_bos.hf.eos_token_id,)  # GPT-2 style: EOS doubles as BOS
    assert with_bos.encode_prompt("Hi?")[0] == with_bos.bos_ids[0]
    assert shipped[1].bos_ids == ()
    texts = ec.load_fixtures()["lm"][:3]
    plain = ec.perplexity_eval(model, shipped[1], texts)
    bos = ec.perplexity_eval(model, with_bos, texts)
    assert bos.extras["total_tokens"] == plain.extras["total_tokens"] + len(texts)
    assert bos.extras["bos"] and not plain.extras["bos"]


def lm_eval_rolling_windows(tokens, prefix_token, max_seq_len):
    """lm-evaluation-harness's get_rolling_token_windows(context_len=1) then make_disjoint_window
    (lm_eval/utils.py at 4e7e0d4), rewritten: (input ids, the ids their last logits predict)."""
    first = min(max_seq_len, len(tokens))
    windows, predicted = [([prefix_token] + tokens[: first - 1], tokens[:first])], first
    while predicted < len(tokens):
        n = min(len(tokens) - predicted, max_seq_len)
        end = predicted + n
        windows.append((tokens[end - max_seq_len - 1 : end - 1], tokens[end - n : end]))
        predicted += n
    return [(inp[: len(inp) - (len(pred) - 1)], pred) for inp, pred in windows]


@torch.no_grad()
def lm_eval_bits_per_byte(hf_model, hf_tok, texts, max_seq_len):
    """bits_per_byte as lm-evaluation-harness computes it for a rolling-loglikelihood task: the
    prefix token is BOS, else EOS (prefix_token_id in lm_eval/models/huggingface.py); the summed
    log-likelihood over the summed UTF-8 bytes (weighted_mean), negated, over ln 2."""
    prefix = hf_tok.bos_token_id if hf_tok.bos_token_id is not None else hf_tok.eos_token_id
    total_ll, total_bytes = 0.0, 0
    for text in texts:
        tokens = hf_tok.encode(text, add_special_tokens=False)
        for inp, pred in lm_eval_rolling_windows(tokens, prefix, max_seq_len):
            ids = torch.tensor([(inp + pred)[:-1]])  # as _loglikelihood_tokens feeds them
            logp = F.log_softmax(hf_model(input_ids=ids).logits[0].double(), -1)[-len(pred) :]
            total_ll += float(logp.gather(-1, torch.tensor(pred)[:, None]).sum())
        total_bytes += len(text.encode("utf-8"))
    return -total_ll / total_bytes / math.log(2)


def test_bits_per_byte_with_bos_is_lm_evals_and_without_is_not(shipped):
    """lm-evaluation-harness scores every text's first token (after its prefix token); evalcore
    does so only with add_bos=True, and extras["first_token_scored"] says which (issue 18 B.2)."""
    model, tok = shipped
    texts = ec.load_fixtures()["lm"]  # text 19 is longer than the 256-token context: two windows
    _, tok_bos = ec.wrap_hf(model.hf, tok.hf, add_bos=True)
    harness = lm_eval_bits_per_byte(model.hf, tok.hf, texts, model.config.max_len)
    with_bos, without = (ec.perplexity_eval(model, t, texts) for t in (tok_bos, tok))
    assert with_bos.extras["first_token_scored"] and not without.extras["first_token_scored"]
    assert with_bos.extras["bits_per_byte"] == pytest.approx(harness, abs=1e-6)
    assert abs(without.extras["bits_per_byte"] - harness) > 0.05


def test_chat_template_is_used_when_the_tokenizer_has_one(bpe_tokenizer):
    hf_tok = ec.train_bpe_tokenizer(TEXTS, vocab_size=300)
    hf_tok.chat_template = "{% for m in messages %}<user>{{ m['content'] }}</user>{% endfor %}<bot>"
    _, tok = ec.wrap_hf(tiny_gpt2(len(hf_tok)), hf_tok)
    assert tok.prompt_format == "chat_template"
    assert tok.decode(tok.encode_prompt("Why?")) == "<user>Why?</user><bot>"
    assert tok.decode_answer(tok.encode_answer("Because.")[:-1]) == "Because."


def test_a_tokenizer_without_a_pad_token_pads_with_eos(bpe_tokenizer):
    hf_tok = ec.train_bpe_tokenizer(TEXTS, vocab_size=300)
    hf_tok.pad_token = None
    assert hf_tok.pad_token_id is None
    model, tok = ec.wrap_hf(tiny_gpt2(len(hf_tok)), hf_tok)
    assert tok.pad_id == tok.eos_id
    assert ec.perplexity_eval(model, tok, TEXTS, batch_size=3).value > 1


# ----------------------------------------------------------------------------------------------
# Clear errors instead of deep ones
# ----------------------------------------------------------------------------------------------


def test_a_raw_hf_model_is_refused_with_what_to_do(bpe_tokenizer):
    hf_model = tiny_gpt2(len(bpe_tokenizer)).eval()
    _, tok = ec.wrap_hf(hf_model, bpe_tokenizer)
    with pytest.raises(ValueError, match=r"\.logits.*wrap_hf"):
        ec.perplexity_eval(hf_model, tok, TEXTS)
    with pytest.raises(ValueError, match=r"\.logits.*wrap_hf"):
        ec.generate(hf_model, tok, ["Why?"], max_new_tokens=2)
    with pytest.raises(ValueError, match=r"\.logits.*wrap_hf"):
        ec.perplexity_eval(lambda ids: hf_model(ids), tok, TEXTS)


def test_a_tokenizer_larger_than_the_model_is_refused(bpe_tokenizer, tok):
    small = tiny_gpt2(len(bpe_tokenizer) - 10)
    with pytest.raises(ValueError, match="do not belong together"):
        ec.wrap_hf(small, bpe_tokenizer)
    tiny = ec.TinyGPT(tok.vocab_size, d_model=16, n_layer=1, n_head=2, max_len=64).eval()
    _, big_tok = ec.wrap_hf(tiny_gpt2(len(bpe_tokenizer)), bpe_tokenizer)
    text = "Bees make honey from nectar, high above."
    assert max(big_tok.encode(text)) >= tok.vocab_size
    with pytest.raises(ValueError, match="outside the model's vocabulary of 259"):
        ec.perplexity_eval(tiny, big_tok, [text])
    with pytest.raises(ValueError, match="outside the model's vocabulary of 5"):
        ec.perplexity_eval(lambda ids: torch.zeros(*ids.shape, 5), tok, ["abc"])


def test_wrap_hf_refuses_what_is_not_a_causal_lm(bpe_tokenizer):
    with pytest.raises(ValueError, match="hf_model must be a transformers causal LM"):
        ec.wrap_hf(lambda ids: ids, bpe_tokenizer)


def test_damaged_hf_folder_is_refused(tmp_path):
    folder = tmp_path / "model"
    shutil.copytree(ec.HF_CHECKPOINT_DIR, folder)
    manifest = json.loads((folder / ec.HF_MANIFEST).read_text(encoding="utf-8"))
    assert {"config.json", "model.safetensors", "tokenizer.json"} <= set(manifest["sha256"])
    weights = folder / "model.safetensors"
    data = bytearray(weights.read_bytes())
    data[-10] ^= 0xFF
    weights.write_bytes(bytes(data))
    with pytest.raises(ValueError, match="model.safetensors has SHA-256"):
        ec.load_hf(folder)


# ----------------------------------------------------------------------------------------------
# Bits per byte
# ----------------------------------------------------------------------------------------------


def uniform_model(vocab_size):
    """Equal logits everywhere: every token costs ln(vocab_size) nats, as token_losses computes it
    in float32 (so to about 1e-7, relative)."""
    return lambda ids: torch.zeros(*ids.shape, vocab_size)


F32 = 1e-7  # float32 rounding of ln(vocab_size), the only difference from the hand value


def test_bits_per_byte_by_hand(tok):
    # "abc" and "hé": 3 and 3 UTF-8 bytes, 2 and 2 predicted byte tokens, each log2(259) bits
    result = ec.perplexity_eval(uniform_model(259), tok, ["abc", "hé"])
    assert [r["n_bytes"] for r in result.per_example] == [3, 3]
    assert result.extras["total_bytes"] == 6
    assert result.extras["bits_per_byte"] == pytest.approx(4 * math.log2(259) / 6, rel=F32)
    assert result.extras["bits_per_token"] == pytest.approx(math.log2(259), rel=F32)


def test_bits_per_byte_counts_the_bytes_of_scored_texts_only(tok):
    result = ec.perplexity_eval(uniform_model(259), tok, ["x", "abcd"])
    assert result.per_example[0]["score"] is None and result.per_example[0]["n_bytes"] == 1
    assert result.extras["total_bytes"] == 4
    assert result.extras["bits_per_byte"] == pytest.approx(3 * math.log2(259) / 4, rel=F32)


def test_bits_per_byte_with_a_bpe_tokenizer_and_bos(bpe_tokenizer):
    vocab = len(bpe_tokenizer)
    model, tok = ec.wrap_hf(tiny_gpt2(vocab), bpe_tokenizer, add_bos=True)
    text = TEXTS[0]
    n_tokens = len(bpe_tokenizer.encode(text, add_special_tokens=False))
    result = ec.perplexity_eval(uniform_model(vocab), tok, [text])
    assert result.extras["total_tokens"] == n_tokens  # BOS makes every real token a target
    assert result.extras["bits_per_byte"] == pytest.approx(
        n_tokens * math.log2(vocab) / len(text.encode("utf-8")), rel=F32
    )


# ----------------------------------------------------------------------------------------------
# Every eval runs unchanged on the wrapped model
# ----------------------------------------------------------------------------------------------


def test_every_eval_runs_on_the_shipped_hf_model(shipped):
    model, tok = shipped
    fx = ec.load_fixtures()
    for run in (ec.exact_match_eval, ec.token_f1_eval, ec.judge_eval):
        result = run(model, tok, fx["em"][:4])
        assert len(result.per_example) == 4 and math.isfinite(result.value)
        assert result.extras["prompt_format"] == "plain"  # the prompt choice is in the result
    items = ec.multiple_choice_items()[:4]
    cal = ec.calibration_eval(model, tok, items)
    assert 0 <= cal.value <= 1
    rob = ec.robustness_eval(model, tok, fx["em"][:3], perturbations=["uppercase"])
    assert [r["perturbation"] for r in rob.per_example] == ["clean"] * 3 + ["uppercase"] * 3
    ref = ec.reference_loss(model, tok, "Which planet is red?", "Mars")
    assert len(ref.bits) == len(tok.encode("Mars")) and ref.mean_bits > 0


def test_choice_logliks_score_the_answer_and_optionally_its_eos(shipped):
    model, tok = shipped
    item = {"question": "Which planet is red?", "choices": ["Mars", "Jupiter"], "gold": 0}
    prompt = tok.encode_prompt(item["question"])
    answer = tok.encode(" Mars")  # lm-evaluation-harness's continuation: delimiter + choice
    ids = torch.tensor([prompt + answer + [tok.eos_id]])
    with torch.no_grad():
        logp = F.log_softmax(model.hf(ids).logits[0, :-1].double(), -1)
    per_token = logp[torch.arange(len(prompt) - 1, ids.shape[1] - 1), ids[0, len(prompt) :]]
    ((ll_mars, _),) = ec.choice_logliks(model, tok, [item])
    assert ll_mars == pytest.approx(float(per_token[:-1].sum()), abs=1e-4)
    ((ll_mars, _),) = ec.choice_logliks(model, tok, [item], end_token=True)
    assert ll_mars == pytest.approx(float(per_token.sum()), abs=1e-4)


# ----------------------------------------------------------------------------------------------
# acc and acc_norm (lm-evaluation-harness, lm_eval/api/task.py)
# ----------------------------------------------------------------------------------------------


def test_choice_accuracy_by_hand():
    items = [
        {"question": "q1", "choices": ["ab", "abcdef"], "gold": 1},
        {"question": "q2", "choices": ["x", "yy"], "gold": 0},
    ]
    # item 1: raw -4 > -6 picks "ab" (wrong); per character -2 < -1 picks "abcdef" (right)
    # item 2: raw -1 > -3 picks "x"; per character -1 > -1.5 picks "x": both right
    result = ec.choice_accuracy(items, [[-4.0, -6.0], [-1.0, -3.0]])
    assert result.value == 0.5
    assert result.extras["acc_norm"] == 1.0
    assert result.extras["disagreements"] == 1
    assert [(r["pred"], r["pred_norm"]) for r in result.per_example] == [(0, 1), (0, 0)]


def test_choice_accuracy_matches_numpy_argmax_rule():
    np = pytest.importorskip("numpy")
    items = ec.multiple_choice_items()
    g = torch.Generator().manual_seed(3)
    logliks = [(-torch.rand(len(it["choices"]), generator=g) * 20).tolist() for it in items]
    result = ec.choice_accuracy(items, logliks)
    acc = np.mean([np.argmax(ll) == it["gold"] for it, ll in zip(items, logliks)])
    lens = [np.array([float(len(c)) for c in it["choices"]]) for it in items]
    acc_norm = np.mean(
        [np.argmax(np.array(ll) / n) == it["gold"] for it, ll, n in zip(items, logliks, lens)]
    )
    assert result.value == pytest.approx(acc) and result.extras["acc_norm"] == pytest.approx(
        acc_norm
    )


@pytest.mark.parametrize(
    "logliks, match",
    [
        ([[-1.0]], "must hold 2 finite numbers"),
        ([[-1.0, float("nan")]], "must hold 2 finite numbers"),
        ([], "one list per item"),
    ],
)
def test_choice_accuracy_rejects_bad_logliks(logliks, match):
    items = [{"question": "q", "choices": ["a", "b"], "gold": 0}]
    with pytest.raises(ValueError, match=match):
        ec.choice_accuracy(items, logliks)


def test_choice_accuracy_rejects_an_empty_choice():
    with pytest.raises(ValueError, match="empty choice"):
        ec.choice_accuracy([{"question": "q", "choices": ["", "b"], "gold": 0}], [[-1.0, -2.0]])


@pytest.mark.parametrize("call", ["encode", "encode_prompt", "encode_answer"])
def test_the_tokenizer_adapter_refuses_what_is_not_a_str(shipped, call):
    _, tok = shipped
    with pytest.raises(ValueError, match="must be a str, got bytes"):
        getattr(tok, call)(b"Paris")
