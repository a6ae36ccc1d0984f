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
# - how to evaluate a model that runs behind a server (vLLM, llama.cpp, SGLang) over the
#   OpenAI-compatible HTTP API, with the very evals of lessons 01-04: `ec.load_served` returns a model
#   and a tokenizer that `perplexity_eval`, `exact_match_eval`, `token_f1_eval`, `choice_logliks` and
#   `core_evals` take unchanged;
# - what `/v1/completions` returns with `echo` and `logprobs`, and how a perplexity is read from it;
# - that the served numbers equal the in-process ones on the same weights, and how a **sanity check**
#   catches a server whose numbers are one token off (a real llama.cpp bug);
# - why requests in flight matter for throughput, and how the same code reaches vLLM on a GPU machine
#   or a cluster.
#
# **Time needed:** about 35 minutes. **Builds on:** 01 (perplexity and rolling windows), 09 (a judge
# over HTTP), 13 (SmolLM2-135M-Instruct).
#
# The server is vLLM's CPU build serving SmolLM2-135M-Instruct on 127.0.0.1. Starting it takes 25 s to
# two minutes and 4 GB of memory, more than this lesson's one-minute budget, so by default the lesson
# replays `data/recording_14.json`: vLLM's own responses to exactly these requests, recorded with
# `make record-served` and checked against the model file installed here. Run `make serve` in a
# terminal and `export EVALCORE_SERVED_URL=...` as it says before starting Jupyter, and every request
# below goes to the live server instead.

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
# An OpenAI-compatible completions request with `echo=true` returns the prompt itself as the start of
# the answer, and `logprobs=1` adds, for every token, its log-probability given the tokens before it.
# With `max_tokens=0`, vLLM generates nothing: the response is the prompt, scored. (Not every server
# reads 0 that way: llama.cpp's server takes it as "no limit", so `ec.ServedModel` sends 1 there,
# `prompt_max_tokens=1`, and drops the generated token.) Here is one response, trimmed to the fields
# that matter:

# %%
# NBVAL_CHECK_OUTPUT
text = "The capital of France is Paris."
reply = httpx.post(f"{source.url}/completions", timeout=60, json={
    "model": source.model, "prompt": text, "echo": True, "logprobs": 1, "max_tokens": 0}).json()
lp = reply["choices"][0]["logprobs"]
trimmed = {key: lp[key] for key in ("tokens", "token_logprobs", "text_offset")}
trimmed["token_logprobs"] = [None if x is None else round(x, 3) for x in trimmed["token_logprobs"]]
print(json.dumps(trimmed))

# %% [markdown]
# Three things to see. The first log-probability is `null`: nothing comes before the first token, so
# nothing predicts it (lesson 01: a text of n tokens gives n - 1 predictions when no BOS token is added,
# and SmolLM2 adds none). `text_offset` says where each token starts in the text. lm-evaluation-harness's
# `local-completions` does not use it: it sends `max_tokens=1` and cuts the prompt's entries from the
# generated one by count, `token_logprobs[ctxlen:-1]` (`lm_eval/models/openai_completions.py`,
# `parse_logprobs`), which drops a real prompt token on a server that leaves a generated end token out
# of the echo (llama.cpp's server does). `ec.ServedModel` sends token ids with `max_tokens=0` where the
# server reads that as "prompt only", keeps the first n entries for n prompt tokens, and refuses a
# response that echoes fewer or starts with a number.
# And the perplexity is lesson 01's formula over these numbers:

# %% tags=["live"]
# NBVAL_CHECK_OUTPUT
# Perplexity of the one text from the echoed log-probabilities; defines: by_hand
scored = lp["token_logprobs"][1:]
by_hand = torch.tensor(-sum(scored) / len(scored)).exp().item()
print(f"{len(scored)} tokens scored, perplexity {by_hand:.4g}")
assert len(scored) == len(lp["tokens"]) - 1, f"expected one prediction per token after the first, got {len(scored)}"

