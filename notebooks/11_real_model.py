# ---
# jupyter:
#   jupytext:
#     text_representation:
#       extension: .py
#       format_name: percent
#       format_version: '1.3'
#       jupytext_version: 1.19.6
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # 11 · A real model: the tokenizer is part of the metric
#
# Every lesson so far evaluated TinyGPT, whose tokens are bytes. A model from the Hugging Face hub
# brings its own **tokenizer**: the program that cuts a text into the tokens the model predicts.
# Several numbers we have learnt to compute quietly depend on it. This lesson runs the course's evals
# on a Hugging Face model beside TinyGPT, and sorts the numbers into those we can compare across
# tokenizers and those we cannot.
#
# Nothing can be downloaded here, so the model is the course's own: a GPT-2 (transformers'
# `GPT2LMHeadModel`) of TinyGPT's size, trained on the same text. Its tokenizer is a byte-level
# **BPE** tokenizer of 512 tokens, trained with the `tokenizers` library. BPE (byte-pair encoding)
# starts from single bytes and keeps merging the most frequent neighbouring pair into a new token.
# Both ship in `checkpoints/tinygpt2-bpe`, saved with `save_pretrained`. "Going further", at the end,
# shows the line to change to run everything on a real hub model at home.
#
# **What you will learn**
#
# - how `ec.load_hf` and `ec.wrap_hf` put any transformers causal LM behind the evals' interface;
# - why **perplexity per token cannot be compared across tokenizers**, and why **bits per byte** can;
# - what a **BOS** token changes: one more scored token per text, and an expensive one;
# - how little 20 items can separate on exact match, token F1 and the judge;
# - **acc** and **acc_norm** for multiple choice, and why they disagree.
#
# **Time needed:** about 90 minutes.
# **Going further:** about 10 minutes more.
#
# **Builds on:** lesson 01 (perplexity, the next-token shift, no BOS, rolling windows), lessons 02–04
# (exact match, token F1, the mock judge) and lesson 07 (log-likelihoods of multiple-choice answers).
# Nothing is trained here: both models load in seconds.

# %% [markdown]
# ## Setup
#
# TinyGPT and its byte tokenizer load as in every lesson. The BPE GPT-2 loads through `ec.load_hf`,
# the call you would make with a hub name; given the course's folder, it first checks every file's
# SHA-256 against its manifest. PyTorch runs on one thread, on purpose (the README's "Threads"
# section says why, and what `make bench` measured).

# %%
import json
import math
import re

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import torch
import torch.nn.functional as F
import transformers

import evalcore as ec

torch.set_num_threads(1)  # on purpose: see the README's "Threads" section
pd.set_option("display.width", 120)

model, tok = ec.load_pretrained(), ec.InstructionTokenizer()  # TinyGPT: one token per byte
hf_model, hf_tok = ec.load_hf(ec.HF_CHECKPOINT_DIR)  # at home: ec.load_hf("gpt2")
fx = ec.load_fixtures()
texts = fx["lm"]

# %%
# NBVAL_CHECK_OUTPUT
tiny_info = json.loads(ec.CHECKPOINT_PATH.with_suffix(".json").read_text(encoding="utf-8"))
hf_info = ec.check_hf_folder(ec.HF_CHECKPOINT_DIR)  # the manifest, every SHA-256 checked again
cfg = hf_model.hf.config
models = pd.DataFrame({
    "TinyGPT": [model.config.n_layer, model.config.d_model, model.config.max_len, tok.vocab_size,
                model.num_params(), tiny_info["steps"]],
    "BPE GPT-2": [cfg.n_layer, cfg.n_embd, hf_model.config.max_len, hf_tok.vocab_size,
                  hf_model.hf.num_parameters(), hf_info["steps"]]},
    index=["layers", "width", "context (tokens)", "vocabulary", "parameters", "training steps"])
print(models.to_string())

# %% [markdown]
# The two models have the same shape: 4 layers, width 128, 256 positions. The BPE model's 32,384
# extra parameters are exactly the extra rows of its embedding table, (512 − 259) × 128. (In both
# models the output layer reuses the embedding's weights, so those rows count once.) Both were trained
# on the same text, in full windows of 256 tokens, with dropout 0.1. Both used the same one-cycle
# schedule: the learning rate climbs over the first tenth of the steps, then falls. But they did not
# train for the same number of steps (section 4).

# %%
extra = hf_model.hf.num_parameters() - model.num_params()
assert extra == (hf_tok.vocab_size - tok.vocab_size) * cfg.n_embd == 32_384, f"expected 32,384 extra parameters, got {extra}"
assert (cfg.n_layer, cfg.n_embd, cfg.n_positions) == (model.config.n_layer, model.config.d_model,
                                                      model.config.max_len)

# %% [markdown]
# ## 1. Behind the wrapper
#
# The wrapper lets every eval run unchanged on a transformers model. `ec.load_hf(name_or_path)` calls
# transformers' `AutoModelForCausalLM.from_pretrained` and `AutoTokenizer.from_pretrained`, then
# `ec.wrap_hf(hf_model, hf_tokenizer, add_bos=False)`. That returns the pair every eval takes:
#
# - `model`, an `ec.HFCausalLM`: `model(ids)` gives logits `(B, T, V)` in eval mode; `model.hf` is
#   the raw model and `model.config.max_len` its context (the evals' default window);
# - `tok`, an `ec.HFTokenizer`: `encode`, `decode` and the prompt methods the evals call, with
#   `tok.hf` the raw tokenizer, `bos_ids`, `eos_id` and `pad_id`.
#
# A **chat template** is a recipe stored with a tokenizer: it wraps a question in the markers of the
# conversations a chat model was tuned on. A tokenizer with one builds its prompts with it. This one
# has none, so prompts use `ec.PLAIN_PROMPT` (`tok.prompt_format` says which).

# %%
print(f"{type(hf_model).__name__} around {type(hf_model.hf).__name__}; "
      f"{type(hf_tok).__name__} around {type(hf_tok.hf).__name__}")

# %%
# NBVAL_CHECK_OUTPUT
print(f"eos_id {hf_tok.eos_id} ({hf_tok.hf.eos_token!r}), pad_id {hf_tok.pad_id}, "
      f"bos_ids {hf_tok.bos_ids}, prompt_format {hf_tok.prompt_format!r}")
print("BPE GPT-2 prompt:", repr(hf_tok.decode(hf_tok.encode_prompt("Which planet is red?"))))
print("TinyGPT prompt  :", tok.encode_prompt("Hi?"), "= INST, the bytes of 'Hi?', RESP")
text = texts[7]
print(f"{text!r} as TinyGPT tokens:", [tok.decode([i]) for i in tok.encode(text)])
print(f"{text!r} as BPE tokens    :", [hf_tok.decode([i]) for i in hf_tok.encode(text)])

# %% [markdown]
# (`TokenizersBackend` is transformers' class for a tokenizer run by the `tokenizers` library.) The
# tokenizer's one special token, `<|endoftext|>` (id 0), is its **EOS** (end of sequence: the token
# that ends a text) and its padding. As with GPT-2's, it also serves as BOS, but only when we
# ask for one (section 5). "Mars is red." is 12 tokens for TinyGPT and 5 for the BPE model: a
# frequent word with the space before it (" is", " red") is a single BPE token. "Going further"
# shows two traps the wrapper removes: a raw model, and a model left in train mode.

# %% [markdown]
# ## 2. The same texts, two tokenizers
#
# The tokenizer decides how much text a token carries, and so how much fits in "the same" context.
# We evaluate both models on the 20 held-out texts of lesson 01. TinyGPT spends one token on every
# UTF-8 byte; the BPE tokenizer merges frequent byte sequences into single tokens:

# %%
# NBVAL_CHECK_OUTPUT
counts = pd.DataFrame({"bytes": [len(t.encode("utf-8")) for t in texts],
                       "TinyGPT tokens": [len(tok.encode(t)) for t in texts],
                       "BPE tokens": [len(hf_tok.encode(t)) for t in texts]})
counts["bytes per BPE token"] = counts["bytes"] / counts["BPE tokens"]
print(counts.to_string(float_format=lambda v: f"{v:.3g}"))
total = counts[["bytes", "TinyGPT tokens", "BPE tokens"]].sum()
ratio = total["bytes"] / total["BPE tokens"]
print(f"all 20: {total['bytes']} bytes = {total['TinyGPT tokens']} TinyGPT tokens = "
      f"{total['BPE tokens']} BPE tokens ({ratio:.3g} bytes per BPE token)")
assert (counts["TinyGPT tokens"] == counts["bytes"]).all()  # one byte, one token

# %%
fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(12, 4), gridspec_kw={"width_ratios": [2, 1]})
pos = np.arange(len(texts))
ax1.bar(pos - 0.2, counts["TinyGPT tokens"], width=0.4, label="TinyGPT (bytes)")
ax1.bar(pos + 0.2, counts["BPE tokens"], width=0.4, label="BPE GPT-2")
ax1.set(yscale="log", xticks=pos, xlabel="text", ylabel="tokens (log scale)",
        title="Tokens per text: the same 20 texts")
