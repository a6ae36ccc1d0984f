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
# - how to evaluate a model that runs behind a server (vLLM, llama-cpp-python's
#   `python -m llama_cpp.server`; others, such as SGLang, untested here: run the sanity check) over
#   the OpenAI-compatible HTTP API, with the very evals of lessons
#   01-04: `ec.load_served` returns a model and a tokenizer that `perplexity_eval`, `exact_match_eval`,
#   `token_f1_eval`, `choice_logliks` and `core_evals` take unchanged;
# - what `/v1/completions` returns with `echo` and `logprobs`, and how a perplexity is read from it;
# - that the served numbers equal the in-process ones on the same weights, and equal
#   lm-evaluation-harness's where the two send the same tokens;
# - how a **sanity check** catches a server that scores each token with the wrong distribution (a
#   real fault of llama-cpp-python's server), and why it can name a fault only by testing its cause;
# - why requests in flight matter for throughput, and how the same code reaches vLLM on a GPU machine
#   or a cluster.
#
# **Time needed:** about 50 minutes. **Builds on:** 01 (perplexity and rolling windows), 09 (a judge
# over HTTP), 11 (BOS or not), 13 (SmolLM2-135M-Instruct).
#
# The server is vLLM's CPU build serving SmolLM2-135M-Instruct on 127.0.0.1. Starting it takes 25 s to
# two minutes and 4 GB of memory. That is execution time, not the study time above, and it is longer
# than this whole notebook takes to execute without it (under a minute), so by default the lesson
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
# With `max_tokens=0`, vLLM generates nothing: the response is the prompt, scored. Not every server
# reads 0 that way: llama-cpp-python's server (`python -m llama_cpp.server`) takes `max_tokens <= 0`
# as "no limit" (`llama_cpp/llama.py`, `_create_completion`), so `ec.ServedModel` sends 1 there,
# `prompt_max_tokens=1`, and drops the generated token. llama.cpp's own server, `llama-server`, is
# another program: it refuses `echo` outright ("Only no echo is supported",
# `tools/server/server-common.cpp`, `tools/server/utils.hpp` in older releases,
# `oaicompat_completion_params_parse`), so it returns no prompt
# log-probabilities at all, and neither lm-evaluation-harness nor evalcore can score a text through it
# (its chat completions still serve lesson 09's judge). Here is one response, trimmed to the fields
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
# `parse_logprobs`), which drops a real prompt token on a server that leaves the generated token out
# of the echo (llama-cpp-python's does: always when the prompt has no BOS token first, and an end
# token always). `ec.ServedModel` sends token ids with `max_tokens=0`
# where the server reads that as "prompt only", keeps the first n entries for n prompt tokens, and
# refuses a response that echoes fewer or starts with a number.
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
# writes, each through the server and in this process (token F1 and the judge score answers
# generated the same way, so where the answers are the same strings, as the cell checks for these
# 20, what holds for exact match holds for them):

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
# Every eval agrees: perplexity, from vLLM's float32 log-probabilities against ours, within
# `ec.SERVED_RTOL` (about 7e-6 apart here; that figure moves in its last digits with the CPU's
# kernels, so the table prints the bound it meets, and the bound is about ten times the largest gap
# measured with six kernel choices in this process, three in vLLM's, and 1 and 2 threads); the
# other two exactly. Exact match is 0 both ways, which any two sets of wrong answers would give, so
# the cell also compares the answers themselves: all 20 are the same strings. That is the
# point of the seam: a served model is scored by the same code, so a difference can only come from
# the server. Here is that comparison token by
# token: the log-probability vLLM gave each token against the one this process gives.

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
plt.show()

# %% [markdown]
# On this machine the largest gap is about 1e-4 nats and the median about 1e-5: rounding, in the
# last bits of float32 sums, which another CPU's kernels round differently. Hence the bound above
# rather than the digits.
#
# ## 3. With a BOS token: lm-evaluation-harness's numbers
#
# The peer a served model's numbers meet first is lm-evaluation-harness's `local-completions`, which
# reads the same `/v1/completions` echo. Run against this same vLLM on the same 20 texts (lm-eval
# 0.4.13, measured before this lesson was written; the course does not depend on it), it reported
# **bits per byte 1.22094**, where section 2's perplexity gives 1.04328. Neither is wrong: they score
# different tokens. lm-eval's rolling log-likelihood puts a prefix token before every text, the
# tokenizer's BOS, else its EOS (`lm_eval/models/api_models.py`: `TemplateAPI.loglikelihood_rolling`
# and `prefix_token_id`, which `local-completions`, `LocalCompletionsAPI` in
# `lm_eval/models/openai_completions.py`, inherits), so the first token of every text is predicted
# and scored. evalcore's default adds no BOS (SmolLM2 adds none of its own): the first token is
# context, while bits per byte still counts its bytes (lesson 11). `ec.load_served` takes `add_bos`
# as `ec.load_hf` does. The same served model, scored both ways:

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
# With the BOS first, the served bits per byte is lm-eval's to every digit it printed; so was each of
# the 20 texts' log-likelihoods in that run. The perplexity rises (33.9 against 23.5) because the 20
# first tokens, each predicted from the BOS alone, are the hardest of all; bits per byte rises
# because their cost is now counted over the same bytes. Which to report is a choice: say which, as
# lesson 11 does.
#
# The second difference is in multiple choice. lm-eval's `TemplateLM._encode_pair`
# (`lm_eval/api/model.py`) moves a context's trailing whitespace into the continuation. SmolLM2's
# chat prompt ends in "\n" (after `<|im_start|>assistant`), so on the chat format lm-eval scores "\n"
# plus the choice, given the prompt without its "\n": its log-likelihood is evalcore's plus
# log p("\n" | the prompt before it), the prompt's last echoed entry. On the 20 items of lesson 07 it
# reported acc 0.70 and acc_norm 0.65. Both ways, through the same server:

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
# The two continuations differ by at most 2.3e-4 nats, the same for every choice of an item: they
# cannot change which choice scores highest (acc), and here they do not change acc_norm either. Both
# differences are choices of token sequences, not of arithmetic: where the tokens are the same, the
# numbers are the same.