# %% [markdown]
# ## 2. The same evals, through the server
#
# `ec.load_served(base_url, model, tokenizer)` gives a `(model, tok)` pair. The tokenizer is the served
# model's own, loaded locally (here SmolLM2's, from the folder vLLM serves); with `tokenizer=None` it is
# read from the server instead (`ec.ServedTokenizer`: vLLM's `/tokenize` and `/detokenize`, one request
# per text, which the tests check against the local copy). The model is an
# `ec.ServedModel`, and it has no logits: calling it with ids is a `ValueError` that says why. The evals
# reach a model through two calls only, `ec.token_losses` (every log-likelihood) and `ec.generate`
# (every answer). Each hands a served model what it needs, token windows to score and prompts to answer,
# and everything after those two calls is the code of lessons 01-04. The local path is unchanged:
# lesson 01's loop over batches of logits.

# %% tags=["live"]
# Load the served model: ec.load_served(source.url, source.model, tok, progress=False); defines: served
served, _ = ec.load_served(source.url, source.model, tok, progress=False)
print(served, "context:", served.config.max_len, "tokens per window")
try:
    served(torch.tensor([[1, 2, 3]]))
except ValueError as exc:
    print("ValueError:", exc)

# %% [markdown]
# Perplexity over the lesson-01 texts, multiple-choice log-likelihoods (ten of lesson 07's items,
# scored by lm-evaluation-harness's rule, lesson 11), and exact match on the 20 answers the model
# writes, each through the server and in this process (token F1 and the judge score answers made the
# same way, so what holds for exact match holds for them):

# %%
# NBVAL_CHECK_OUTPUT
items = ec.multiple_choice_items()[:10]
runs = {
    "perplexity": lambda m: ec.perplexity_eval(m, tok, fx["lm"]),
    "multiple choice (acc)": lambda m: ec.choice_accuracy(items, ec.choice_logliks(m, tok, items)),
    "exact match": lambda m: ec.exact_match_eval(m, tok, fx["em"]),
}
both = {name: (run(served), run(local_model)) for name, run in runs.items()}
rows = []
for name, (s, l) in both.items():
    rows.append({"eval": name, "served": s.value, "in-process": l.value,
                 "relative difference": abs(s.value - l.value) / abs(l.value) if l.value else abs(s.value),
                 "95% CI (served)": f"[{s.extras['ci95'][0]:.4g}, {s.extras['ci95'][1]:.4g}]"})
table = pd.DataFrame(rows).set_index("eval")
print(table.to_string(float_format=lambda v: f"{v:.4g}"))
assert (table["relative difference"] < 1e-4).all(), table["relative difference"]

# %% [markdown]
# Every eval agrees to better than 1 part in 10,000: perplexity, from vLLM's float32 log-probabilities
# against ours, by 7e-6 relative; the other two exactly. The answers are identical
# strings, so exact match is identical. That is the point of the seam: a served model is scored
# by the same code, so a difference can only come from the server. Here is that comparison token by
# token: the log-probability vLLM gave each token against the one this process gives.

# %%
# NBVAL_CHECK_OUTPUT
ids = [tok.encode(t) for t in fx["lm"]]
served_ppl, local_ppl = both["perplexity"]  # every token's loss is in each text's record
remote = [-x for r in served_ppl.per_example for x in r["token_nll"]]
here = [-x for r in local_ppl.per_example for x in r["token_nll"]]
gaps = [abs(a - b) for a, b in zip(remote, here)]
print(f"{len(gaps)} tokens: largest gap {max(gaps):.2g} nats, median {statistics.median(gaps):.2g}")
assert len(remote) == len(here) == sum(len(i) - 1 for i in ids)

# %%
fig, axes = plt.subplots(1, 2, figsize=(10, 4))
axes[0].scatter(here, remote, s=6)
axes[0].plot([min(here), 0], [min(here), 0], color="gray", lw=0.8)
axes[0].set(xlabel="log p(token), in-process", ylabel="log p(token), vLLM", title="Every token, both ways")
axes[1].hist(gaps, bins=30)
axes[1].set(xlabel="|vLLM - in-process| (nats)", ylabel="tokens", title="Their differences: float32 rounding")
plt.show()

