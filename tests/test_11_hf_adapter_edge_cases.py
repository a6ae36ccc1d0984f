"""Lesson 11's adapter on tokenizers and models built to tell its cases apart (issue 19).

The shipped GPT-2 has EOS = BOS = PAD = id 0 and no chat template, so a test on it cannot see
which of them the adapter used. The tokenizers here are byte-level BPEs trained in the test, whose
special tokens have their own ids: <unk> 0, <s> (BOS) 1, </s> (EOS) 2, <|eot|> 3 (a second end of
turn, as chat models have). The models are one-layer Llamas built from a config. Every expected
value is written from the tokenizer's own encode or by hand, never from the adapter's output.
"""

import hashlib
import json

import pytest
import torch

import evalcore as ec

transformers = pytest.importorskip("transformers")
tokenizers = pytest.importorskip("tokenizers")

UNK, BOS, EOS, EOT = 0, 1, 2, 3  # the trainer gives the special tokens these ids, in this order
TEXTS = ["Question: Why is the sky blue?\nAnswer: Because of Rayleigh scattering."] * 3

# A template whose output depends on add_generation_prompt, as real chat templates do
USER_TURNS = "{% for m in messages %}<|user|>{{ m['content'] }}{% endfor %}"
ASSISTANT_TURN = "{% if add_generation_prompt %}<|assistant|>{% endif %}"
CHAT = USER_TURNS + ASSISTANT_TURN
CHAT_WITH_BOS = "{{ bos_token }}" + CHAT  # a template that writes the BOS itself (Llama 3 style)


def byte_bpe(bos=True, chat_template=None, pad=None):
    """A byte-level BPE with BOS (unless bos=False) distinct from EOS, and no pad token unless one
    is named; like Llama's, its encode() puts BOS in front unless asked not to."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers

    bpe = Tokenizer(models.BPE())
    bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    bpe.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=300,
        special_tokens=["<unk>", "<s>", "</s>", "<|eot|>"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    bpe.train_from_iterator(TEXTS, trainer)
    if bos:  # as Llama's tokenizer does: encode() adds BOS unless told add_special_tokens=False
        bpe.post_processor = processors.TemplateProcessing(
            single="<s> $A", pair="<s> $A <s> $B", special_tokens=[("<s>", BOS)]
        )
    roles = {"eos_token": "</s>", "unk_token": "<unk>", **({"bos_token": "<s>"} if bos else {})}
    roles |= {"pad_token": pad} if pad else {}
    hf_tok = transformers.PreTrainedTokenizerFast(tokenizer_object=bpe, **roles)
    hf_tok.chat_template = chat_template
    assert hf_tok.eos_token_id == EOS and (pad or hf_tok.pad_token_id is None)
    assert hf_tok.bos_token_id == (BOS if bos else None)
    assert hf_tok.encode("x") == ([BOS] if bos else []) + hf_tok.encode(
        "x", add_special_tokens=False
    )
    return hf_tok


def tiny_llama(vocab_size, seed=0, max_len=40):
    """A random one-layer Llama. Eager attention: the only kind that also runs on `meta`."""
    torch.manual_seed(seed)
    cfg = transformers.LlamaConfig(
        vocab_size=vocab_size,
        hidden_size=16,
        intermediate_size=32,
        num_hidden_layers=1,
        num_attention_heads=2,
        num_key_value_heads=2,
        max_position_embeddings=max_len,
        bos_token_id=BOS,
        eos_token_id=EOS,
        attn_implementation="eager",
    )
    return transformers.LlamaForCausalLM(cfg)


def raw(hf_tok, text):
    """The tokenizer's own ids for text, no special tokens added."""
    return hf_tok.encode(text, add_special_tokens=False)


def record_inputs(hf_model):
    """Every input_ids tensor the Hugging Face model is called with, as it arrives."""
    seen = []

    def hook(module, args, kwargs):
        seen.append(kwargs["input_ids"] if "input_ids" in kwargs else args[0])

    hf_model.register_forward_pre_hook(hook, with_kwargs=True)
    return seen