# %% [markdown]
# ## 4. A server that scores the wrong position, and the check that catches it
#
# Measured before this lesson was written, with SmolLM2's GGUF file behind llama-cpp-python 0.3.36's
# server (`python -m llama_cpp.server`): the "perplexities" came out at 1e5 to 1e6, on texts that
# measurement did not record (the reconstruction below puts the same fault beside this lesson's own
# in-process figures), because the prompt started without a BOS token. SmolLM2's GGUF sets
# `add_bos_token=false`, but that is not why: for a prompt of token ids, as `ec.ServedModel` and
# lm-evaluation-harness's `local-completions` send, llama-cpp-python adds no BOS whatever the file
# says (`bos_tokens = []` for a list prompt), so any model meets this fault unless the client puts
# the BOS first, as `ec.load_served(..., add_bos=True)` does. The cause is in `llama_cpp/llama.py`,
# `_create_completion`: with `echo`, it
# pairs the prompt's tokens, a leading BOS removed, with the rows of the model's scores from the
# first row on, and reports token x_i's entry in its row. Row i is the distribution at position i,
# which predicts token x_(i+1). With a BOS first, the rows line up: x_1 gets row 0, the BOS's, which
# predicts it. Without one, x_i gets its own row: log p(x_i | x_<=i), how likely the model was to say
# x_i *again*. Nothing in the response says so: every field is there and every number is a valid
# log-probability. Only a comparison with the same weights run elsewhere shows it.
#
# `ec.served_sanity_check(served, local_model, tok, texts)` is that comparison: every token's
# log-probability on a few texts, both ways, with a tolerance (`ec.SANITY_TOLERANCE`, about ten times
# the largest gap measured between vLLM and this process, as for the table above) and a verdict. It
# also tests the fault above: it reads the in-process model's rows as llama-cpp-python does, and
# names the fault when that reading explains the server's numbers.

# %% tags=["live"]
# NBVAL_CHECK_OUTPUT
# Sanity check of the served model: ec.served_sanity_check(served, local_model, tok, fx["lm"][:4]); defines: check
check = ec.served_sanity_check(served, local_model, tok, fx["lm"][:4])
print(check["verdict"])
assert check["passed"], check["verdict"]