ax1.legend()
ax2.hist(counts["bytes per BPE token"], bins=8, color="tab:orange", edgecolor="black")
ax2.axvline(ratio, color="black", ls="--", label=f"all texts: {ratio:.2f}")
ax2.set(xlabel="bytes per BPE token", ylabel="texts", title="How much a BPE token carries")
ax2.legend()
fig.tight_layout()
plt.show()

# %%
spread = counts["bytes per BPE token"]
print(f"bytes per BPE token: {spread.min():.3g} (text {spread.idxmin()}) to {spread.max():.3g}; "
      f"text 15 as BPE tokens: {[hf_tok.decode([i]) for i in hf_tok.encode(texts[15])]}")
training_text = " ".join(tok.decode(s) for s in ec.training_sequences(tok))  # both models' text
print(f"'hoot' in the training text: {'hoot' in training_text}; 'Owls': {training_text.count('Owls')} times")
assert spread.idxmin() == 15 and spread.min() < 1.5 and 3 < spread.max() < 3.5
assert "hoot" not in training_text

# %% [markdown]
# A BPE token carries 2.55 bytes of these texts on average, and 2 to 3.2 bytes in all texts but one.
# "Owls hoot." (text 15) is cut almost letter by letter: "hoot" never occurs in the training text
# (printed above), and few capitalised words got merges ("Owls" occurs only twice). The long text 19
# is almost three of TinyGPT's 256-token contexts (748 bytes), while its 259 BPE tokens nearly fit in
# one.

# %% [markdown]
# ## 3. Perplexity per token, and bits per byte
#
# Per token TinyGPT looks better. Per byte the BPE model is ahead, and only the per-byte number can be
# compared. Both models go through `ec.perplexity_eval` on the same texts, each with its own context
# as the window. Its `extras` give bits per token, the total UTF-8 bytes, and **bits per byte**: the
# total NLL in bits over the total bytes.
#
# Mind two counts. The *scored* tokens are those the model predicts. Without a BOS token (lesson 01)
# a text's first token is context only, so TinyGPT scores 1,783 of its 1,803 tokens and the BPE model
# 688 of its 708. The bytes are *all* counted, the first token's too, as lm-evaluation-harness counts
# them for its `bits_per_byte`. Section 5 scores the first token as well.

# %% tags=["live"]
# Both models through ec.perplexity_eval; headline() picks bits per token and per byte from extras; defines: headline, res_bpe, res_tiny, show
res_tiny = ec.perplexity_eval(model, tok, texts)
res_bpe = ec.perplexity_eval(hf_model, hf_tok, texts)


def headline(res):
    x = res.extras
    return {"perplexity per token": res.value, "scored tokens": x["total_tokens"],
            "bits per token": x["bits_per_token"], "total bytes": x["total_bytes"],
            "bits per byte": x["bits_per_byte"]}


def show(table):
    return table.map(lambda v: f"{v:.4g}" if isinstance(v, float) else v).to_string()


# %%
# NBVAL_CHECK_OUTPUT
ppl_table = pd.DataFrame({"TinyGPT": headline(res_tiny), "BPE GPT-2": headline(res_bpe)}).T
print(show(ppl_table.astype(object)))

# %% [markdown]
# Per token, TinyGPT's perplexity is about 7 and the BPE model's about 64. That does **not** say
# TinyGPT is nine times better: the units differ. A BPE token carries about 2.5 bytes, so each BPE
# prediction chooses among 512 multi-byte pieces, a harder guess than the next byte. And there are
# fewer of them (688 predictions against 1,783). Perplexity per token mixes how good the model is
# with how big its tokens are.
#
# Bits per byte removes the token from the denominator: both models spend their bits on the same
# 1,803 bytes. Bits per token times scored tokens and bits per byte times bytes are the same total.
# Only the division differs:

# %%
for res in (res_tiny, res_bpe):
    ex = res.extras
    assert abs(ex["bits_per_byte"] - ex["total_nll"] / math.log(2) / ex["total_bytes"]) < 1e-12
    assert abs(ex["bits_per_token"] * ex["total_tokens"] - ex["bits_per_byte"] * ex["total_bytes"]) < 1e-6
assert res_tiny.extras["total_bytes"] == res_bpe.extras["total_bytes"] == total["bytes"]
assert res_tiny.value < res_bpe.value  # per token, TinyGPT looks better...
assert res_bpe.extras["bits_per_byte"] < res_tiny.extras["bits_per_byte"]  # ...per byte, it is not

# %%
names, colours = ["TinyGPT", "BPE GPT-2"], ["tab:blue", "tab:orange"]
fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(10, 4))
for ax, key, title in [(ax1, "perplexity per token", "Perplexity per token: NOT comparable"),
                       (ax2, "bits per byte", "Bits per byte: comparable")]:
    values = ppl_table[key].astype(float)
    ax.bar(names, values, color=colours)
    for i, v in enumerate(values):
        ax.text(i, v, f"{v:.3g}", ha="center", va="bottom")
    ax.set(ylabel=f"{key} (lower is better)", title=title)
fig.suptitle("The same 20 texts, the same kind of model, two tokenizers")
fig.tight_layout()
plt.show()


# %% [markdown]
# Per byte, the BPE model is ahead: 2.29 bits against 2.80. How far do 20 texts support that? We check
# per text, and with a paired bootstrap (lesson 01): resample the texts, score both models on each
# resampled set, and see how far the corpus gap moves. The corpus gap is the difference in bits per
# byte over all the texts pooled (total NLL over total bytes).

# %%
def text_bpb(res):
    return np.array([r["nll"] / math.log(2) / r["n_bytes"] for r in res.per_example])


def gap_per_byte(values, weights):
    # b's corpus bits per byte minus a's on each resample of texts; columns nll_a, nll_b, bytes
    diff = (weights * (values[:, 1] - values[:, 0])).sum(-1)
    return diff / math.log(2) / (weights * values[:, 2]).sum(-1)


def bpb_gap(a, b):
    # the gap and its 95 % interval, both models on the same resampled texts (ec.bootstrap_ci)
    rows = [[ra["nll"], rb["nll"], ra["n_bytes"]] for ra, rb in zip(a.per_example, b.per_example)]
    gap = (b.extras["total_nll"] - a.extras["total_nll"]) / math.log(2) / a.extras["total_bytes"]
    return (gap, *ec.bootstrap_ci(rows, statistic=gap_per_byte))


# %%
# NBVAL_CHECK_OUTPUT
wins = int((text_bpb(res_bpe) < text_bpb(res_tiny)).sum())
gap, lo, hi = bpb_gap(res_tiny, res_bpe)
print(f"BPE GPT-2 has fewer bits per byte on {wins} of {len(texts)} texts")
print(f"corpus gap {gap:+.4g} bits per byte, 95 % bootstrap interval [{lo:+.3g}, {hi:+.3g}]")
assert wins == 17, f"expected the BPE model ahead on 17 texts, got {wins}"
assert hi < 0  # the 95% interval stays below zero

# %%
fig, ax = plt.subplots(figsize=(5.5, 5))
bt, bb = text_bpb(res_tiny), text_bpb(res_bpe)
ax.scatter(bt, bb, s=18 + counts["bytes"] / 8, alpha=0.7)
for i in np.flatnonzero(bb > bt):
    ax.annotate(str(i), (bt[i], bb[i]), textcoords="offset points", xytext=(4, 4))
top = max(bt.max(), bb.max()) + 0.2
ax.plot([1, top], [1, top], "--", color="gray", label="equal")
ax.set(xlim=(1, top), ylim=(1, top), xlabel="TinyGPT, bits per byte", ylabel="BPE GPT-2, bits per byte",
       title="Per text (area ~ bytes): below the line, BPE is better")
ax.legend(loc="upper left")
plt.show()

# %% [markdown]
# On these texts the BPE GPT-2 predicts the bytes better: it is lower on 17 of 20 texts, and the
# interval for the corpus gap stays below zero.
#
# **How sure are we?**
#
# - The texts are 20 short sentences (and one long paragraph) about the course's own small set of
#   facts: nothing follows about text in general.
# - Each model is one training run from one seed, and their training budgets differ (section 4).
#
# ### The first token
#
# Neither model scores a text's first token (`extras["first_token_scored"]` is False), yet
# `bits_per_byte` divides by *all* the bytes. How many go unscored, and what would bits per byte be
# over the scored bytes alone?

# %%
# NBVAL_CHECK_OUTPUT
first = [hf_tok.decode(hf_tok.encode(t)[:1]) for t in texts]
print("first BPE token of each text:", first)
unscored = {"TinyGPT": len(texts), "BPE GPT-2": sum(len(f.encode("utf-8")) for f in first)}
first_table = pd.DataFrame({
    "bits per byte": [r.extras["bits_per_byte"] for r in (res_tiny, res_bpe)],
    "unscored bytes": list(unscored.values()),
    "bits per scored byte": [r.extras["total_nll"] / math.log(2) / (r.extras["total_bytes"] - n)
                             for r, n in zip((res_tiny, res_bpe), unscored.values())]}, index=names)
print(show(first_table.astype(object)))

# %%
single = sum(len(f) == 1 for f in first)
shift = first_table["bits per scored byte"] - first_table["bits per byte"]
assert single == 18 and unscored["BPE GPT-2"] == 27, f"expected 18 one-letter first tokens and 27 unscored BPE bytes, got {single} and {unscored['BPE GPT-2']}"
assert shift.max() < 0.05 and shift.max() < abs(gap) / 10  # each moves by under a tenth of the gap