def script(hf_model, next_token, default):
    """Turn the model into a lookup table: after token t it predicts next_token.get(t, default),
    whatever came before. Its greedy answers can then be written down by hand."""
    table = torch.full((hf_model.config.vocab_size,), default)
    for t, nxt in next_token.items():
        table[t] = nxt

    def hook(module, args, kwargs, output):
        ids = kwargs["input_ids"] if "input_ids" in kwargs else args[0]
        logits = output.logits  # (B, T', V): a model may return the last positions only
        targets = table.to(ids.device)[ids[:, -logits.shape[1] :]]  # (B, T')
        forced = torch.full_like(logits, -1e4)
        output["logits"] = forced.scatter(-1, targets[..., None], 0.0)
        return output

    hf_model.register_forward_hook(hook, with_kwargs=True)
    return hf_model


# ----------------------------------------------------------------------------------------------
# BOS: the tokenizer's own, else EOS; never in front of a chat template
# ----------------------------------------------------------------------------------------------


def test_add_bos_uses_the_tokenizers_own_bos_not_its_eos():
    hf_tok = byte_bpe()
    model, tok = ec.wrap_hf(tiny_llama(len(hf_tok)), hf_tok, add_bos=True)
    assert tok.bos_ids == (BOS,)
    assert tok.encode_prompt("Why?") == [BOS] + raw(hf_tok, "Question: Why?\nAnswer:")
    seen = record_inputs(model.hf)
    text = "Because of Rayleigh scattering."
    result = ec.perplexity_eval(model, tok, [text])
    (fed,) = seen  # BOS, then the text (its last token perhaps left out: it predicts nothing)
    assert fed.shape[1] >= len(raw(hf_tok, text))
    assert fed[0].tolist() == ([BOS] + raw(hf_tok, text))[: fed.shape[1]]
    assert result.extras["total_tokens"] == len(raw(hf_tok, text))  # every real token predicted


def test_without_add_bos_nothing_is_prepended():
    hf_tok = byte_bpe()
    _, tok = ec.wrap_hf(tiny_llama(len(hf_tok)), hf_tok)
    assert tok.bos_ids == ()
    assert tok.encode_prompt("Why?") == raw(hf_tok, "Question: Why?\nAnswer:")


def test_texts_are_encoded_without_the_tokenizers_own_specials():
    hf_tok = byte_bpe()
    model, tok = ec.wrap_hf(tiny_llama(len(hf_tok)), hf_tok)
    text = "Because of Rayleigh scattering."
    assert tok.encode(text) == raw(hf_tok, text) and BOS not in tok.encode(text)
    result = ec.perplexity_eval(model, tok, [text])
    assert result.extras["total_tokens"] == len(raw(hf_tok, text)) - 1  # no BOS: first is context
    assert tok.encode_answer("Because.") == raw(hf_tok, " Because.") + [EOS]


def test_a_tokenizer_without_bos_uses_eos_in_its_place():
    hf_tok = byte_bpe(bos=False)
    _, tok = ec.wrap_hf(tiny_llama(len(hf_tok)), hf_tok, add_bos=True)
    assert tok.bos_ids == (EOS,)  # GPT-2's and lm-evaluation-harness's rule
    assert tok.encode_prompt("Why?")[0] == EOS


def test_add_bos_adds_none_in_front_of_a_chat_template_that_writes_its_own():
    hf_tok = byte_bpe(chat_template=CHAT_WITH_BOS)
    _, tok = ec.wrap_hf(tiny_llama(len(hf_tok)), hf_tok, add_bos=True)
    assert tok.encode_prompt("Why?") == [BOS] + raw(hf_tok, "<|user|>Why?<|assistant|>")


def test_add_bos_adds_none_in_front_of_a_chat_template_without_one():
    hf_tok = byte_bpe(chat_template=CHAT)
    _, tok = ec.wrap_hf(tiny_llama(len(hf_tok)), hf_tok, add_bos=True)
    assert tok.encode_prompt("Why?") == raw(hf_tok, "<|user|>Why?<|assistant|>")


# ----------------------------------------------------------------------------------------------
# Chat template: with the assistant's turn opened, and the answer follows it with no prefix
# ----------------------------------------------------------------------------------------------