# %% [markdown]
# ## 3. A server that is one token off, and the check that catches it
#
# Measured before this lesson was written, with SmolLM2's GGUF file behind llama-cpp-python 0.3.36's
# server: its echoed log-probabilities are shifted by one position when the prompt starts without a BOS
# token (and SmolLM2's never does), so the "perplexities" came out at 1e5 to 1e6 against 6.5 to 15.5
# in-process. Nothing in the response says so: every field is there and every number is a valid
# log-probability. Only a comparison with the same weights run elsewhere shows it.
#
# `ec.served_sanity_check(served, local_model, tok, texts)` is that comparison: every token's
# log-probability on a few texts, both ways, with a tolerance (1e-3 nats; float32 engines agree to about
# 1e-4) and a verdict. It also compares them shifted by one position, so the verdict can name this bug.

# %% tags=["live"]
# NBVAL_CHECK_OUTPUT
# Sanity check of the served model: ec.served_sanity_check(served, local_model, tok, fx["lm"][:4]); defines: check
check = ec.served_sanity_check(served, local_model, tok, fx["lm"][:4])
print(check["verdict"])
assert check["passed"], check["verdict"]

# %% [markdown]
# We have no llama.cpp server here (it builds from source for 5 to 12 minutes), so the next cell makes
# its fault. It serves the recorded vLLM responses with each log-probability moved one position earlier,
# the last slot filled by a generated token, which is the shape of the fault above. This is **a
# reconstruction, broken on purpose**: a recording altered to show the fault, not llama.cpp's own
# bytes. The sanity check must fail on it, and name the shift:

# %%
# NBVAL_CHECK_OUTPUT
shifted = {"model": dict(source.recording["model"]), "responses": {}}
for ids_ in ids[:4]:  # BROKEN ON PURPOSE: the recorded responses, one token early
    key = ec.request_key("/completions", {"model": source.model, "prompt": ids_, "echo": True,
                                          "logprobs": 1, "max_tokens": 0, "temperature": 0})
    body = json.loads(json.dumps(served.prompt_logprobs([ids_])[0]))
    shifted["responses"][key] = {"choices": [{"index": 0, "text": "",
                                              "logprobs": {"token_logprobs": [None, *body[2:], -0.1]}}]}
with ec.ReplayServer(shifted) as broken_server:
    broken, _ = ec.load_served(broken_server.url, source.model, tok, progress=False)
    broken_check = ec.served_sanity_check(broken, local_model, tok, fx["lm"][:4])
    broken_ppl = ec.perplexity_eval(broken, tok, fx["lm"][:4]).value
print(broken_check["verdict"])
print(f"perplexity of those 4 texts: {broken_ppl:.4g} served one token off, "
      f"{ec.perplexity_eval(local_model, tok, fx['lm'][:4]).value:.4g} in-process")
assert not broken_check["passed"] and "one token early" in broken_check["verdict"]