# %% [markdown]
# Counting only the scored bytes moves each model's bits per byte by about 0.03, under a tenth of the
# 0.51 gap between them. This tokenizer learnt few merges that start with a capital: 18 of the 20
# texts begin with a one-letter token ("M" of "Mars"). So the BPE model skips 27 bytes in all, against
# TinyGPT's 20. With a hub tokenizer the first token is often a whole word, worth several unscored
# bytes per text. Section 5 removes the skip with a BOS token.

# %% [markdown]
# ## 4. The pitfall: a different tokenizer "improves" perplexity
#
# The unit alone can move perplexity more than tenfold (13 times here) and swap two models' places.
#
# **(a) One model, one set of predictions, two numbers.** The BPE model's 688 predictions have one
# total NLL. Per token, it is a perplexity of about 64. Per byte, it is under 5 (2 to the power of
# the bits per byte: the perplexity of an average byte). Nothing about the model differs, only the
# unit:

# %%
# NBVAL_CHECK_OUTPUT
xb = res_bpe.extras
per_byte = 2 ** xb["bits_per_byte"]
print(f"total NLL {xb['total_nll']:.4g} nats; {xb['total_tokens']} scored tokens; {xb['total_bytes']} bytes")
print(f"perplexity per token           : {res_bpe.value:.4g}")
print(f"per byte (2 ** bits_per_byte)  : {per_byte:.4g}")
print(f"ratio                          : {res_bpe.value / per_byte:.4g}")

# %% [markdown]
# Perplexity per token is the per-byte perplexity raised to the power bytes / scored tokens, here
# 1803 / 688 ≈ 2.6. With B bytes and T scored tokens, exp(NLL / T) = exp(NLL / B)^(B / T), and
# exp(NLL / B) is the per-byte perplexity. A finer tokenizer has more tokens per byte, so a smaller
# exponent: at the same bits per byte, its per-token perplexity is lower.

# %%
assert abs(per_byte ** (xb["total_bytes"] / xb["total_tokens"]) / res_bpe.value - 1) < 1e-9
assert res_bpe.value / per_byte > 10  # an order of magnitude from the unit alone


# %% [markdown]
# **(b) Two models of one family, two tokenizers.** Training budgets count tokens, and a BPE token
# carries more text. So the BPE model read more bytes in half TinyGPT's steps. The two share their
# shape, training text, full-context windows, dropout and schedule. What differs comes with the
# tokenizer:
#
# - the training Q&A is in each model's own prompt format;
# - the training text's fact statements ("The capital of France is Paris.") end with an EOS for the
#   BPE model, with a space for TinyGPT;
# - the budget. A step is a batch of 16 windows of 256 *tokens* (in `ec.train_tinygpt` and
#   `ec.train_hf_model`): 300 steps for the BPE model, 600 for TinyGPT.
#
# In bytes of training text:

# %%
# NBVAL_CHECK_OUTPUT
def bytes_per_token(t, seqs):
    return sum(len(t.decode(s).encode("utf-8")) for s in seqs) / sum(map(len, seqs))


bpe_seqs = [s for g in ec.training_groups(hf_tok, after_statement=[hf_tok.eos_id]) for s in g]
budget = pd.DataFrame({"steps": [tiny_info["steps"], hf_info["steps"]],
                       "tokens per step": [16 * 256, 16 * 256],
                       "bytes per token": [bytes_per_token(tok, ec.training_sequences(tok)),
                                           bytes_per_token(hf_tok, bpe_seqs)]}, index=names)
budget["bytes seen (millions)"] = budget.prod(axis=1) / 1e6
print(show(budget.astype(object)))

# %% [markdown]
# TinyGPT's sequences hold a few special tokens (INST, RESP, PAD) that are not bytes, so its tokens
# carry slightly under one byte each. The BPE model read about 1.4 times as many bytes. So this is no
# clean experiment on the tokenizer: some of its lead in bits per byte may come from the larger
# budget. It is still a fair test of the *metric*, with both numbers side by side:

# %%
# NBVAL_CHECK_OUTPUT
rank = ppl_table[["perplexity per token", "bits per byte"]].astype(float)
print(rank.to_string(float_format=lambda v: f"{v:.4g}"))
better = {unit: rank[unit].idxmin() for unit in rank}
print("lower is better ->", better)
assert budget.loc["BPE GPT-2", "bytes seen (millions)"] > budget.loc["TinyGPT", "bytes seen (millions)"]
assert better == {"perplexity per token": "TinyGPT", "bits per byte": "BPE GPT-2"}

# %% [markdown]
# Per-token perplexity ranks TinyGPT first by a factor of nine; bits per byte ranks the BPE model
# first. The byte model "wins" on perplexity only because its unit is smaller. That is the pitfall:
# **perplexity is only comparable between models that share one tokenizer**. Across vocabularies, a
# table of per-token perplexities compares tokenizers as much as models. Use a tokenizer-free
# denominator and say which: bits per byte, per character or per word (exercise 4).

# %% [markdown]
# ## 5. BOS or no BOS: what the first token costs
#
# Scoring the first token is a different metric, and the one to set beside lm-evaluation-harness's
# `bits_per_byte`. evalcore prepends nothing by default (`tok.bos_ids == ()`), so the first token is
# context, never predicted. The harness always scores from a prefix token, the tokenizer's BOS else
# its EOS: `loglikelihood_rolling` puts it before every text, so every token is predicted.
# `ec.wrap_hf(..., add_bos=True)` does the same, with GPT-2's convention that EOS doubles as BOS. Only
# the tokenizer wrapper changes:

# %% tags=["live"]
# NBVAL_CHECK_OUTPUT
# BOS: re-wrap with ec.wrap_hf(hf_model.hf, hf_tok.hf, add_bos=True) and evaluate the same texts; defines: res_bos, hf_tok_bos
_, hf_tok_bos = ec.wrap_hf(hf_model.hf, hf_tok.hf, add_bos=True)
res_bos = ec.perplexity_eval(hf_model, hf_tok_bos, texts)
print(f"bos_ids {hf_tok_bos.bos_ids} = the EOS id {hf_tok_bos.eos_id}; "
      f"extras['first_token_scored']: {res_bos.extras['first_token_scored']} (without BOS: {res_bpe.extras['first_token_scored']})")
bos_table = pd.DataFrame({"no BOS": headline(res_bpe), "BOS": headline(res_bos)}).T
print(show(bos_table.astype(object)))

# %%
assert res_bos.extras["total_tokens"] == res_bpe.extras["total_tokens"] + len(texts)  # one per text
assert all(b["n_tokens"] == a["n_tokens"] + 1 for a, b in zip(res_bpe.per_example, res_bos.per_example))
assert res_bos.extras["bits_per_byte"] > res_bpe.extras["bits_per_byte"]
assert res_bos.extras["first_token_scored"] and not res_bpe.extras["first_token_scored"]

# %% [markdown]
# One more scored token per text, 20 in all, and bits per byte rises from 2.29 to 2.41. Each added
# token is predicted from the BOS alone, with no word of the text to go on, so it is expensive.

# %%
# NBVAL_CHECK_OUTPUT
first_nll = np.array([r["token_nll"][0] for r in res_bos.per_example])
rest_nll = np.concatenate([r["token_nll"][1:] for r in res_bos.per_example])
print(f"first token: mean NLL {first_nll.mean():.4g} nats (from {first_nll.min():.3g} to {first_nll.max():.4g})")
print(f"other tokens: mean NLL {rest_nll.mean():.4g} nats;  a uniform guess: ln 512 = {math.log(512):.4g}")
added = first_nll.sum() / math.log(2) / res_bos.extras["total_bytes"]
moved = (rest_nll.sum() - res_bpe.extras["total_nll"]) / math.log(2) / res_bos.extras["total_bytes"]
print(f"bits per byte {res_bpe.extras['bits_per_byte']:.4g} -> {res_bos.extras['bits_per_byte']:.4g}: "
      f"{added:+.4g} from the first tokens, {moved:+.4g} from the others")
assert first_nll.mean() > rest_nll.mean() + 1  # over a nat dearer than an average token
assert abs(res_bpe.extras["bits_per_byte"] + added + moved - res_bos.extras["bits_per_byte"]) < 1e-9
others_moved = np.array([sum(b["token_nll"][1:]) - a["nll"] for a, b in zip(res_bpe.per_example, res_bos.per_example)])
print(f"the other tokens' NLL with BOS, text by text: up on {(others_moved > 0).sum()}, down on {(others_moved < 0).sum()}")

# %%
rest_by_text = [np.mean(r["token_nll"][1:]) for r in res_bos.per_example]
fig, ax = plt.subplots(figsize=(9, 4))
ax.bar(pos, first_nll, color="tab:orange", label="first token, predicted from BOS alone")
ax.plot(pos, rest_by_text, "o", color="tab:blue", label="mean of the text's other tokens")
ax.axhline(math.log(512), color="gray", ls="--", label="uniform over 512 tokens (ln 512)")
ax.set(xticks=pos, xlabel="text", ylabel="NLL (nats)", ylim=(0, 14.5),
       title="What the first token costs (BPE GPT-2 with BOS)")