def test_the_chat_template_is_applied_with_the_generation_prompt():
    hf_tok = byte_bpe(chat_template=CHAT)
    _, tok = ec.wrap_hf(tiny_llama(len(hf_tok)), hf_tok)
    assert tok.prompt_format == "chat_template"
    assert tok.decode(tok.encode_prompt("Why?")) == "<|user|>Why?<|assistant|>"


def test_under_a_chat_template_the_answer_has_no_space_prefix():
    hf_tok = byte_bpe(chat_template=CHAT)
    _, tok = ec.wrap_hf(tiny_llama(len(hf_tok)), hf_tok)
    assert tok.encode_answer("Because.") == raw(hf_tok, "Because.") + [EOS]
    assert tok.decode_answer(raw(hf_tok, " Because.")) == " Because."  # nothing to strip


def test_plain_prompt_answer_follows_answer_colon_after_one_space():
    hf_tok = byte_bpe()
    _, tok = ec.wrap_hf(tiny_llama(len(hf_tok)), hf_tok)
    assert tok.prompt_format == "plain"
    assert tok.encode_answer("Because.") == raw(hf_tok, " Because.") + [EOS]
    assert tok.decode_answer(raw(hf_tok, " Because.")) == "Because."
    assert tok.decode_answer(raw(hf_tok, "Because.")) == "Because."  # no space: nothing cut


def test_choice_logliks_under_a_chat_template_score_the_choice_without_a_space():
    hf_tok = byte_bpe(chat_template=CHAT)
    model, tok = ec.wrap_hf(tiny_llama(len(hf_tok)), hf_tok)
    prompt, answer = raw(hf_tok, "<|user|>Why?<|assistant|>"), raw(hf_tok, "Because.")
    ids = torch.tensor([prompt + answer])
    with torch.no_grad():
        logp = torch.log_softmax(model.hf(input_ids=ids).logits[0].double(), -1)
    expected = sum(float(logp[len(prompt) - 1 + j, t]) for j, t in enumerate(answer))
    ((ll, _),) = ec.choice_logliks(
        model, tok, [{"question": "Why?", "choices": ["Because.", "No."], "gold": 0}]
    )
    assert ll == pytest.approx(expected, abs=1e-4)


# ----------------------------------------------------------------------------------------------
# Padding and stopping
# ----------------------------------------------------------------------------------------------


def test_a_tokenizer_without_a_pad_token_pads_with_eos():
    hf_tok = byte_bpe()
    model, tok = ec.wrap_hf(tiny_llama(len(hf_tok)), hf_tok)
    assert tok.pad_id == EOS  # not id 0 (here <unk>), not a made-up id
    seen = record_inputs(model.hf)
    texts = ["Because of Rayleigh scattering. Why?", "Because of Rayleigh scattering."]
    batched = ec.perplexity_eval(model, tok, texts, batch_size=2)
    (fed,) = seen  # 13 and 10 tokens: one batch (10 >= 3/4 of 13), padded on the right
    short = raw(hf_tok, texts[1])
    assert (len(raw(hf_tok, texts[0])), len(short)) == (13, 10)
    assert fed.shape[1] >= 12 and fed[1].tolist() == short + [EOS] * (fed.shape[1] - 10)
    alone = [ec.perplexity_eval(model, tok, [t]).value for t in texts]
    assert [r["score"] for r in batched.per_example] == pytest.approx(alone, rel=1e-5)


def test_a_tokenizer_with_its_own_pad_pads_with_it_and_still_ends_answers_with_eos():
    # Qwen's way: the pad token (here <|eot|>) is not the EOS that ends an answer
    hf_tok = byte_bpe(pad="<|eot|>")
    model, tok = ec.wrap_hf(tiny_llama(len(hf_tok)), hf_tok)
    assert (tok.pad_id, tok.eos_id) == (EOT, EOS)
    assert tok.encode_answer("Because.") == raw(hf_tok, " Because.") + [EOS]
    seen = record_inputs(model.hf)
    texts = ["Because of Rayleigh scattering. Why?", "Because of Rayleigh scattering."]
    ec.perplexity_eval(model, tok, texts, batch_size=2)
    (fed,) = seen
    assert fed[1].tolist() == raw(hf_tok, texts[1]) + [EOT] * (fed.shape[1] - 10)