# %% [markdown]
# We have no llama-cpp-python server here (it builds from source for 5 to 12 minutes), so the next
# cell makes its fault from this process's own logits, as `_create_completion` does: one forward
# pass per text, and token x_i read from row i. This is **a reconstruction, broken on purpose**: the
# fault's mechanism applied to SmolLM2's float32 logits, not llama-cpp-python's own bytes. It is asked
# as llama-cpp-python's server must be, with `prompt_max_tokens=1`. The sanity check must fail on it,
# and name the fault:

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
# On these four texts (5.3 to 137 per text in-process, 23.9 together) the reconstruction gives 2.4e4
# to 1.9e5 per text: in the same orders of magnitude as the measurement's 1e5 to 1e6 on other texts,
# because each token is scored by how likely the model was to say it *again*, and a
# language model mostly answers "hardly at all" (about 11 nats a token here). A misalignment of
# another kind can move the number the other way: an earlier version of this lesson rebuilt this
# fault as the right values moved one slot earlier, the last slot filled by a generated token, and
# those made the same four texts look *better* than in-process (11.86 against 23.92). So the number
# alone cannot warn you, and the token-by-token comparison can name a fault only by testing that
# fault's mechanism: on the real one, the check's old test, for values moved one slot either way,
# finds nothing (mean gaps of 8.7 and 8.8 nats against 8.9 unmoved; `tests/test_14_served_stub.py`
# checks these figures). Exercise 2 puts the three readings side by side.
#
# Run the check once per server and model before trusting any number from it, and again after an
# upgrade. It costs a few requests and a few seconds of the model in-process, which is exactly the
# resource a served setup is meant to spare: run it on a small sibling or a quantized copy of the same
# weights when the full model does not fit, with a tolerance that allows for the quantization.
#
# ## 5. Requests in flight
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
# ## 6. The same code against vLLM on a GPU machine or a cluster
#
# Not executed here (no GPU on this machine). Only the server's command and the base URL change. The
# flags are vLLM's own (`vllm/engine/arg_utils.py`; its docs, "Parallelism and Scaling", called
# "Distributed Inference and Serving" up to about v0.8):
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
#   the course's fixtures equal the in-process values within `ec.SERVED_RTOL`
#   (perplexity 23.5 both ways, about 7e-6 relative apart here), and the 20 answers are the same
#   strings both ways; every one of 413 tokens is within
#   `ec.SANITY_TOLERANCE` nats, the largest gap about 1e-4 (float32 rounding, which moves with the
#   CPU's kernels).
# - A served perplexity comes from `/v1/completions` with `echo` and `logprobs`: the first token has no
#   log-probability, the rest are lesson 01's sum. `max_tokens=0` means "prompt only" on vLLM and
#   "no limit" on llama-cpp-python's server; llama.cpp's own `llama-server` refuses `echo`.
# - With a BOS first (`add_bos=True`), the same served model gives lm-evaluation-harness's bits per
#   byte, 1.22094 (1.04328 without); on the chat format its acc 0.70 and acc_norm 0.65 equal
#   evalcore's. The two differences are token sequences: lm-eval's BOS before every rolling text, and
#   its moving a context's trailing "\n" into the continuation (log p("\n" | prompt), at most
#   2.3e-4 nats).
# - A server can be wrong in a way no field shows: llama-cpp-python's server without a BOS token
#   scores each token with the next position's distribution, log p(x_i | x_<=i), and it adds no BOS
#   to a prompt of token ids, whatever the model file says.
#   `ec.served_sanity_check` compares every token with the same weights in-process and tests that
#   mechanism: on the fault rebuilt from this process's logits it fails and names it, on vLLM it
#   passes.
# - A request the server never answers (retries spent) is unscored, never a number: `exact_match_eval`,
#   `token_f1_eval` and `judge_eval` leave that example out with its reason (`extras["unscored"]`,
#   `scored` of `total`), and `generate` raises.
# - Four requests in flight answered the 20 prompts 2.6 times as fast as one at a time (58.9 s
#   against 153 s, one recorded run on a heavily loaded 2-core machine), with identical answers;
#   `make bench` measures the ratio again against its own baseline.
#
# **What it did not establish**
#
# - Anything about llama-cpp-python's server beyond its one measured fault and the code that causes
#   it: its response here is rebuilt from this process's logits, and no llama-cpp-python server ran
#   in this lesson. Nor anything about `llama-server` beyond its refusal of `echo`, read in its code.
# - lm-evaluation-harness's figures are quoted from one run against this vLLM, not re-run here.
# - That any other server, model or version agrees: the check above is per server and model, so run it
#   again for yours.
# - That the check names the fault through an engine's own noise: the reconstruction is built from
#   the very logits the check compares with, so its "next position" reading fits exactly; a real
#   llama-cpp-python server's quantized kernels would add noise (`tests/test_14_served_stub.py` adds
#   0.05 nats a token and the check still names it, a test, not a measurement).
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
problem = ec.bits_per_byte_problem(bpb, lp, text)
assert problem is None, problem
print("Exercise 1: check passed.")

# %% [markdown]
# ### Exercise 2: Which reading fits?
#
# A check names a fault only by testing its mechanism. Write `best_pairing(served_lps, rows, ids)`:
# `served_lps` a server's log-probabilities of one text (`None` first), `rows` the in-process
# log-softmax of that text's logits, shape (T, V), and `ids` its T tokens. Return the name of the
# reading whose values are closest to `served_lps[i]`, by the mean absolute difference over the
# positions i >= 1 that the reading covers:
#
# - `"right"`: `rows[i - 1, ids[i]]`, log p(x_i | x_<i);
# - `"next position"`: `rows[i, ids[i]]`, log p(x_i | x_<=i), llama-cpp-python's fault;
# - `"one slot early"`: `rows[i, ids[i + 1]]`, the right values moved one slot earlier (i up to T - 2).
#
# Use it on the first text as `served` and as the broken server score it: store the two names in
# `pairing_ok` and `pairing_broken`.
#
# *Hint:* `local_model(torch.tensor([ids[0]]))[0].log_softmax(-1)` gives `rows`. The broken server
# stopped when its cell ended: start another `ec.ReplayServer` on `fault` and load it as that cell
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
# From `seconds` (section 5), store the throughput of each setting in answers per second in
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
problem = ec.speedup_problem(per_second, speedup, measured["answers"], seconds)
assert problem is None, problem
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