ax.legend(loc="upper center", ncol=3, fontsize=8)
plt.show()

# %% [markdown]
# The first tokens cost about 5.9 nats on average, not far below a uniform guess among 512 tokens
# (6.24), against about 4.2 for the other tokens. They account for most of the rise (+0.094 bits per
# byte). The rest (+0.02) comes from the other tokens, which now sit one position later with the BOS
# in their context: their NLL rises on 14 texts and falls on 6 (printed above).
#
# Neither convention is wrong. With BOS, the number includes the cost of starting a text. Without, the
# first token is free, and a tokenizer whose first token is long gets more free bytes. The harness
# uses the prefix token, so **the number to set beside a published lm-evaluation-harness
# `bits_per_byte` is the one with BOS: 2.405 here, not evalcore's default 2.289**. Report which
# (`extras["first_token_scored"]`), and never compare a number with BOS against one without.
#
# TinyGPT has no BOS-like token it was trained to start texts after, so it still skips 20 bytes while
# the harness-style BPE number scores every byte. Does the BPE model's lead survive this comparison,
# tilted in TinyGPT's favour?

# %%
# NBVAL_CHECK_OUTPUT
wins_bos = int((text_bpb(res_bos) < text_bpb(res_tiny)).sum())
gap_bos, lo_bos, hi_bos = bpb_gap(res_tiny, res_bos)
print(f"BPE GPT-2 with BOS has fewer bits per byte on {wins_bos} of {len(texts)} texts")
print(f"corpus gap {gap_bos:+.4g} bits per byte, 95 % bootstrap interval [{lo_bos:+.3g}, {hi_bos:+.3g}]")
assert wins_bos == 14, f"expected the BPE model with BOS ahead on 14 texts, got {wins_bos}"
assert hi_bos < 0 and gap < gap_bos  # smaller, still below zero

# %% [markdown]
# It does: the gap shrinks from about −0.51 to −0.40 bits per byte, the BPE model is ahead on 14
# texts instead of 17, and the interval still stays below zero. On these texts, the ranking by bits
# per byte does not hinge on the BOS convention; the size of the gap does.
#
# **How sure are we?** The limits of section 3 still hold.
#
# *Sources:* the harness's `prefix_token_id` is in `lm_eval/models/huggingface.py` (read at commit
# 4e7e0d4). `tests/test_11_real_model.py` rewrites its rolling windows and gets the BOS number to
# within 1e-6.

# %% [markdown]
# ## 6. Exact match, token F1 and the judge on the BPE model
#
# On exact match and token F1 the models are level. The judge prefers the BPE model (p ≈ 0.02 on its
# own). That survives Tarone's correction (lesson 08) for the tests that could reach significance,
# narrowly, but not Bonferroni's for all three (both below).
#
# The generation evals need nothing new. `generate` decodes greedily through the wrapper as it does
# for TinyGPT: in batches of prompts, with a **KV cache**. That is the store of the attention keys
# and values of earlier tokens, which spares recomputing them at each new token. Each result records
# its prompt format in `extras["prompt_format"]`. TinyGPT's prompts are `INST question RESP`
# ("inst_resp"); the BPE model's are `ec.PLAIN_PROMPT`, `"Question: ...\nAnswer:"` ("plain"), the
# format of its training Q&A.

# %%
pairs = {"EM": ("em", ec.exact_match_eval), "F1": ("f1", ec.token_f1_eval), "judge": ("judge", ec.judge_eval)}
runs = {name: {metric: run(m, t, fx[key]) for metric, (key, run) in pairs.items()}
        for name, (m, t) in {"TinyGPT": (model, tok), "BPE GPT-2": (hf_model, hf_tok)}.items()}

# %%
# NBVAL_CHECK_OUTPUT
gen_table = pd.DataFrame({name: {**{metric: r.value for metric, r in res.items()},
                                 "prompt_format": res["EM"].extras["prompt_format"]}
                          for name, res in runs.items()}).T
print(show(gen_table.astype(object)))
assert gen_table["prompt_format"].tolist() == ["inst_resp", "plain"]


# %% [markdown]
# A few answers side by side (a line break in an answer is shown as ⏎):

# %%
# NBVAL_CHECK_OUTPUT
def clip(text, n=44):
    text = text.replace("\n", " ⏎ ")
    return text if len(text) <= n else text[:n - 1] + "…"


def answers(metric, rows):
    recs = {name: runs[name][metric].per_example for name in runs}
    return pd.DataFrame({"question": [r["instruction"] for r in recs["TinyGPT"]],
                         **{name: [clip(r["prediction"]) for r in recs[name]] for name in recs},
                         "reference": [r["reference"] for r in recs["TinyGPT"]]}).iloc[rows]


print(answers("EM", [0, 1, 2, 5, 6, 13]).to_string())

# %% [markdown]
# Two habits show. TinyGPT spells byte by byte, and some slips are single letters ("degres" for
# "degrees"). The BPE model writes in larger pieces, and sometimes runs on past its answer into
# another `Question: ... Answer:`. Generation stops at an EOS. Where the model writes none, it goes on
# as in its training stream, where another question follows each answer's EOS. Over all 60 answers (3
# evals × 20) we count words absent from the training text (misspellings, glued pieces), and answers
# that contain `Question:`.

# %%
# NBVAL_CHECK_OUTPUT
known = {w for s in ec.training_sequences(tok) for w in re.findall(r"[a-z]+", tok.decode(s).lower())}
known |= set(re.findall(r"[a-z]+", ec.PLAIN_PROMPT.lower()))  # "question", "answer"
habits = {}
for name in runs:
    preds = [r["prediction"] for res in runs[name].values() for r in res.per_example]
    words = [w for p in preds for w in re.findall(r"[a-z]+", p.lower())]
    unknown = [w for w in words if w not in known]
    habits[name] = {"answers": len(preds), "words": len(words), "not in training text": len(unknown),
                    "share": len(unknown) / len(words), "contain 'Question:'": sum("Question:" in p for p in preds)}
    print(f"{name:<9}: e.g. {sorted(set(unknown))[:8]}")
habits = pd.DataFrame(habits).T
print(show(habits.astype(object)))
assert habits.loc["TinyGPT", "share"] > 2 * habits.loc["BPE GPT-2", "share"]
assert habits.loc["TinyGPT", "contain 'Question:'"] == 0 < habits.loc["BPE GPT-2", "contain 'Question:'"], (
    f"expected run-on answers from the BPE model only, got {habits.iloc[:, -1].to_dict()}")

# %% [markdown]
# A third of TinyGPT's words (31 %) never occur in the training text, against 5 % of the BPE model's.
# 7 of the BPE model's 60 answers run on into another question, and none of TinyGPT's. Both are
# effects of the tokenizer on generation, invisible in a single score.
#
# Are the differences in the table real? Both models answered the same 20 items per eval, so we count
# where the BPE model scores higher, lower or the same, and apply a **sign test**. Under "no
# difference" each non-tied item is a fair coin, so the number of wins is **binomial**: the count of
# heads in that many fair tosses. (On 0/1 scores such as exact match this is McNemar's exact test of
# lesson 05. On F1 and judge scores it counts the items that moved up and down in the same way.)

# %%
rows = []
for metric in pairs:
    a = np.array([r["score"] for r in runs["TinyGPT"][metric].per_example])
    b = np.array([r["score"] for r in runs["BPE GPT-2"][metric].per_example])
    up, down = int((b > a).sum()), int((b < a).sum())
    rows.append({"eval": metric, "BPE higher": up, "BPE lower": down, "tied": len(a) - up - down,
                 "sign test p": ec.mcnemar_exact(down, up)})  # the exact binomial test
paired = pd.DataFrame(rows).set_index("eval")
paired["smallest p"] = [ec.mcnemar_exact(n, 0) for n in paired["BPE higher"] + paired["BPE lower"]]  # lesson 08
paired["survives Tarone-Holm"] = ec.tarone_holm(paired["sign test p"].tolist(), paired["smallest p"].tolist())

# %%
# NBVAL_CHECK_OUTPUT
print(paired.to_string(float_format=lambda v: f"{v:.3g}"))
print("tests Tarone counts at the 5% level:", ec.tarone_count(paired["smallest p"].tolist(), 0.05))
assert paired.loc["EM", "BPE higher"] == paired.loc["EM", "BPE lower"] == 2, paired.loc["EM"].tolist()
assert paired.loc["F1", "BPE higher"] == paired.loc["F1", "BPE lower"] == 7, paired.loc["F1"].tolist()
assert (paired.loc["judge", "BPE higher"], paired.loc["judge", "BPE lower"]) == (11, 2), paired.loc["judge"].tolist()
assert paired.loc["judge", "sign test p"] < 0.05 < 3 * paired.loc["judge", "sign test p"]
assert paired["survives Tarone-Holm"].tolist() == [False, False, True]  # the judge, against 0.05 / 2
kept = ec.tarone_count(paired["smallest p"].tolist(), 0.05)  # EM's 4 changed items: at best 0.125
assert kept == 2, f"expected Tarone to count 2 tests (EM cannot reach 0.05), got {kept}"