# %% [markdown]
# Note the direction: this reconstruction makes the model look *better* (11.86 against 23.92), while
# llama.cpp's real shift made it look absurdly worse. Which way a misalignment moves the number depends
# on which tokens it pairs up, so the number alone cannot warn you; only the token-by-token comparison
# can.
#
# Run the check once per server and model before trusting any number from it, and again after an
# upgrade. It costs a few requests and a few seconds of the model in-process, which is exactly the
# resource a served setup is meant to spare: run it on a small sibling or a quantized copy of the same
# weights when the full model does not fit, with a tolerance that allows for the quantization.
#
# ## 4. Requests in flight
#
# A server like vLLM batches the requests it has at the same time: one request at a time leaves it
# mostly idle. `ec.ServedModel` keeps `max_in_flight` requests open at once (default 4) and returns the
# results in input order, so the numbers do not depend on it. Throughput does. The timings below come
# from the live run that made the recording (a replay has no server to time), on this 2-core machine,
# with other work on it:

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
# One measurement on a shared machine is a figure, not a claim: `make bench` measures the same ratio
# against its own baseline in the same run (the README has its figures). On a GPU the gain from
# batching is far larger, because one request uses a small share of the device.
#
# ## 5. The same code against vLLM on a GPU machine or a cluster
#
# Not executed here (no GPU on this machine). Only the server's command and the base URL change. The
# flags are vLLM's own (`vllm/engine/arg_utils.py`; its docs, "Distributed inference and serving"):
# `--tensor-parallel-size` splits every layer across the GPUs of one node, `--pipeline-parallel-size`
# splits the layers across nodes.
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
# Through an SSH tunnel (`ssh -L 8000:localhost:8000 gpu-host`) the base URL stays
# `http://127.0.0.1:8000/v1`. A hosted API usually offers chat completions only, without the prompt's
# log-probabilities: generation evals work, perplexity and multiple choice do not.

# %% [markdown]
# ## Summary
#
# **What this lesson established**
#
# - `ec.load_served(base_url, model, tokenizer)` makes a model behind an OpenAI-compatible server an
#   evalcore model. Through vLLM, SmolLM2's perplexity, multiple-choice accuracy and exact match on
#   the course's fixtures equal the in-process values to better than 1e-4 relative (perplexity 23.5
#   both ways, 7e-6 relative); the largest single-token difference over 413 tokens is 1.4e-4 nats
#   (float32 rounding).
# - A served perplexity comes from `/v1/completions` with `echo` and `logprobs`: the first token has no
#   log-probability, the rest are lesson 01's sum. `max_tokens=0` means "prompt only" on vLLM and
#   "no limit" on llama.cpp.
# - A server can be wrong in a way no field shows: log-probabilities one position off (llama.cpp without
#   a BOS token). `ec.served_sanity_check` compares every token with the same weights in-process and
#   names the shift; on the reconstructed fault it fails, on vLLM it passes.
# - A request the server never answers (retries spent) is unscored, never a number: `exact_match_eval`,
#   `token_f1_eval` and `judge_eval` leave that example out with its reason (`extras["unscored"]`,
#   `scored` of `total`), and `generate` raises.
# - Four requests in flight answered the 20 prompts 2.6 times as fast as one at a time (30.7 s against
#   80 s, one recorded run on a loaded 2-core machine), with identical answers; `make bench` measures
#   the ratio again against its own baseline.
#
# **What it did not establish**
#
# - Anything about llama.cpp itself beyond the one measured fault: its response here is a
#   reconstruction, and no llama.cpp server ran in this lesson.
# - That any other server, model or version agrees: the check above is per server and model, so run it
#   again for yours.
# - Any speed figure for a GPU: every number here comes from a 2-core CPU shared with other work.

# %% [markdown]
# ## Exercises
#
# The exercises use the responses already in this notebook, so they run offline: a replayed server
# answers only the requests it recorded (the last cell stops it).

# %% [markdown]
# ### Exercise 1: Bits per byte from the echoed response
#
# From `lp` (section 1), compute the total negative log-likelihood of the scored tokens in **bits**,
# and divide it by the number of UTF-8 bytes of the text those tokens cover (the text after the first
# token: `text[lp["text_offset"][1]:]`). Store it in `bpb`.
#
# *Hint:* lesson 01 defines bits per byte; one nat is 1 / ln 2 bits.

# %%
# Exercise 1: store the bits per byte of the scored part of `text` in `bpb`.
### BEGIN SOLUTION
covered = text[lp["text_offset"][1]:].encode("utf-8")
bpb = -sum(lp["token_logprobs"][1:]) / math.log(2) / len(covered)
print(f"{bpb:.4g} bits per byte over {len(covered)} bytes")
### END SOLUTION
reference_bpb = -sum(lp["token_logprobs"][1:]) / math.log(2) / len(text[lp["text_offset"][1]:].encode())
assert abs(bpb - reference_bpb) < 1e-9, f"expected the bits per byte of the scored bytes; got {bpb!r}"
print("Exercise 1: check passed.")