X, Y = 91, 92  # the byte tokens "x" and "y" (the byte-level alphabet puts them at these ids)


@pytest.mark.parametrize(
    "config_eos, answer",
    [
        ([EOS, EOT], "x"),  # several end ids, as Llama 3 lists them: <|eot|> ends the answer
        (EOT, "x"),  # one id, given as an int
        (None, "xyyy"),  # nothing in the config: only the tokenizer's EOS stops
    ],
)
def test_generation_stops_at_every_eos_id_the_generation_config_lists(config_eos, answer):
    hf_tok = byte_bpe()
    assert hf_tok.decode([X, Y]) == "xy"
    # after the prompt: x; after x: <|eot|>; after <|eot|> or </s>: y, then y for ever
    hf_model = script(tiny_llama(len(hf_tok)), {X: EOT, EOT: Y, EOS: Y, Y: Y}, default=X)
    hf_model.generation_config.eos_token_id = config_eos
    model, tok = ec.wrap_hf(hf_model, hf_tok)
    assert ec.generate(model, tok, ["Why?"], max_new_tokens=5) == [answer]
    questions = ["Why?", "Why is the sky blue?"]  # prompts of two lengths, decoded together
    assert ec.generate(model, tok, questions, max_new_tokens=5) == [answer, answer]


def test_generation_stops_at_the_tokenizers_eos_when_the_config_names_another():
    hf_tok = byte_bpe()
    hf_model = script(tiny_llama(len(hf_tok)), {X: EOS, EOS: Y, EOT: Y, Y: Y}, default=X)
    hf_model.generation_config.eos_token_id = [EOT]
    model, tok = ec.wrap_hf(hf_model, hf_tok)
    assert ec.generate(model, tok, ["Why?"], max_new_tokens=5) == ["x"]


# ----------------------------------------------------------------------------------------------
# Device, dtype and context length
# ----------------------------------------------------------------------------------------------


class Arrived(Exception):
    """Raised by a hook once the ids reached the model: nothing after that is under test."""


def test_ids_are_moved_to_the_models_device():
    hf_tok = byte_bpe()
    model, _ = ec.wrap_hf(tiny_llama(len(hf_tok)).to("meta"), hf_tok)
    seen = record_inputs(model.hf)

    def stop(module, args, kwargs):
        raise Arrived

    model.hf.register_forward_pre_hook(stop, with_kwargs=True)
    with pytest.raises(Arrived):
        model(torch.tensor([[5, 6, 7]]))  # ids made on the CPU
    assert [ids.device.type for ids in seen] == ["meta"]


def test_generation_feeds_its_batch_to_the_models_device():
    hf_tok = byte_bpe()
    model, tok = ec.wrap_hf(tiny_llama(len(hf_tok)).to("meta"), hf_tok)
    seen = []

    def stop(module, args, kwargs):
        seen.append({k: kwargs[k].device.type for k in ("input_ids", "attention_mask")})
        raise Arrived

    model.hf.register_forward_pre_hook(stop, with_kwargs=True)
    with pytest.raises(Arrived):  # prompts are encoded on the CPU
        ec.generate(model, tok, ["Why?", "Why is the sky blue?"], max_new_tokens=3)
    assert seen == [{"input_ids": "meta", "attention_mask": "meta"}]


def test_a_prompt_and_answer_that_fill_the_context_exactly_are_generated():
    hf_tok = byte_bpe()
    model, tok = ec.wrap_hf(script(tiny_llama(len(hf_tok), max_len=24), {}, default=X), hf_tok)
    n = len(raw(hf_tok, "Question: Why?\nAnswer:"))  # the plain prompt, counted by the tokenizer
    assert n < 24
    # the scripted model always says "x", which is no stop token: 24 - n of them fill the context
    assert ec.generate(model, tok, ["Why?"], max_new_tokens=24 - n) == ["x" * (24 - n)]
    with pytest.raises(ValueError, match=f"max_new_tokens={25 - n} exceeds the model's max_len=24"):
        ec.generate(model, tok, ["Why?"], max_new_tokens=25 - n)