# %% [markdown]
# - **Exact match:** 6 of 20 for both, and they differ on only 4 items, 2 each way. Nothing to see.
# - **Token F1:** 0.298 against 0.301; higher on 7 items, lower on 7. Level.
# - **Judge:** 1.95 against 2.95; the BPE model scores higher on 11 items and lower on 2 (p ≈ 0.02).
#
# **How sure are we?** The judge's split is more than a couple of answers, but keep it in proportion:
#
# - It is one test of three. **Bonferroni's correction**, the simpler, stricter cousin of Holm's
#   (lesson 08), multiplies each p by the number of tests (or divides 0.05 by it): 3 × 0.0225 ≈ 0.07,
#   above 0.05. Holm's first step is the same.
# - Lesson 08 showed why both are too strict for exact tests on a few changed items. Exact match
#   changed on only 4 items, so its smallest possible p is 2/2⁴ = 0.125: it could never reach 0.05.
#   Tarone's correction therefore counts two tests, not three (the table's last columns), and
#   compares 0.0225 with 0.05 / 2 = 0.025. The judge's preference survives, by a hair.
# - It is one set of 20 questions, and a mock judge built from EM and F1 against whole-sentence
#   references.
#
# The item-level view shows where it comes from:

# %%
# NBVAL_CHECK_OUTPUT
judged = answers("judge", slice(None))
judged["TinyGPT score"] = [r["score"] for r in runs["TinyGPT"]["judge"].per_example]
judged["BPE score"] = [r["score"] for r in runs["BPE GPT-2"]["judge"].per_example]
fives = judged[judged["BPE score"] == 5]
print(fives[["TinyGPT", "TinyGPT score", "BPE GPT-2", "BPE score"]].to_string())
print(f"score 5: TinyGPT {int((judged['TinyGPT score'] == 5).sum())}, BPE GPT-2 {len(fives)}; "
      f"the same answer from both: {int((fives['TinyGPT'] == fives['BPE GPT-2']).sum())}")
assert len(fives) == 6 and (judged["TinyGPT score"] == 5).sum() == 1, f"expected 6 and 1 answers scored 5, got {len(fives)} and {(judged['TinyGPT score'] == 5).sum()}"
assert (fives["TinyGPT"] == fives["BPE GPT-2"]).sum() == 1, "expected one answer identical for both models"

# %% [markdown]
# Six of the BPE model's answers score 5, which the mock judge gives only to an exact match (lesson
# 04): each is a whole reference sentence ("Bees make honey."). On one
# of those questions TinyGPT gives the same answer ("A spider has eight legs.", its only 5). On the
# other five its answers are shorter ("Paris", "Mars"), misspelt ("Bes make honey.", "A weeek has
# haseven days.") or run off into repetition ("The Sun is the Sun a a a a a ar."). It is a real
# pattern on this set, and a plausible effect of the tokenizer, but 20 items from one fixture cannot
# tell how far it generalises.

# %% [markdown]
# ## 7. Multiple choice by log-likelihood: acc and acc_norm
#
# Both models beat chance, and their accuracies are not shown to differ. But the scoring rule moves
# the same items' accuracy by up to 15 points. As in lesson 07, each choice is scored by its
# log-likelihood after the prompt (teacher forcing, lesson 06). `ec.choice_logliks` follows
# lm-evaluation-harness: it scores the choice with the space before it (the harness's "target
# delimiter"), `" " + choice`, and nothing after it. `ec.choice_accuracy` gives the harness's two
# accuracies:
#
# - **acc** picks the choice with the highest log-likelihood;
# - **acc_norm** picks the highest log-likelihood *per character* of the choice:
#   `completion_len = np.array([float(len(i)) for i in choices])`, `pred_norm = np.argmax(lls / completion_len)`.
#
# It works on the wrapped model unchanged, with the plain prompt `"Question: ...\nAnswer:"`. The acc
# interval is Wilson's (lesson 02).

# %%
items = ec.multiple_choice_items()
logliks = {"TinyGPT": ec.choice_logliks(model, tok, items),
           "BPE GPT-2": ec.choice_logliks(hf_model, hf_tok, items)}
mc = {name: ec.choice_accuracy(items, ll) for name, ll in logliks.items()}

# %%
# NBVAL_CHECK_OUTPUT
mc_table = pd.DataFrame({name: {"acc": r.value, "acc 95% CI": "[{:.2f}, {:.2f}]".format(*r.extras["ci95"]),
                                "acc_norm": r.extras["acc_norm"], "items": r.extras["n_items"],
                                "acc and acc_norm disagree": r.extras["disagreements"]}
                         for name, r in mc.items()}).T
print(show(mc_table.astype(object)))

# %% [markdown]
# Both models pick the gold answer more often than chance (5 of 20): both Wilson intervals start above
# 0.25. But the intervals are wide. TinyGPT's acc and the BPE model's differ by one item, so they are
# not shown to differ. A net difference of one item gives McNemar's exact p = 1 (printed below),
# however the items that only one model gets right split.
#
# The same number, computed by hand the harness's way on the raw model: the prompt and `" " + choice`
# through `hf_model.hf`, the log-probabilities of the choice's tokens summed, the highest picked.

# %%
@torch.no_grad()
def harness_loglik(question, continuation, closing=False):
    # lm-evaluation-harness's loglikelihood of a continuation after a context, on the raw model;
    # closing=True appends the EOS to the continuation
    context = hf_tok.hf.encode(ec.PLAIN_PROMPT.format(instruction=question))
    cont = hf_tok.hf.encode(continuation) + ([hf_tok.eos_id] if closing else [])
    ids = torch.tensor([context + cont])
    logits = hf_model.hf(input_ids=ids, attention_mask=torch.ones_like(ids)).logits
    logp = F.log_softmax(logits[0, :-1].double(), -1)  # row i predicts token i + 1
    return float(logp[len(context) - 1:].gather(-1, torch.tensor(cont)[:, None]).sum())


def acc_by_hand(closing=False):
    picks = [np.argmax([harness_loglik(it["question"], " " + c, closing) for c in it["choices"]]) for it in items]
    return np.mean([pick == it["gold"] for pick, it in zip(picks, items)])


by_hand = acc_by_hand()
print(f"acc by hand, the harness's continuation: {by_hand:.4g}")
assert by_hand == mc["BPE GPT-2"].value, (by_hand, mc["BPE GPT-2"].value)
acc_gap = ec.paired_difference(mc["TinyGPT"], mc["BPE GPT-2"])  # the same 20 items: paired
print(f"acc, BPE GPT-2 minus TinyGPT: {acc_gap['diff']:+.2f}; right for one model only: BPE GPT-2 "
      f"{acc_gap['rescued']}, TinyGPT {acc_gap['broke']}; McNemar exact p = {acc_gap['p_mcnemar']:.2f}")
assert acc_gap["rescued"] - acc_gap["broke"] == 1 and acc_gap["p_mcnemar"] == 1.0

# %% [markdown]
# ### A quiet choice of the harness: the closing token
#
# `ec.choice_logliks(..., end_token=True)` also scores the token that closes the answer (PAD for
# TinyGPT, EOS here; lesson 07's answer confidences keep it). It asks not "how likely is this text?"
# but "how likely is this text *as the whole answer*?". Same models, items and prompts:

# %% tags=["live"]
# NBVAL_CHECK_OUTPUT
# The same scores with end_token=True, and every item whose acc pick changes; defines: logliks_end, with_end
logliks_end = {"TinyGPT": ec.choice_logliks(model, tok, items, end_token=True),
               "BPE GPT-2": ec.choice_logliks(hf_model, hf_tok, items, end_token=True)}
with_end = {name: ec.choice_accuracy(items, ll) for name, ll in logliks_end.items()}
print(pd.DataFrame({name: {"acc, harness rule": mc[name].value, "acc, + closing token": with_end[name].value,
                           "acc_norm, harness rule": mc[name].extras["acc_norm"],
                           "acc_norm, + closing token": with_end[name].extras["acc_norm"]}
                    for name in mc}).T.to_string(float_format=lambda v: f"{v:.4g}"))
for name in mc:
    for it, a, b, la, lb in zip(items, mc[name].per_example, with_end[name].per_example,
                                logliks[name], logliks_end[name]):
        if a["pred"] != b["pred"]:
            cost = {c: round(x - y, 2) for c, x, y in zip(it["choices"], la, lb)}
            print(f"{name:<9} gold {it['choices'][it['gold']]!r:<13} harness picks {it['choices'][a['pred']]!r:<11} "
                  f"+ closing token picks {it['choices'][b['pred']]!r:<15} closing token costs {cost}")

# %%
gold_lost = {name: sum(a["score"] > b["score"] for a, b in zip(mc[name].per_example, with_end[name].per_example))
             for name in mc}
assert gold_lost == {"TinyGPT": 1, "BPE GPT-2": 2}, gold_lost
assert all(abs(with_end[n].value - (mc[n].value - gold_lost[n] / len(items))) < 1e-12 for n in mc)  # none gained
assert acc_by_hand(closing=True) == with_end["BPE GPT-2"].value  # the harness's way, the EOS appended
i = next(i for i, it in enumerate(items) if it["choices"][it["gold"]] == "365 days")
tie = {c: ll for c, ll in zip(items[i]["choices"], logliks["BPE GPT-2"][i])}
tie_end = {c: ll for c, ll in zip(items[i]["choices"], logliks_end["BPE GPT-2"][i])}
print(f"BPE GPT-2, harness rule: '365 days' {tie['365 days']:.2f}, '8' {tie['8']:.2f}; "
      f"+ closing token: {tie_end['365 days']:.2f} and {tie_end['8']:.2f}")