# %% [markdown]
# ### Exercise 2: Find the shift
#
# Write `best_shift(served_lps, local_lps)` that takes two lists of per-token log-probabilities of the
# same text (without the leading `None`) and returns the shift `k` in `(-1, 0, 1)` whose alignment
# (`served_lps[i]` against `local_lps[i + k]`) has the smallest mean absolute difference. Use it on
# the first text, served by `served` and by `broken`, against `local_model`: store the two shifts in
# `shift_ok` and `shift_broken`.
#
# *Hint:* `ec.token_logprobs_local` gives the in-process side; only compare positions both lists have.

# %%
# Exercise 2: write best_shift and store the shifts of `served` and `broken` in `shift_ok` and
#   `shift_broken`.
### BEGIN SOLUTION
def best_shift(served_lps, local_lps):
    def gap(k):
        pairs = [(served_lps[i], local_lps[i + k]) for i in range(len(served_lps))
                 if 0 <= i + k < len(local_lps)]
        return sum(abs(a - b) for a, b in pairs) / len(pairs)
    return min((-1, 0, 1), key=gap)


mine = ec.token_logprobs_local(local_model, tok, fx["lm"][:1])[0][1:]
with ec.ReplayServer(shifted) as again:
    broken_again, _ = ec.load_served(again.url, source.model, tok, progress=False)
    shift_broken = best_shift(broken_again.prompt_logprobs(ids[:1])[0][1:], mine)
shift_ok = best_shift(served.prompt_logprobs(ids[:1])[0][1:], mine)
print(shift_ok, shift_broken)
### END SOLUTION
assert shift_ok == 0, f"expected vLLM's log-probabilities to line up unshifted; got a shift of {shift_ok}"
assert shift_broken in (-1, 1), f"expected the broken server to need a shift; got {shift_broken}"
assert best_shift([-1.0, -2.0, -3.0], [-5.0, -1.0, -2.0, -3.0]) == 1, "expected best_shift to find the alignment of a hand-made case"
print("Exercise 2: check passed.")

# %% [markdown]
# ### Exercise 3: How much faster?
#
# From `seconds` (section 4), store the throughput of each setting in answers per second in
# `per_second` (a dict with keys `"1"` and `"4"`), and the speed-up of 4 in flight over 1 in `speedup`.
# Is the speed-up close to 4? Why might it not be on a 2-core machine?
#
# *Hint:* throughput is answers / seconds.

# %%
# Exercise 3: store answers per second by in-flight setting in `per_second` and the ratio in `speedup`.
### BEGIN SOLUTION
per_second = {k: measured["answers"] / s for k, s in seconds.items()}
speedup = per_second["4"] / per_second["1"]
print(per_second, f"speed-up {speedup:.3g}x")
### END SOLUTION
assert set(per_second) == {"1", "4"}, f"expected keys '1' and '4'; got {sorted(per_second)}"
assert abs(speedup - seconds["1"] / seconds["4"]) < 1e-9, f"expected the ratio of the two throughputs; got {speedup!r}"
print("Exercise 3: check passed.")

# %% [markdown] tags=["solution"]
# The speed-up is well below 4: four requests share the same two cores, and a batch of four costs more
# than one request (each decoding step does four times the arithmetic). Batching helps on a CPU mostly
# by amortising the per-step overheads (Python, scheduling, reading the weights from memory once per
# step instead of four times). On a GPU, where one request leaves most of the device idle, the gain is
# far larger.

# %% [markdown]
# Finally, stop the source (a live run writes its recording here when `EVALCORE_RECORD=1`):

# %%
ec.close_served_source(source, ec.RECORDING_14_PATH)