def test_load_hf_hands_a_hub_names_gguf_file_to_transformers(monkeypatch):
    hf_tok, calls = byte_bpe(), []

    def from_pretrained(name_or_path, **kwargs):  # no download: record what transformers gets
        calls.append((name_or_path, kwargs))
        return tiny_llama(len(hf_tok)), hf_tok

    monkeypatch.setattr(ec, "_from_pretrained", from_pretrained)
    model, _ = ec.load_hf("someone/tiny-GGUF", gguf_file="tiny.Q4_0.gguf", dtype=torch.float64)
    assert calls == [("someone/tiny-GGUF", {"dtype": torch.float64, "gguf_file": "tiny.Q4_0.gguf"})]
    assert model.config.name == "someone/tiny-GGUF"


@pytest.fixture(scope="module")
def saved_llama(tmp_path_factory):
    folder = tmp_path_factory.mktemp("llama")
    hf_tok = byte_bpe()
    tiny_llama(len(hf_tok)).save_pretrained(folder)
    hf_tok.save_pretrained(folder)
    return folder


def test_load_hf_puts_the_model_on_the_device_asked_for(saved_llama):
    model, tok = ec.load_hf(saved_llama, device="meta")
    assert {p.device.type for p in model.parameters()} == {"meta"}
    assert tok.eos_id == EOS and tok.bos_ids == ()
    model, _ = ec.load_hf(saved_llama)
    assert {p.device.type for p in model.parameters()} == {"cpu"}


def test_load_hf_passes_add_bos_on(saved_llama):
    _, tok = ec.load_hf(saved_llama, add_bos=True)
    assert tok.bos_ids == (BOS,)
    assert tok.encode_prompt("Why?")[0] == BOS


def test_load_hf_names_a_course_folder_relative_to_the_course(saved_llama):
    model, _ = ec.load_hf(ec.HF_CHECKPOINT_DIR)  # an absolute path, inside the course
    assert model.config.name == "checkpoints/tinygpt2-bpe"  # no machine path in reports
    model, _ = ec.load_hf(saved_llama)  # outside the course: as given
    assert model.config.name == str(saved_llama)


def test_load_hf_loads_in_the_dtype_asked_for(saved_llama):
    model, _ = ec.load_hf(saved_llama, dtype=torch.float64)
    assert {p.dtype for p in model.parameters()} == {torch.float64}


def test_added_tokens_count_in_the_tokenizers_size():
    hf_tok = byte_bpe()
    model = tiny_llama(len(hf_tok))
    hf_tok.add_tokens(["<|tool|>"])  # one more id than the model's embedding has rows
    assert len(hf_tok) == model.config.vocab_size + 1
    with pytest.raises(ValueError, match="do not belong together"):
        ec.wrap_hf(model, hf_tok)


def test_the_context_length_of_a_llama_is_its_max_position_embeddings():
    hf_tok = byte_bpe()
    model, tok = ec.wrap_hf(tiny_llama(len(hf_tok), max_len=24), hf_tok)
    assert model.config.max_len == 24  # a Llama config has no n_positions
    assert ec.perplexity_eval(model, tok, TEXTS[:1]).extras["max_len"] == 24


def test_a_file_the_manifest_lists_but_the_folder_lacks_is_refused(tmp_path):
    (tmp_path / "config.json").write_text("{}", encoding="utf-8")
    sha = {
        "config.json": hashlib.sha256(b"{}").hexdigest(),
        "model.safetensors": "0" * 64,  # listed, never written
    }
    (tmp_path / ec.HF_MANIFEST).write_text(json.dumps({"sha256": sha}), encoding="utf-8")
    with pytest.raises(ValueError, match="model.safetensors has SHA-256 missing"):
        ec.check_hf_folder(tmp_path)
    del sha["model.safetensors"]
    (tmp_path / ec.HF_MANIFEST).write_text(json.dumps({"sha256": sha}), encoding="utf-8")
    assert ec.check_hf_folder(tmp_path)["sha256"] == sha