assert 0 < tie["365 days"] - tie["8"] < (tie["365 days"] - tie_end["365 days"]) - (tie["8"] - tie_end["8"])  # a near tie, tipped

# %% [markdown]
# One switch moves the BPE model's acc by 10 points, from 0.65 to 0.55, and TinyGPT's by 5, from
# 0.60 to 0.55: three gold answers lost, none gained. The closing token is cheap when the model
# thinks the answer is complete, and dear when it expected more text:
#
# - after "A tadpole" the BPE model expected more: the EOS costs 3.36 nats, under 1 after "The Sun";
# - after "Rome" TinyGPT did: 6.51 nats for its PAD, 0.38 after "Paris";
# - "365 days" against "8" was a near tie (−5.02 against −5.03, printed above) that a closing token of
#   0.06 nats tips.
#
# So the end-token rule also rewards the choice the model takes for a finished answer; the harness's
# rule rewards only likely words. This is a change of *definition*, not of luck: the acc interval
# measures only which 20 items were drawn. Neither rule is wrong, but an accuracy is comparable only
# with one under the same rule, and the number alone does not show which rule made it. By default
# evalcore follows the harness, so that its acc can be set beside the harness's; so does the rest of
# this section.
#
# ### Where acc and acc_norm disagree
#
# Each pick shows its log-likelihood in nats, to one decimal:

# %%
# NBVAL_CHECK_OUTPUT
rows = []
for name, res in mc.items():
    for it, rec, lls in zip(items, res.per_example, logliks[name]):
        if rec["pred"] != rec["pred_norm"]:
            acc_pick, norm_pick = it["choices"][rec["pred"]], it["choices"][rec["pred_norm"]]
            rows.append({"model": name, "question": it["question"][:34], "gold": it["choices"][it["gold"]],
                         "acc picks": f"{acc_pick} ({lls[rec['pred']]:.1f})",
                         "acc_norm picks": f"{norm_pick} ({lls[rec['pred_norm']]:.1f})",
                         "outcome": ("acc_norm right" if rec["score_norm"] else
                                     "acc right" if rec["score"] else "both wrong")})
disagree = pd.DataFrame(rows)
print(disagree.to_string(index=False))
pacific = {c: ll for c, (ll, _) in zip(["Pacific", "Pacific Ocean"], ec.completion_logliks(
    hf_model, hf_tok, ["Which ocean is the largest?"] * 2, ["Pacific", "Pacific Ocean"]))}
print(f"BPE GPT-2: ' Ocean' after ' Pacific' costs {pacific['Pacific'] - pacific['Pacific Ocean']:.3g} nats")

# %% [markdown]
# Every time the two disagree, acc_norm picks the **longer** choice, and not by coincidence. Read a
# log-likelihood's size |ℓ| as a cost. If acc picks *i*, then *j* costs more in total. For acc_norm
# to pick *j* anyway, *j* must cost less per character, and with the larger total it can only do that
# with more characters: lenⱼ > lenᵢ · |ℓⱼ| / |ℓᵢ| > lenᵢ.
#
# Raw log-likelihood makes a long choice pay for every token. "Pacific Ocean" costs the BPE model 2.1
# nats against 1.5 for the wrong "Jupiter", though after "Pacific" the word "Ocean" is nearly free
# (0.0316 nats, printed above). Dividing by the length rescues it: in that one item the gold is the
# longer choice. It backfires six times over the two models. A one-character gold like "8" or "7" is
# divided by 1, while a distractor such as "0 degrees Celsius" spreads its cost over 17 characters, so
# acc_norm prefers a longer distractor instead (both models, both items). For the BPE model, "365 days" and "At
# night" lose to longer choices the same way. On this test acc_norm loses more picks than it gains.

# %%
for name, res in mc.items():
    for it, rec in zip(items, res.per_example):
        if rec["pred"] != rec["pred_norm"]:
            assert len(it["choices"][rec["pred_norm"]]) > len(it["choices"][rec["pred"]])
shown_lls = [float(lls[rec[k]]) for name, res in mc.items() for rec, lls in zip(res.per_example, logliks[name])
             if rec["pred"] != rec["pred_norm"] for k in ("pred", "pred_norm")]
# How far each lies from a rounding edge, at one decimal and at 3 significant digits. Other CPUs move
# these log-likelihoods by about 2e-6 nats (measured: native, ATEN_CPU_CAPABILITY=default and avx2,
# MKL_ENABLE_INSTRUCTIONS=AVX2), so a gap under 1e-5 is a digit that flips between machines.
def edge_gap(v, step):
    return abs(abs(v) / step % 1 - 0.5) * step


edge_1f = min(edge_gap(v, 0.1) for v in shown_lls)
near_3g = [v for v in shown_lls if edge_gap(v, 10.0 ** (math.floor(math.log10(abs(v))) - 2)) < 1e-5]
assert edge_1f > 1e-3, f"a log-likelihood sits {edge_1f:.2g} nats from a rounding edge at one decimal"
assert [f"{v:.4g}" for v in near_3g] == ["-2.665"], near_3g  # the one the text names
assert all(re.search(r"\(-\d+\.\d\)$", t) for t in disagree["acc picks"].tolist() + disagree["acc_norm picks"].tolist())
gained = disagree[disagree["outcome"] == "acc_norm right"]
lost = disagree[disagree["outcome"] == "acc right"]
assert sorted(gained["gold"]) == ["Pacific Ocean"], gained["gold"].tolist()
assert sorted(lost["gold"]) == ["365 days", "7", "7", "8", "8", "At night"], lost["gold"].tolist()
print(f"acc_norm gains {len(gained)} items and loses {len(lost)} "
      f"({len(disagree) - len(gained) - len(lost)} disagreements are wrong either way)")

# %% [markdown]
# So neither is "the" accuracy: acc favours short choices and acc_norm long ones. Which one a
# benchmark reports changes its numbers, as does the closing token: report which. (The harness
# reports both acc and acc_norm, and scores no closing token.) acc_norm keeps one good property:
# characters are the same under every tokenizer, so it does not depend on how a model splits the
# choices. Normalising per *token* would (exercise 2).
#
# **How sure are we?**
#
# - 20 items leave wide intervals (acc from about 0.39 to 0.78 for TinyGPT).
# - The 1 gained against 6 lost counts picks over both models (four distinct items are lost): a count
#   on this one test, not a rate.
# - No interval accounts for a change of rule, such as the closing token: an interval measures the
#   luck of the draw, not the choice of definition.
#
# *Sources:* `construct_requests` and both accuracies are in the harness's `lm_eval/api/task.py`. The
# picks are printed to one decimal: at three significant digits one of them, −2.665, sits on a
# rounding edge that other CPUs fall either side of, while at one decimal every value is far from an
# edge.

# %% [markdown]
# ## Summary
#
# **What this lesson established**
#
# - `ec.load_hf` and `ec.wrap_hf` put any transformers causal LM and its tokenizer behind the evals'
#   interface, so every eval runs unchanged.
# - **Perplexity per token is not comparable across tokenizers.** TinyGPT's 7.13 against the BPE
#   model's 64.0 makes the byte model look nine times better, yet the same BPE predictions are a
#   perplexity of 4.89 per byte.
# - **Bits per byte** is comparable, and ranks the other way: TinyGPT 2.80, BPE GPT-2 2.29, on 17 of
#   20 texts and with a bootstrap interval of the gap below zero.
# - **BOS** (`add_bos=True`, the harness's choice) adds one expensive scored token per text: bits per
#   byte rises from 2.29 to 2.41, and the lead holds. Set that number beside a published harness
#   `bits_per_byte`, and report the convention.
# - **Generation:** EM and F1 are level. The judge prefers the BPE model (11 items higher, 2 lower),
#   mostly for whole-sentence answers that match whole-sentence references. 31 % of TinyGPT's words
#   are not in the training text, against 5 %. The BPE model runs on into another question in 7 of 60
#   answers.
# - **Multiple choice** by the harness's rule: acc 0.60 for TinyGPT and 0.65 for the BPE model,
#   acc_norm 0.50 each. Scoring the closing token moves both accs to 0.55 on the same items (10
#   points for the BPE model, 5 for TinyGPT): a change no sampling interval accounts for.
# - Where acc and acc_norm disagree, acc_norm picks the longer choice. Over both models it gains 1
#   pick and loses 6, on four short gold answers.
#
# **What it did not**
#
# - That the BPE model is better on text in general: 20 texts about one small world say nothing of
#   that, and it read about 1.4 times as many bytes in training.
# - That the judge's preference generalises beyond this fixture. It survives Tarone's correction only
#   narrowly (0.0225 against 0.025), and Bonferroni's not at all (about 0.07), on 20 items scored by
#   a mock judge.
# - That either model is better at multiple choice: their accs differ by one item (McNemar p = 1).

# %% [markdown]
# ## Exercises
#
# Each exercise has one code cell. Write your code where the stub says and run the cell: its last
# lines check your answer and say what they expected if it is wrong.

# %% [markdown]
# ### Exercise 1: Uniform models over two vocabularies
#
# A model that knows nothing gives every token the same logit. Derive by hand its bits per byte on
# the 20 texts, under TinyGPT's 259 tokens and under the BPE vocabulary of 512. Then check with
# evalcore (a "model" `lambda ids: torch.zeros(*ids.shape, V)`). Which one looks better, and what
# does that say about where part of a BPE model's bits-per-byte advantage comes from?
#
# *Hint:* log₂ V bits per scored token; you know the scored tokens and the bytes (`res_tiny.extras`,
# `res_bpe.extras`).

# %%
# Exercise 1: store the hand-derived bits per byte in `by_hand` (keys "TinyGPT", "BPE GPT-2") and
#   the name of the uniform model that looks better in `looks_better`.
### BEGIN SOLUTION
n_tok = {"TinyGPT": res_tiny.extras["total_tokens"], "BPE GPT-2": res_bpe.extras["total_tokens"]}
n_bytes = res_tiny.extras["total_bytes"]
by_hand = {"TinyGPT": math.log2(tok.vocab_size) * n_tok["TinyGPT"] / n_bytes,
           "BPE GPT-2": math.log2(hf_tok.vocab_size) * n_tok["BPE GPT-2"] / n_bytes}
uniform = {"TinyGPT": ec.perplexity_eval(lambda ids: torch.zeros(*ids.shape, tok.vocab_size), tok, texts),
           "BPE GPT-2": ec.perplexity_eval(lambda ids: torch.zeros(*ids.shape, hf_tok.vocab_size), hf_tok, texts)}
for name in names:
    trained = ppl_table.loc[name, "bits per byte"]
    print(f"{name:<9}: uniform {by_hand[name]:.4g} bits per byte (evalcore "
          f"{uniform[name].extras['bits_per_byte']:.4g}), trained {trained:.4g}")
looks_better = min(by_hand, key=by_hand.get)
print("the uniform model that looks better:", looks_better)
### END SOLUTION
assert set(by_hand) == set(names), f"expected the keys {names} in `by_hand`; got {sorted(by_hand)}"
assert all(abs(by_hand[n] - ec.perplexity_eval(lambda ids, V=t.vocab_size: torch.zeros(*ids.shape, V), t, texts)
               .extras["bits_per_byte"]) < 1e-6 for n, t in zip(names, (tok, hf_tok))), (
    f"expected the bits per byte of a model giving every token the same logit, per tokenizer; got {by_hand}")
assert looks_better == min(by_hand, key=by_hand.get), f"expected the name of the uniform model with fewer bits per byte; got {looks_better!r}"
print("Exercise 1: check passed.")

# %% [markdown] tags=["solution"]
# A uniform model over 512 BPE tokens pays 9 bits per token. But its 688 scored tokens cover 1,803
# bytes, about 2.6 each, so it costs only 3.43 bits per byte, against 7.93 for a uniform byte model.
# The tokenizer itself has learnt something about the text (which byte sequences are frequent), and
# that knowledge counts in bits per byte. So bits per byte compares whole systems, tokenizer included:
# the right comparison for models, but not a measure of the network alone.

# %% [markdown]
# ### Exercise 2: Normalise by tokens instead of characters
#
# Compute acc_norm with each choice's log-likelihood divided by its number of scored tokens, not its
# characters, for both models. On how many items does this per-token pick differ from acc_norm's
# per-character pick, for each model, and why? Does the accuracy move?
#
# *Hint:* `ec.completion_logliks(model, tok, questions, choices)` returns `(log-likelihood, tokens
# scored)` pairs, under the same rule as `ec.choice_logliks`. `items` and `mc` are from section 7
# (`mc[name].per_example[i]["pred_norm"]` is acc_norm's pick on item *i*).

# %%
# Exercise 2: store the per-token accuracy in `acc_tok`, per item each choice's number of scored
#   tokens in `n_scored`, and the number of items whose per-token pick differs from acc_norm's in
#   `picks_differ` (dicts with keys "TinyGPT", "BPE GPT-2").
### BEGIN SOLUTION
def per_token_picks(m, t):
    flat = [(it["question"], c) for it in items for c in it["choices"]]
    scored = iter(ec.completion_logliks(m, t, [q for q, _ in flat], [c for _, c in flat]))
    picks, lengths = [], []
    for it in items:
        pairs_ = [next(scored) for _ in it["choices"]]
        lengths.append([n for _, n in pairs_])
        picks.append(int(np.argmax([ll / n for ll, n in pairs_])))
    return picks, lengths


acc_tok, n_scored, picks_differ = {}, {}, {}
for name, (m, t) in {"TinyGPT": (model, tok), "BPE GPT-2": (hf_model, hf_tok)}.items():
    picks, n_scored[name] = per_token_picks(m, t)
    acc_tok[name] = float(np.mean([p == it["gold"] for p, it in zip(picks, items)]))
    picks_differ[name] = sum(p != r["pred_norm"] for p, r in zip(picks, mc[name].per_example))
    print(f"{name:<9}: acc_norm (chars) {mc[name].extras['acc_norm']:.4g}  per token {acc_tok[name]:.4g}  "
          f"picks differ on {picks_differ[name]} of {len(items)} items")
print("'Pacific Ocean' as the BPE model scores it:", [hf_tok.decode([i]) for i in hf_tok.encode_answer("Pacific Ocean")[:-1]])
### END SOLUTION
assert set(acc_tok) == set(n_scored) == set(picks_differ) == set(names), f"expected the keys {names}; got {sorted(acc_tok)}, {sorted(n_scored)} and {sorted(picks_differ)}"
scored_check = {n: [[k for _, k in ec.completion_logliks(m, t, [it["question"]] * len(it["choices"]), it["choices"])] for it in items]
                for n, m, t in zip(names, (model, hf_model), (tok, hf_tok))}
assert n_scored == scored_check, "expected, per item, the number of tokens each choice is scored on (completion_logliks's second number)"
per_token = {n: [int(np.argmax(np.array(ll) / np.array(k))) for ll, k in zip(logliks[n], n_scored[n])] for n in names}
assert all(abs(acc_tok[n] - np.mean([p == it["gold"] for p, it in zip(per_token[n], items)])) < 1e-9 for n in names), (
    f"expected the accuracy when each choice's log-likelihood is divided by its scored tokens; got {acc_tok}")
assert all(picks_differ[n] == sum(p != r["pred_norm"] for p, r in zip(per_token[n], mc[n].per_example)) for n in names), (
    f"expected the number of items where the per-token pick is not acc_norm's pick; got {picks_differ}")
print("Exercise 2: check passed.")

# %% [markdown] tags=["solution"]
# For TinyGPT a choice's scored tokens are its bytes, one per character for these ASCII choices: the
# picks are the same on every item. For the BPE model, "Pacific Ocean" is 13 characters in two
# tokens, "365 days" 8 in five (a space, three digits, " days"), and "7" one in two (the space is a
# token of its own before a digit). So the two normalisations pick differently on 5 of the 20 items.
# The accuracy happens to come out the same (one gold gained, one lost): on 20 items, no finding
# either way. Per-token normalisation depends on the tokenizer, which is why lm-evaluation-harness
# normalises by characters.

# %% [markdown]
# ### Exercise 3: BOS on one short text
#
# For "Mars is red." (`texts[7]`), compute the BPE model's perplexity per token and bits per byte,
# without and with BOS, and the first token's share of the total NLL with BOS. Why can the perplexity
# per token fall while bits per byte rises?
#
# *Hint:* `hf_tok_bos` from section 5; an eval's `per_example[0]["token_nll"]` lists the NLL of each
# scored token.

# %%
# Exercise 3: store the perplexity per token in `ppl_short` and bits per byte in `bpb_short` (keys
#   "no BOS", "BOS"), and the first token's share of the NLL with BOS in `first_share`.
### BEGIN SOLUTION
short = texts[7]
one = {label: ec.perplexity_eval(hf_model, t, [short]) for label, t in [("no BOS", hf_tok), ("BOS", hf_tok_bos)]}
ppl_short = {label: r.value for label, r in one.items()}
bpb_short = {label: r.extras["bits_per_byte"] for label, r in one.items()}
for label, r in one.items():
    print(f"{label:<6}: {r.extras['total_tokens']} scored tokens, perplexity {r.value:.4g}, "
          f"bits per byte {r.extras['bits_per_byte']:.4g}")
first_share = one["BOS"].per_example[0]["token_nll"][0] / one["BOS"].extras["total_nll"]
print(f"the first token ('M') is {first_share:.1%} of the total NLL with BOS")
rest_bos = sum(one["BOS"].per_example[0]["token_nll"][1:])
print(f"the other four tokens: {one['no BOS'].extras['total_nll']:.4g} nats without BOS, {rest_bos:.4g} with")
assert rest_bos < one["no BOS"].extras["total_nll"]  # the other tokens got cheaper with the BOS
assert one["BOS"].per_example[0]["token_nll"][0] > one["no BOS"].extras["mean_nll"]  # "M" > the old mean
### END SOLUTION
assert set(ppl_short) == set(bpb_short) == {"no BOS", "BOS"}, f"expected the keys 'no BOS' and 'BOS'; got {sorted(ppl_short)} and {sorted(bpb_short)}"
assert all(abs(math.log(ppl_short[k]) - r["nll"] / r["n_tokens"]) < 1e-4 for k, r in [("no BOS", res_bpe.per_example[7]), ("BOS", res_bos.per_example[7])]), (
    f"expected the BPE model's perplexity per token on texts[7], without and with BOS; got {ppl_short}")
assert all(abs(bpb_short[k] - r["nll"] / math.log(2) / r["n_bytes"]) < 1e-4 for k, r in [("no BOS", res_bpe.per_example[7]), ("BOS", res_bos.per_example[7])]), (
    f"expected the BPE model's bits per byte on texts[7], without and with BOS; got {bpb_short}")
assert abs(first_share - res_bos.per_example[7]["token_nll"][0] / res_bos.per_example[7]["nll"]) < 1e-4, (
    f"expected the first scored token's NLL over the text's total NLL, with BOS; got {first_share!r}")
print("Exercise 3: check passed.")

# %% [markdown] tags=["solution"]
# With BOS, "Mars is red." costs more in total (the "M" alone is almost a quarter of it), and bits per
# byte rises from 2.20 to 2.72. Yet perplexity per token *falls*, from 97 to 91. The "M" costs more
# than the old average token, so alone it would have raised the mean. But the other four tokens got
# cheaper with the BOS in their context, and the larger total is divided by five tokens, not four.
# When the number of tokens changes, per-token perplexity can move against the total cost: one more
# reason to compare bits per byte, even for a single model.

# %% [markdown]
# ### Exercise 4: Perplexity per word
#
# lm-evaluation-harness also reports a word perplexity: exp(total NLL / number of words). Compute it
# for both models on the 20 texts (words: `len(text.split())`). Does it rank them as bits per byte
# does, and must it?
#
# *Hint:* both models divide the same kind of total by the same count.

# %%
# Exercise 4: store the word perplexities in `word_ppl` (keys "TinyGPT", "BPE GPT-2") and whether
#   they rank the models as bits per byte does in `same_order`.
### BEGIN SOLUTION
n_words = sum(len(t.split()) for t in texts)
word_ppl = {name: math.exp(r.extras["total_nll"] / n_words) for name, r in zip(names, (res_tiny, res_bpe))}
print(f"{n_words} words: word perplexity " + ", ".join(f"{k} {v:,.0f}" for k, v in word_ppl.items()))
same_order = min(word_ppl, key=word_ppl.get) == better["bits per byte"]
for name, r in zip(names, (res_tiny, res_bpe)):  # word perplexity = 2 ** (bits per byte * bytes per word)
    print(f"{name:<9}: log2 word perplexity {math.log2(word_ppl[name]):.4g} = "
          f"{r.extras['bits_per_byte']:.4g} bits per byte x {r.extras['total_bytes'] / n_words:.4g} bytes per word")
### END SOLUTION
assert set(word_ppl) == set(names), f"expected the keys {names} in `word_ppl`; got {sorted(word_ppl)}"
assert all(abs(math.log(word_ppl[n]) * sum(len(t.split()) for t in texts) / r.extras["total_nll"] - 1) < 1e-9
           for n, r in zip(names, (res_tiny, res_bpe))), f"expected exp(total NLL / words) for each model; got {word_ppl}"
assert same_order == (min(word_ppl, key=word_ppl.get) == better["bits per byte"]), (
    f"expected True if word perplexity and bits per byte put the same model first, else False; got {same_order!r}")
print("Exercise 4: check passed.")

# %% [markdown] tags=["solution"]
# It must. For both models it divides the total NLL by the same number of words, as bits per byte
# divides by the same number of bytes, so the two always agree on the order. Any tokenizer-free
# denominator gives a comparable number. The words have to be counted the same way for every model,
# and, as for bits per byte, the convention for the first token matters.

# %% [markdown]
# ## Going further
#
# ### 8. Run it on a real hub model at home
#
# Nothing in this lesson's method is specific to the course's folder. With a network connection,
# change the `ec.load_hf` line of the Setup to one of these and run the notebook again:
#
# ```python
# hf_model, hf_tok = ec.load_hf("gpt2")                          # GPT-2 small, 124M parameters
# hf_model, hf_tok = ec.load_hf("HuggingFaceTB/SmolLM2-135M")    # a more recent small model
# hf_model, hf_tok = ec.load_hf("gpt2", device="cuda")           # on a GPU, if you have one
# ```
#
# Expect some cells to fail. The asserts pin this lesson's numbers: the Setup's 32,384 extra
# parameters belong to the course's model, its table still reads the course folder's manifest, and
# later asserts check counts such as 17 of 20 texts. Comment them out, or read each failing one as
# the number to compare against. A few cells also assume a GPT-2 on the CPU: the Setup's table and
# section 9 read GPT-2's config names (`n_layer`, `n_embd`), which SmolLM2's Llama config lacks, and
# section 7's `harness_loglik` builds its inputs on the CPU (with `device="cuda"`, add
# `.to(hf_model.hf.device)`). What else to expect:
#
# - **A download** on first use, cached by transformers afterwards (its size is on the model's hub
#   page; nothing here could download it to measure).
# - **Slower on CPU**: over a hundred times TinyGPT's parameters, so each step costs far more, though
#   generation is batched with a KV cache as here. We could not time it here. `device="cuda"` moves
#   the model to a GPU, and evalcore moves the inputs to the model's device.
# - **A longer context**: `max_len` defaults to the model's own (1,024 tokens for `gpt2`), so the
#   rolling windows of lesson 01 change with the model.
# - **Another prompt format**: GPT-2's tokenizer has no chat template, so prompts are plain, as here.
#   SmolLM2-135M is a **base model**: trained only to continue text, not tuned to chat. Yet its
#   tokenizer ships a chat template, so `ec.HFTokenizer` builds prompts with it, and
#   `tok.prompt_format` and every generation result's `extras["prompt_format"]` say
#   `"chat_template"`. A base model may answer poorly through a chat template. That is part of what
#   you measure, so report the format.
# - **The same rules for comparing**: per-token perplexity of `gpt2` (a vocabulary of 50,257) against
#   TinyGPT's or SmolLM2's is meaningless. Compare bits per byte, on the same texts with the same BOS
#   convention. `add_bos=True` matches the harness's `bits_per_byte`; `ec.choice_logliks`' default
#   already matches its multiple-choice scoring.
#
# No cell of this lesson runs a hub model: CI (the automatic test run on every change) has no
# network, and every cell of a lesson must run there.

# %% [markdown]
# ### 9. Two traps the wrapper removes
#
# The wrapper of section 1 also guards against two common slips.
#
# **A raw transformers model is not an evalcore model.** Called on ids, it returns an output object
# whose `.logits` holds the tensor. Passing it straight to an eval is a common slip. evalcore refuses
# it rather than guessing, and says what to do:

# %% tags=["live"]
# NBVAL_CHECK_OUTPUT
# The slip: pass the raw hf_model.hf to ec.perplexity_eval, catch the ValueError and print it
try:
    ec.perplexity_eval(hf_model.hf, hf_tok, [text])  # the raw GPT2LMHeadModel: a mistake
except ValueError as e:
    print(e)


# %% [markdown]
# **A model you build or have just trained is in train mode.** `from_pretrained` hands back a model
# in eval mode. One built in code, or left by a training loop, has dropout on (0.1 here): each
# forward pass draws a new dropout mask, so the same text gets a different loss each time. A freshly
# built GPT-2 with our config and random weights, before and after `ec.wrap_hf`:

# %%
def next_token_loss(hf, ids):
    # Mean NLL of tokens 1..T-1 given the ones before: the shift of lesson 01, on the raw model.
    return float(F.cross_entropy(hf(input_ids=ids).logits[0, :-1], ids[0, 1:]))


torch.manual_seed(0)
fresh = transformers.GPT2LMHeadModel(hf_model.hf.config)  # random weights: nothing is trained
ids = torch.tensor([hf_tok.encode(texts[0])])
with torch.no_grad():
    built = fresh.training
    noisy = [next_token_loss(fresh, ids) for _ in range(2)]
    fresh_model, _ = ec.wrap_hf(fresh, hf_tok.hf)
    clean = [next_token_loss(fresh, ids) for _ in range(2)]
print(f"built fresh: training={built}, two losses {noisy[0]:.4g} and {noisy[1]:.4g}")
print(f"wrapped    : training={fresh_model.hf.training}, two losses {clean[0]:.4g} and {clean[1]:.4g}")
assert built and not fresh_model.hf.training
assert noisy[0] != noisy[1] and clean[0] == clean[1]

# %% [markdown]
# Even if the inner model is put back in train mode, every evalcore eval runs it in eval mode and then
# restores the mode it found, so the number does not depend on that state:

# %%
fresh.train()  # as a training loop would leave it
ppl_while_training = ec.perplexity_eval(fresh_model, hf_tok, [texts[0]]).value
assert fresh.training  # restored as it was found
assert abs(math.log(ppl_while_training) - clean[0]) < 1e-5  # the eval-mode loss
print(f"perplexity {ppl_while_training:.4g} = exp(eval-mode loss {clean[0]:.4g})")
