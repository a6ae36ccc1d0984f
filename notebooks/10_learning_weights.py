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
# # 10 · Learning aggregate weights from a preference order
#
# The weights of lesson 05's aggregate, `ec.DEFAULT_WEIGHTS`, are a choice. Here a reviewer's
# ranking of a few models makes that choice instead, by a small fit. Fitted on five of the models,
# the weights reproduce those five's order (no weights can reproduce the reviewer's full ranking of
# six). But with so few models, they place a held-out model no better than the default weights do,
# under the rule that breaks ties between equally near weightings.
#
# **What you will learn**
#
# - how to make several model variants without training: two checkpoints, a temperature-changed
#   model (and what temperature does and does not change), and wrapper-changed models that
#   post-process their answers;
# - how `ec.fit_weights` works: a small linear program that maximises the smallest margin between
#   neighbouring models, regularised toward the default weights; and how to read its margins;
# - how big a margin is against the evals' own noise: a paired bootstrap of the facts the four evals
#   share, with the weights held fixed, and then refitted on every resample;
# - what an *impossible* order looks like, and what it tells you about the reviewer and the metrics;
# - the in-sample trap, and leave-one-model-out as the held-out check: with only a handful of
#   models, the learned weights place held-out models no better than the defaults did;
# - how a tie between equally near weightings can decide such a result.
#
# **Time needed:** about 75 minutes.
#
# **Builds on:** 05 (the aggregate and its weights, resampling facts), 04 (the judge), 06 (the
# in-sample trap) and 07 (temperature). No training: the checkpoints load instantly.

# %%
import math
import re

import matplotlib.pyplot as plt
import pandas as pd
import torch

import evalcore as ec

torch.set_num_threads(1)  # on purpose: see the README's "Threads" section
tok, fx = ec.InstructionTokenizer(), ec.load_fixtures()
shipped = ec.load_pretrained()  # ec.CHECKPOINT_STEPS = 600 training steps
early = ec.load_pretrained(ec.EARLY_CHECKPOINT_PATH)  # ec.EARLY_CHECKPOINT_STEPS = 100: under-trained


# %% [markdown]
# ## 1. Several models, no training
#
# We make six models without training any: two checkpoints, one temperature and three wrappers. The
# temperature and the wrappers each reach only some of the four evals.
#
# Two checkpoints give us two training stages. Two other kinds of change are free to make, because
# an evalcore eval accepts *any* callable `model(ids) -> logits`.
#
# **Temperature** (lesson 07). Dividing the logits by `T` flattens the next-token distribution
# (`T > 1`) or sharpens it (`T < 1`). It changes every probability, so perplexity moves. It keeps
# the *order* of the logits, so greedy decoding (lesson 04), which takes the argmax, produces
# exactly the same answers. Exact match, token F1 and the judge can't see a temperature change at
# all. Sampled text would change (this is the sampling temperature that lesson 07 sets apart), but
# `ec.generate` is greedy.

# %% tags=["live"]
# Temperature: a lambda that divides the model's logits by T; greedy answers must not change; defines: at_temperature
def at_temperature(model, T):
    return lambda ids: model(ids) / T


prompts = [q for q, _ in fx["judge"][:6]]
assert ec.generate(at_temperature(shipped, 1.5), tok, prompts) == ec.generate(shipped, tok, prompts)

# %%
# NBVAL_CHECK_OUTPUT
ppl_at = {}
for T in (0.7, 1.0, 1.5, 2.0):
    ppl_at[T] = ec.perplexity_eval(at_temperature(shipped, T), tok, fx["lm"]).value
    print(f"T = {T}: perplexity {ppl_at[T]:.4g}")
assert ppl_at[1.5] < ppl_at[1.0] < ppl_at[2.0] < ppl_at[0.7]  # some softening helps; too much hurts


# %% [markdown]
# The shipped model is a little over-confident on held-out text: softening it with `T = 1.5` lowers
# its perplexity from 7.134 to 6.452, while every answer it gives stays exactly the same. Softening
# is not free, though. `T = 2` overshoots to 7.758, worse than leaving the model alone, and
# sharpening (`T = 0.7`) is worse still. We keep `T = 1.5` as a variant. (Lesson 07 looks at over-
# and under-confidence in multiple-choice answers directly.)
#
# **A wrapper.** A deployed model is often wrapped: a post-processor tidies, prefixes or truncates
# what it says. The evals call `ec.generate`, so to let them score the *wrapped* system we make the
# wrapper look like a model. On plain text it returns the base model's logits, so perplexity is
# untouched. After the `RESP` token (TinyGPT's token that opens an answer, lesson 07) it spells out
# the post-processed answer one byte at a time. Its logits put the top score on the answer's next
# byte, so greedy decoding reproduces the answer exactly.

# %%
class PostProcessed:
    # A wrapper-changed model: its greedy answer is post(base model's answer); plain text is untouched
    def __init__(self, base, post):
        self.base, self.post, self.answers = base, post, {}

    def __call__(self, ids):
        if not (ids == tok.resp_id).any():  # plain text (perplexity): the base model's logits
            return self.base(ids)
        row = ids[0].tolist()
        start = row.index(tok.resp_id) + 1
        q = tok.decode(row[1:start - 1])
        if q not in self.answers:  # the base model answers once; the wrapper post-processes it
            self.answers[q] = tok.encode(self.post(ec.generate(self.base, tok, [q])[0])) + [tok.pad_id]
        spelled = self.answers[q]
        logits = torch.zeros(*ids.shape, tok.vocab_size)
        logits[0, -1, spelled[min(len(row) - start, len(spelled) - 1)]] = 1.0  # argmax: the next byte
        return logits


# %% [markdown]
# Three post-processors, each something a real deployment might do. Below, their answers to three
# judge questions (the columns are the questions' numbers in the judge fixture), with the early
# checkpoint's for comparison:

# %%
models = {
    "shipped": shipped,
    "early": early,
    "shipped T=1.5": at_temperature(shipped, 1.5),
    "shipped+tidy": PostProcessed(shipped, lambda a: re.sub(r"\b(\w+)( \1\b)+", r"\1", a)),  # "a a a star" -> "a star"
    "shipped+prefix": PostProcessed(shipped, lambda a: "Answer: " + a),  # a template's label
    "shipped+cut": PostProcessed(shipped, lambda a: " ".join(a.split()[:3])),  # first 3 words only
}

# %%
# NBVAL_CHECK_OUTPUT
shown = [4, 10, 17]  # three judge questions on which the wrappers show what they do
show = [fx["judge"][i][0] for i in shown]
pd.DataFrame({name: ec.generate(models[name], tok, show, max_new_tokens=64) for name in
              ["shipped", "shipped+tidy", "shipped+prefix", "shipped+cut", "early"]}, index=shown).T


# %% [markdown]
# Now every model gets the four evals on the same fixtures (about ten seconds of one core's time). The
# table holds each eval normalised to [0, 1] (lesson 05), and the default aggregate:

# %%
def room(model):
    return 64 if isinstance(model, PostProcessed) else 48  # for what a wrapper adds, e.g. "Answer: "


results = {name: ec.core_evals(m, tok, fx, max_new_tokens=room(m)) for name, m in models.items()}
assert results["shipped+tidy"][0].value == results["shipped"][0].value  # wrappers keep perplexity
assert results["shipped T=1.5"][1].value == results["shipped"][1].value  # temperature keeps answers

# %%
# NBVAL_CHECK_OUTPUT
table = pd.DataFrame({name: ec.aggregate(rs).normalised() for name, rs in results.items()}).T
table["default aggregate"] = pd.Series(ec.aggregate_models(results))
table.round(4).sort_values("default aggregate", ascending=False)

# %% [markdown]
# ## 2. A reviewer's order
#
# A reviewer reads the answers of all six and ranks them. The default weights disagree with that
# ranking in three places. The ranking, best first:
#
# 1. **shipped+tidy**: the same answers, with the stutters removed ("The Sun is the Sun a ar."
#    rather than "The Sun is the Sun a a a a a ar.");
# 2. **shipped T=1.5**: the same answers as *shipped*. Told that it puts more probability on
#    held-out text, the reviewer breaks the tie in its favour;
# 3. **shipped**;
# 4. **shipped+prefix**: "Answer: " clutters the reply but hides nothing;
# 5. **shipped+cut**: "A spider has" has lost the answer;
# 6. **early**: mostly gibberish.
#
# The defaults put *tidy* below both *T=1.5* and *shipped*. They put *cut* above *prefix*, because
# exact match, with its weight of 0.3, gives the prefixed answers no credit at all: "Answer: " in
# front breaks every exact match.

# %%
reviewer = ["shipped+tidy", "shipped T=1.5", "shipped", "shipped+prefix", "shipped+cut", "early"]
default = ec.aggregate_models(results)
disagree = [(a, b) for i, a in enumerate(reviewer) for b in reviewer[i + 1:] if default[a] <= default[b]]
print(disagree)
assert disagree == [("shipped+tidy", "shipped T=1.5"), ("shipped+tidy", "shipped"),
                    ("shipped+prefix", "shipped+cut")], disagree

# %% [markdown]
# ## 3. Fitting the weights
#
# No weights realise the reviewer's full order, because of *tidy*: one removed stutter costs it
# token F1. Without *tidy*, weights that realise the order exist: they cut exact match from 0.3 to
# about 0.04.
#
# `ec.fit_weights(results, reviewer)` looks for weights under which the aggregates fall in the
# reviewer's order. Such weights **realise** the order. The weights must be non-negative and sum to
# 1. That set of weightings is the **simplex**. The **margin** between two neighbours in the order
# is the gap between their aggregates. The fit solves two small **linear programs** (problems that
# maximise or minimise a linear function under linear constraints: equalities and inequalities):
#
# 1. maximise the **smallest margin**: the smallest aggregate gap between neighbours in the order.
#    It becomes linear with the margin as a fifth unknown `m`, and every gap between neighbours
#    required to be at least `m`. The largest `m` reached is called `m*`;
# 2. among weights that keep at least `margin_share · m*` (default half), take those **nearest
#    `DEFAULT_WEIGHTS`** in L1 distance (the sum of the absolute differences). This is the
#    regulariser: move away from the defaults only as far as the order requires.
#
# A linear program reaches its best value at a **vertex**, a corner of the region its constraints
# allow. With four weights there are few enough candidate vertices that evalcore simply tries them
# all. That is exact, and it can *prove* that an order is impossible (`m* ≤ 0`). A pairwise logistic
# loss, a common way to learn from rankings, can't do that. It maps each pair's gap $d$ to a
# probability by the S-shaped **logistic** function $1/(1+e^{-d})$, and pushes those probabilities
# up.
#
# The nearest weights need not be unique. Exact match and token F1 share the default 0.3. Take 0.1
# off either one and put it on perplexity: the L1 distance to the defaults is 0.2 both ways. So a
# whole face of weightings (a flat side of the region) can tie. `fit_weights` lists the tied
# vertices in `.tied` and takes a stated one:
#
# - the tied vertex nearest `DEFAULT_WEIGHTS` in L2 (squared distance);
# - then the one that separates the first model from the last most.
#
# We will meet such ties in the bootstrap and in section 5.
#
# Here is the reviewer's order:

# %%
first = ec.fit_weights(results, reviewer)
print(first.message)
assert not first.realisable and first.best_margin <= 0, first.message

# %% [markdown]
# No weights realise it. The message names the pairs that fail under the *least-bad* weights. Those
# weights trade the other pairs off against *tidy*, so pairs that are fine on their own fail too.
# The cause is *tidy*: without it the rest of the order can be realised, as we will see. Compare
# *tidy* with *shipped*, eval by eval:

# %%
# NBVAL_CHECK_OUTPUT
twins = table.loc[["shipped+tidy", "shipped", "shipped T=1.5"], ["perplexity", "exact_match", "token_f1", "judge"]]
gap = twins.loc["shipped+tidy"] - twins.loc["shipped"]
print(twins.round(4).to_string())
print("tidy - shipped:", {n: round(v, 4) for n, v in gap.items()})

# %%
assert gap["perplexity"] == gap["exact_match"] == gap["judge"] == 0 and gap["token_f1"] < 0, gap.to_dict()

# %% [markdown]
# *tidy* ties *shipped* on three evals and is behind on token F1. So under **any** non-negative
# weights its aggregate is at most *shipped*'s, and below it as soon as token F1 has any weight at
# all. No weighting can put it first. Where does the F1 gap come from? Removing a stutter changed
# two answers of the F1 fixture:

# %%
# NBVAL_CHECK_OUTPUT
tidy_f1, shipped_f1 = results["shipped+tidy"][2].per_example, results["shipped"][2].per_example
changed = [(s["prediction"], t["prediction"], s["score"], t["score"], s["reference"])
           for s, t in zip(shipped_f1, tidy_f1) if s["score"] != t["score"]]
for before, after, f_before, f_after, ref in changed:
    print(f"{before!r}\n  -> {after!r}: F1 {f_before:.4g} -> {f_after:.4g}   (reference {ref!r})")

# %%
assert len(changed) == 2 and changed[1][2] > changed[1][3] and changed[0][2] < changed[0][3], changed
n_a = ec.normalise_f1(changed[1][4]).split().count("a")
assert n_a == 2, f"expected two \"a\"s in the frog reference, got {n_a}"

# %% [markdown]
# One answer gains a little and one loses more. The Sun answer drops a "tar" that is not in its
# reference, so its precision rises. The frog answer's stutter, "a a a a", was matching the two
# "a"s of its reference ("A frog ... a tadpole"). After tidying, only one is left. The F1 gap
# between *tidy* and *shipped* is the net of these two changes, and the frog's lost "a" is the
# larger. (Lesson 03 showed how much of token F1 comes from such words.)
#
# An impossible order is information, not a failure of the fit. Either the reviewer values something
# none of the four metrics measures (here, fluent text without stutters), or the order is wrong. The
# reviewer is surely right that *tidy* reads better, so the honest fix is a metric that sees
# stutters. A negative weight on token F1 is not a fix: it would reward wrong answers.
#
# Until such a metric exists, these four evals cannot place *tidy* at all. So we set it aside and
# fit the reviewer's order of the other five models. There the defaults disagree once: *cut* above
# *prefix*.

# %% tags=["live"]
# Fit the weights: drop tidy, ec.fit_weights(five, order), check it realises the order; defines: five, order, fit
five = {name: rs for name, rs in results.items() if name != "shipped+tidy"}
order = [name for name in reviewer if name != "shipped+tidy"]
assert [(a, b) for a, b in disagree if "shipped+tidy" not in (a, b)] == [("shipped+prefix", "shipped+cut")]
fit = ec.fit_weights(five, order)
print(fit.message)
assert fit.realisable and abs(sum(fit.weights.values()) - 1) < 1e-12
assert all(fit.scores[a] > fit.scores[b] for a, b in zip(order, order[1:]))

# %%
# NBVAL_CHECK_OUTPUT
defaults = {n: ec.DEFAULT_WEIGHTS[n] for n in fit.weights}
pd.DataFrame({"default": defaults, "learned": fit.weights}).round(4)

# %% [markdown]
# The learned weights cut exact match from 0.3 to about 0.04: with 0.3 on exact match, *cut* beats
# *prefix*, and the reviewer says it shouldn't. Perplexity rises from 0.2 to about 0.39, though the
# reviewer never asked for perplexity as such. *T=1.5* and *shipped* differ in perplexity alone (by
# 0.0118 in normalised units). Their margin must be at least half the best possible: 0.004632, half
# of the 0.009264 in the fit's message. That takes a perplexity weight of 0.004632 / 0.0118 ≈ 0.39.
# The judge keeps its default 0.2, and token F1 takes the rest. The margins say how close
# each call is:

# %%
# NBVAL_CHECK_OUTPUT
margins = pd.DataFrame(fit.margins, columns=["better", "worse", "margin"])
margins["margin"] = margins["margin"].map(lambda m: f"{m:.4g}")
d_ppl = table.loc["shipped T=1.5", "perplexity"] - table.loc["shipped", "perplexity"]
assert abs(fit.weights["perplexity"] * d_ppl - fit.min_margin) < 1e-9  # the T=1.5 margin sets the perplexity weight
assert abs(fit.weights["judge"] - ec.DEFAULT_WEIGHTS["judge"]) < 1e-9 and fit.weights["exact_match"] < 0.05, fit.weights
margins

# %%
fig, axes = plt.subplots(1, 2, figsize=(10, 4), sharex=True)
for ax, (title, scores) in zip(axes, [("default weights", default), ("learned weights", fit.scores)]):
    ys = [scores[m] for m in order]
    ax.plot(range(len(order)), ys, "o-", color="tab:blue" if title.startswith("default") else "tab:green")
    ax.set(title=f"Aggregate under {title}", xlabel="reviewer's rank (best first)", ylabel="aggregate (0-1)")
    ax.set_xticks(range(len(order)), [f"{i + 1}. {m}" for i, m in enumerate(order)], rotation=35, ha="right")
fig.suptitle("Left: the defaults put cut above prefix. Right: learned weights fall monotonically")
fig.tight_layout()
plt.show()

# %% [markdown]
# Look at the scale of those margins: the smallest is under 0.005. One judge score moving by one
# point on one of the 20 examples shifts a model's aggregate by `w_judge × (1/5) / 20` (the judge's
# score is divided by 5 to normalise it, lesson 05). A few such
# points are enough to reverse the closest pair:

# %%
# NBVAL_CHECK_OUTPUT
one_point = fit.weights["judge"] * (1 / 5) / 20
to_reverse = math.ceil(fit.min_margin / one_point)
print(f"smallest margin {fit.min_margin:.4g}; one judge point on one example moves the aggregate {one_point:.4g}")
print(f"judge points that reverse the closest pair (prefix over cut): {to_reverse}")
assert to_reverse == 3, f"expected 3 judge points to reverse the closest pair, got {to_reverse}"

# %% [markdown]
# ### The margins against the evals' own noise
#
# Against the evals' noise, three of the four margins hold on every resample, but *prefix* over
# *cut* holds on only 63%. The exact-match cut survives refitting, but no learned weight is good to
# more than one significant figure.
#
# Three judge points is a small change, but how likely is a change that size? Each eval's 20
# examples are a sample of the questions we could have asked, and the four fixtures ask about the
# same facts (lesson 05). The bootstrap behind the aggregate's interval redraws **facts**.
# `ec.joint_resampled_values(results, R, seed)` does it in three steps, all four evals on one draw:
#
# - it draws the 25 fact ids with replacement (24 facts and one text about many, lesson 05);
# - it counts every example of a drawn fact in every eval that asks about it;
# - it recomputes each eval's value.
#
# The same seed and the same fact ids give every model the same draw. So the comparison between two
# models stays paired (a paired bootstrap, lesson 01).
#
# First, hold the learned weights fixed and recompute every margin on each of 300 resamples:

# %%
# NBVAL_CHECK_OUTPUT
R = 300
evals = [r.name for r in five["shipped"]]
draws = {m: ec.joint_resampled_values(rs, R) for m, rs in five.items()}  # model -> eval -> (R,) values
facts = {m: [[x["fact"] for x in r.per_example] for r in rs] for m, rs in five.items()}
assert all(f == facts["shipped"] for f in facts.values())  # one draw of facts serves every model
normed = {m: torch.stack([torch.tensor([ec.normalise_metric(e, float(v)) for v in d[e]],
                                       dtype=torch.float64) for e in evals], 1)
          for m, d in draws.items()}  # model -> (R, 4) normalised values
w = torch.tensor([fit.weights[e] for e in evals], dtype=torch.float64)
rows, holds_all = [], torch.ones(R, dtype=torch.bool)
for better, worse, margin in fit.margins:
    diff = (normed[better] - normed[worse]) @ w  # (R,) this pair's margin on each resample
    low, high = torch.quantile(diff, torch.tensor([0.025, 0.975], dtype=torch.float64)).tolist()
    rows.append({"better": better, "worse": worse, "margin": margin, "95% low": low,
                 "95% high": high, "holds": (diff > 0).double().mean().item()})
    holds_all &= diff > 0
noise = pd.DataFrame(rows)
print(noise.to_string(float_format=lambda v: f"{v:.4g}"))
print(f"the whole order holds on {holds_all.double().mean().item():.4g} of the {R} resamples")

# %%
assert (noise.loc[[0, 1, 3], "holds"] == 1.0).all(), noise["holds"].tolist()  # never reversed
close = noise.loc[2]  # shipped+prefix over shipped+cut: the pair the reviewer corrected
assert close["95% low"] < 0 < close["95% high"] and 0.4 < close["holds"] < 0.8, close.to_dict()
assert abs(noise.loc[0, "margin"] - close["margin"]) < 1e-9  # the same size as the T=1.5 margin
assert holds_all.double().mean().item() == close["holds"]  # the close pair is the only one that fails


# %% [markdown]
# The two smallest margins are the same size, 0.004632, and they behave completely differently.
#
# - *T=1.5* over *shipped* holds on every resample. The two models give the same answers, and
#   perplexity on the same redrawn texts moves both together, so their difference barely varies.
# - *prefix* over *cut* holds on only 63% of resamples, and its 95% interval runs from about -0.016
#   to 0.027, across zero. Those two models answer differently, and which of them a given example
#   favours changes from example to example.
#
# The size of a margin says nothing on its own: what matters is its size against the noise of that
# particular difference.
#
# That is the margins with the weights held fixed, but the weights were themselves fitted on these
# examples. Refit them on every resample:

# %%
# NBVAL_CHECK_OUTPUT
def fit_on_resample(i):
    # resample i's values as EvalResults without examples: fit_weights reads only their values
    return ec.fit_weights({m: [ec.EvalResult(e, draws[m][e][i].item(), []) for e in evals]
                           for m in five}, order)


refits = [fit_on_resample(i) for i in range(R)]
refit_w = pd.DataFrame([f.weights for f in refits])
print(f"order realisable on {sum(f.realisable for f in refits)} of {R} resamples")
print(refit_w.quantile([0.025, 0.5, 0.975]).round(2).to_string())
n_tied = sum(len(f.tied) > 1 for f in refits)
judge_default = (refit_w["judge"] - ec.DEFAULT_WEIGHTS["judge"]).abs() < 1e-9
judge_if_kept = pd.Series([max(w["judge"] for w in f.tied) for f in refits])  # ties kept at 0.2 where they can be
tied_rows = pd.Series([len(f.tied) > 1 for f in refits])
print(f"the tie rule chose on {n_tied} of {R} resamples; the judge keeps its default 0.2 on {judge_default.sum()}")
print(f"the judge moves below 0.2 on {(~judge_default).sum()} resamples, {(~judge_default & tied_rows).sum()} of them tied")

# %%
full = ec.fit_weights({m: [ec.EvalResult(r.name, r.value, []) for r in rs] for m, rs in five.items()}, order)
assert full.weights == fit.weights  # value-only results give the same fit as the full ones
assert all(f.realisable for f in refits)  # some weighting realises the order on every resample
em_q = refit_w["exact_match"].quantile([0.025, 0.975]).tolist()
assert em_q[1] < ec.DEFAULT_WEIGHTS["exact_match"], em_q  # the exact-match cut is stable
assert refit_w["token_f1"].quantile(0.975) - refit_w["token_f1"].quantile(0.025) > 0.2  # F1's share is not
assert n_tied == 22 and judge_default.sum() == 257, (n_tied, judge_default.sum())
tails = refit_w.index[refit_w["exact_match"].rank(ascending=False, method="first") <= 12]
tied_tails = sum(len(refits[i].tied) > 1 for i in tails)
assert tied_tails == 9, f"expected 9 of the 12 largest exact-match weights from tied resamples, got {tied_tails}"
assert round(refit_w["judge"].quantile(0.025), 1) == 0.1 and round(judge_if_kept.quantile(0.025), 1) == 0.2
assert (~judge_default).sum() == 43 and (~judge_default & ~tied_rows).sum() == 21  # untied moves too
judge_low = (refit_w["judge"].quantile(0.025), judge_if_kept.quantile(0.025))
print(f"judge's 2.5th percentile: {judge_low[0]:.2f} under the tie rule, "
      f"{judge_low[1]:.2f} if tied resamples keep it at 0.2 where they can")
assert 0.13 < judge_low[0] < 0.15 and 0.16 < judge_low[1] < 0.18, judge_low
assert round(em_q[1], 1) == 0.1, em_q  # "about 0.1"

# %% [markdown]
# The order is realisable on every resample. That sounds reassuring and is not. With four weights
# and only four ordered pairs, an order fails only when the evals' gaps contradict it outright, as
# *tidy*'s did, and a resample of these same models rarely produces such a contradiction. So
# "realisable" (some weighting exists, however few) is a low bar. What the refits do show is which
# parts of the weights are stable:
#
# - Exact match stays far below its default 0.3 on nearly every resample (its 97.5th percentile is
#   about 0.1). That cut is what the reviewer's *prefix* over *cut* asks for, and the noise does not
#   undo it.
# - Token F1 moves a lot: the middle 95% of its refits runs from about 0.3 to 0.5. Perplexity's runs
#   from about 0.3 to 0.4.
#
# The table's tails, its 2.5% and 97.5% rows, are partly the tie rule's. Where several weightings are
# equally near the defaults, the tie rule's pick (section 3) sets the value, so part of each tail
# comes from the rule rather than the data. That happens on 22 of the 300 resamples.
#
# - **Exact match:** those 22 supply 9 of its 12 largest weights (the top 4% of the refits, which
#   hold the 97.5% row).
# - **The judge** keeps its default 0.2 on 257 resamples (86%) and falls below it on the other 43, 22
#   of them tied. Its 2.5th percentile is 0.14 under the tie rule, and 0.17 if the tied resamples
#   keep the judge at 0.2 wherever an equally near weighting does. The tie rule deepens the judge's
#   lower tail, but 21 untied resamples move it too.
#
# **How sure are we?**
#
# - Quote the learned weights to one significant figure at most, and the judge's lower tail not at
#   all.
# - **What a margin of 0.0046 can support:** that on *these* 20 examples per eval, under *these*
#   weights, the aggregates fall in the reviewer's order. Also that *T=1.5* over *shipped* is a
#   consistent difference on texts like these. (T = 1.5 was picked among four temperatures on these
#   same texts, so the size of its lead is in-sample.)
# - **What it cannot support:** that *prefix* beats *cut* on new questions of the same kind: its
#   margin is positive on only 63% of resamples, and its 95% interval, about −0.016 to 0.027, runs
#   across zero. Nor any claim that depends on a weight's second significant figure.
# - There is a further trap that no bootstrap of examples removes. The margins were measured on the
#   same models the weights were chosen to order. The fit *made* them positive, so a positive
#   in-sample margin is guaranteed, not found. Whether the weights carry over needs a model the fit
#   never saw, which is what section 5 does.

# %% [markdown]
# ### How hard to pull toward the defaults
#
# `margin_share` trades margin for closeness to the defaults. At 1 we get the max-min-margin weights
# themselves. Lower values keep less of the margin and stay nearer `DEFAULT_WEIGHTS`. At 0.1 the fit
# keeps perplexity and the judge at their defaults, and only moves weight from exact match to token
# F1:

# %%
# NBVAL_CHECK_OUTPUT
rows = {}
for share in (1.0, 0.5, 0.1):
    f = ec.fit_weights(five, order, margin_share=share)
    rows[share] = {**f.weights, "L1 to defaults": sum(abs(f.weights[n] - defaults[n]) for n in defaults),
                   "smallest margin": f.min_margin}
shares = pd.DataFrame(rows).T
assert shares["L1 to defaults"].is_monotonic_decreasing and shares["smallest margin"].is_monotonic_decreasing
shares.round(4)

# %% [markdown]
# ## 4. A second impossible order
#
# An order that puts *shipped* above *shipped T=1.5* is impossible too, for the same reason as
# *tidy*.
#
# A second reviewer distrusts temperature tricks and wants *shipped* **above** *shipped T=1.5*. The
# two give identical answers, so only perplexity can tell them apart, and *T=1.5* has the better
# perplexity. It is *tidy*'s situation again: the model the reviewer wants higher is worse on one
# eval and tied on the rest. So no non-negative weighting can put *shipped* first, and `fit_weights`
# says so rather than returning weights that quietly fail. (As in section 3, the least-bad weights
# let another pair fail too.)

# %%
# NBVAL_CHECK_OUTPUT
sceptic = ["shipped", "shipped T=1.5", "shipped+prefix", "shipped+cut", "early"]
impossible = ec.fit_weights(five, sceptic)
print(impossible.message)
assert not impossible.realisable and impossible.best_margin <= 0

# %% [markdown]
# Here too the reviewer values something none of the four metrics measures (a dislike of post-hoc
# temperature changes), or the order is wrong. A negative weight on perplexity would "fix" it by
# rewarding the worse perplexity.
#
# ## 5. Leave one model out: the held-out check
#
# Held out one at a time, 3 of the 5 models land in their place under the tie rule (4 under the most
# favourable tied weighting): the three that the default weights already place. The learned weights
# describe their order; they are not shown to predict a new model's place.
#
# Five models give four ordered pairs to fit four weights (three free ones, since they sum to 1). Is
# that enough? The bootstrap in section
# 3 kept the models and redrew the examples. Here we keep the examples and hold out a model instead.
# This is **leave-one-out**: `ec.leave_one_model_out` fits the weights on four models, then asks
# whether the fifth lands where the reviewer put it:

# %% tags=["live"]
# NBVAL_CHECK_OUTPUT
# Leave one model out: ec.leave_one_model_out(five, order) into a DataFrame; defines: lomo
lomo = pd.DataFrame(ec.leave_one_model_out(five, order))
lomo[["held_out", "preferred_rank", "rank", "placed"]]

# %%
fig, ax = plt.subplots(figsize=(8, 4))
x = list(range(len(lomo)))
ax.vlines(x, lomo["preferred_rank"], lomo["rank"], color="tab:red", linewidth=2)
ax.scatter(x, lomo["preferred_rank"], s=140, facecolors="none", edgecolors="tab:blue", label="the reviewer's rank")
ax.scatter(x, lomo["rank"], s=40, color="tab:red", zorder=3, label="rank under weights fitted without it")
ax.set_xticks(x, lomo["held_out"], rotation=20)
ax.set(ylabel="rank (1 = best)", ylim=(len(lomo) + 0.5, 0.5), xlabel="held-out model",
       title="Leave one model out: is the held-out model placed correctly?")
ax.legend(loc="lower left")
plt.show()


# %%
def placed_under(scores, model):  # the same test leave_one_model_out applies
    i = order.index(model)
    return (all(scores[a] > scores[model] for a in order[:i])
            and all(scores[model] > scores[b] for b in order[i + 1:]))


placed = int(lomo["placed"].sum())
by_defaults = [m for m in order if placed_under(default, m)]
print(f"{placed} of {len(lomo)} held-out models placed correctly; the defaults alone place {by_defaults}")
assert placed == 3, f"expected 3 held-out models placed correctly, got {placed}"
assert lomo.loc[lomo["placed"], "held_out"].tolist() == by_defaults  # the same three
misplaced = lomo.loc[~lomo["placed"]]
assert misplaced["held_out"].tolist() == ["shipped+prefix", "shipped+cut"]  # the pair the reviewer corrected
assert all(w["exact_match"] > 0.2 for w in misplaced["weights"])  # the tie rule's picks: exact match near 0.3

# %% [markdown]
# Look at which three land in their place: *T=1.5*, *shipped* and *early*, exactly the ones the
# **default** weights already place correctly. The one correction the reviewer made to the defaults,
# *prefix* over *cut*, is exactly what leave-one-out loses, under the tie rule of section 3 (more on
# that in a moment).
#
# Hold out either model of that pair and its constraint goes with it: the remaining order no longer
# needs a small exact-match weight, though it does not forbid one. Both refits are ties (section 3).
# So look at every weighting equally near the defaults, and at where each puts the held-out model:

# %%
# NBVAL_CHECK_OUTPUT
def rank_under(weights, model):  # 1 = best, among the five
    scores = ec.aggregate_models(five, weights)
    return 1 + sum(scores[m] > scores[model] for m in five if m != model)


tie_ranks = {}
for held in misplaced["held_out"]:
    rest = [m for m in order if m != held]
    refit = ec.fit_weights({m: five[m] for m in rest}, rest)
    tie_ranks[held] = [(round(w["exact_match"], 2), rank_under(w, held)) for w in refit.tied]
    print(f"without {held} (reviewer's rank {order.index(held) + 1}): {len(refit.tied)} tied weightings, "
          f"(exact match, its rank): {tie_ranks[held]}; the tie rule's pick ranks it {rank_under(refit.weights, held)}")

# %%
assert sorted(r for _, r in tie_ranks["shipped+cut"]) == [2, 3, 3, 4], tie_ranks  # 4th would be placed
assert all(r == 4 for _, r in tie_ranks["shipped+prefix"]), tie_ranks  # misplaced whichever is taken
assert all(min(em for em, _ in t) < 0.1 for t in tie_ranks.values())  # a small exact-match weight ties too
best_case = placed + any(r == order.index("shipped+cut") + 1 for _, r in tie_ranks["shipped+cut"])
assert best_case == 4, f"expected 4 placed under the most favourable tied weighting, got {best_case}"

# %% [markdown]
# Without *prefix*, every equally near weighting misplaces it. Without *cut*, they rank it 2nd, 3rd
# or 4th. One of them, with exact match at 0.02, would put *cut* in its place. The tie rule picks
# one that keeps exact match at its default 0.3 and ranks *cut* 3rd.
#
# So leave-one-out places 3 of 5 under this rule, and 3 or 4 depending on the tied weighting. The L1
# regulariser alone does not decide it. Even the most favourable tied weighting places only one
# model more than the defaults do.
#
# With this few models the learned weights *describe* the order they were fitted on. They are not
# shown to *predict* where the next model belongs. On the one held-out check that five models allow,
# they place no more models than the defaults do under the tie rule, and one more at best under
# another equally near weighting. That is the in-sample trap from section 3 made visible.
# The one pair whose order the fit had to force is the pair whose margin is least sure (it held on
# only 63% of resamples). It is also the pair that a held-out fit loses.
#
# **How sure are we?**
#
# - Five models are far too few, and ties decide part of the result.
# - Before trusting learned weights, fit them on many more models than weights, check their margins
#   against the bootstrap, and check them on models that were held out.

# %% [markdown]
# ## Summary
#
# **What this lesson established**
#
# - Temperature `T = 1.5` lowered the shipped model's perplexity from 7.134 to 6.452 and changed no
#   greedy answer; `T = 2` gave 7.758, worse than `T = 1`. The wrappers changed answers and left
#   perplexity alone. So *shipped T=1.5*, *shipped* and the wrapped models differ only where each
#   change reaches.
# - The reviewer's order, with *tidy* first, is impossible. *tidy* ties *shipped* on perplexity,
#   exact match and the judge, and trails it on token F1 (0.2952 against 0.2979), because one
#   removed stutter had been matching an "a" in its reference.
# - This is exact arithmetic, not a noisy estimate: under any non-negative weights *tidy* cannot
#   score above *shipped*. The same holds for an order that puts *shipped* above its
#   identical-answer, lower-perplexity twin.
# - On the other five models the defaults break the order once (*cut* above *prefix*). `fit_weights`
#   found weights that realise it: about 0.04 on exact match, 0.4 on token F1, 0.2 on the judge and
#   0.4 on perplexity (0.044, 0.36, 0.2 and 0.39 on these examples).
# - Against the bootstrap (300 paired resamples of the 25 facts the four fixtures share, weights
#   fixed), three of the four margins hold on every resample. *T=1.5* over *shipped* is among them,
#   despite a margin of only 0.0046. Refitted on every resample, exact match stays well below its
#   default 0.3.
# - Leave-one-model-out placed 3 of 5 held-out models correctly under the tie rule (3 or 4 depending
#   on which equally near weighting is taken). These are the same three the default weights place.
#   Under the rule, the reviewer's one correction is lost whenever a model of its pair is held out.
#
# **What it did not**
#
# - That *prefix* is better than *cut*, beyond these 20 examples per eval. Under the learned weights
#   its margin (0.0046) has a 95% bootstrap interval of about -0.016 to 0.027, and holds on 63% of
#   resamples. Three judge points on one model reverse it.
# - The learned weights beyond one significant figure. Refitted on resamples, the middle 95% of
#   token F1 ranges from about 0.3 to 0.5, and of perplexity from about 0.3 to 0.4. The judge's
#   lower tail is partly the tie rule's: 43 resamples move the judge below 0.2, 22 of them ties.
#   "Realisable on every resample" is a low bar: a resample of these models rarely contradicts the
#   order outright.
# - That the learned weights generalise to a new model. The in-sample margins are positive because
#   the fit made them so, and the one held-out check available finds them no better than the
#   defaults under the tie rule (one model better at most, under another equally near weighting).
#   Five models are far too few.

# %% [markdown]
# ## Exercises
#
# Each exercise has one code cell. Write your code where the stub says and run the cell. Its last
# lines check your answer, and say what they expected if it is wrong.

# %% [markdown]
# ### Exercise 1: Another temperature
#
# Make a sixth model, `at_temperature(early, 1.5)`, called `"early T=1.5"`. Add it to the five
# models of section 3, in a new dict (not in `five` itself). Place it in the reviewer's order of the
# five and fit the weights. Is the order still realisable, and do the weights move?
#
# *Hint:* its greedy answers are the early checkpoint's answers, so its exact-match, token-F1 and
# judge results are *early*'s; only its perplexity needs computing. Where can it go relative to
# *early*?

# %%
# Exercise 1: store the six models' results in `six`, your order of the six in `order6`, and the fit
#   in `fit6`.
### BEGIN SOLUTION
early_T = ec.perplexity_eval(at_temperature(early, 1.5), tok, fx["lm"])
six = {**five, "early T=1.5": [early_T] + list(results["early"][1:])}  # same answers as early
print(f"perplexity: early {results['early'][0].value:.4g}, early T=1.5 {early_T.value:.4g}")
# it ties early on three evals, so it goes just above early if its perplexity is lower, else just below
below = early_T.value > results["early"][0].value
order6 = order + ["early T=1.5"] if below else order[:-1] + ["early T=1.5", "early"]
fit6 = ec.fit_weights(six, order6)
print(fit6.message)
print(pd.DataFrame({"five models": fit.weights, "six models": fit6.weights}).round(4))
### END SOLUTION
assert set(six) == set(five) | {"early T=1.5"}, f"expected the five models plus 'early T=1.5' in `six`; got {sorted(six)}"
assert [m for m in order6 if m != "early T=1.5"] == order, f"expected the reviewer's order of the five with 'early T=1.5' inserted; got {order6}"
assert fit6.realisable and all(fit6.scores[a] > fit6.scores[b] for a, b in zip(order6, order6[1:])), (
    f"expected an order that some weights realise; fit_weights says: {fit6.message}")
print("Exercise 1: check passed.")

# %% [markdown] tags=["solution"]
# Softening the early checkpoint's logits (T = 1.5) does not help it: its perplexity rises from
# 14.73 to 16.89. For this model T = 1.5 flattens the next-token distribution further than its
# held-out text supports, so it only costs probability. (One temperature cannot say where this
# model's best T lies. On multiple choice, lesson 07 finds the early checkpoint over-confident.)
#
# So *early T=1.5*, with the same answers as *early* and a worse perplexity, can only go directly
# below *early*. Put it above, and it is the *tidy* situation again (tied on three evals, behind on
# the fourth): no weights realise the order. In last place the order is realisable.
#
# The weights barely move: perplexity from 0.39 to 0.41, token F1 from 0.36 to 0.35, exact match
# from 0.044 to 0.043, and the judge stays at 0.2. The new pair only needs some weight on
# perplexity, which the order already asked for. The smallest margin falls from 0.0046 to 0.0039.

# %% [markdown]
# ### Exercise 2: Prefer the prefix
#
# Put *shipped+prefix* above *shipped* in the order of the five (keep the rest as the reviewer had
# it). What does `fit_weights` report, and why? Store the normalised values of *shipped+prefix*
# minus those of *shipped*, eval by eval, as a dict.
#
# *Hint:* `table` holds every model's normalised values; the eval names are in `evals`.

# %%
# Exercise 2: store your order in `prefers_prefix`, its fit in `fit_prefix`, and prefix minus
#   shipped per eval in `prefix_gap`.
### BEGIN SOLUTION
prefers_prefix = ["shipped T=1.5", "shipped+prefix", "shipped", "shipped+cut", "early"]
fit_prefix = ec.fit_weights(five, prefers_prefix)
print(fit_prefix.message)
prefix_gap = {e: table.loc["shipped+prefix", e] - table.loc["shipped", e] for e in evals}
print({e: round(float(v), 4) for e, v in prefix_gap.items()})
### END SOLUTION
assert sorted(prefers_prefix) == sorted(order) and prefers_prefix.index("shipped+prefix") < prefers_prefix.index("shipped"), (
    f"expected the five models with shipped+prefix above shipped; got {prefers_prefix}")
assert not fit_prefix.realisable, f"expected fit_weights to find the order impossible; it says: {fit_prefix.message}"
assert set(prefix_gap) == set(evals) and all(abs(prefix_gap[e] - (table.loc["shipped+prefix", e] - table.loc["shipped", e])) < 1e-9 for e in evals), (
    f"expected shipped+prefix's normalised value minus shipped's for each of {evals}; got {prefix_gap}")
print("Exercise 2: check passed.")

# %% [markdown] tags=["solution"]
# No weights realise it. The prefix wrapper leaves plain text alone, so its perplexity is exactly
# *shipped*'s. "Answer: " in front of every answer can only cost it: exact match drops to 0, and
# token F1 and the judge fall too. Behind or level on every eval, it cannot score above *shipped*
# under any non-negative weights. It is the *tidy* situation again. If the reviewer really prefers
# the prefix, they value something (a labelled answer) that none of the four metrics measures.

# %% [markdown]
# ### Exercise 3: Max margin vs. near the defaults
#
# Re-run leave-one-model-out with `margin_share=1.0`: the max-margin weights themselves, with no
# pull toward the defaults. Does it place more held-out models correctly than the 3 of section 5?
#
# *Hint:* `ec.leave_one_model_out` passes extra keyword arguments on to `fit_weights`.

# %%
# Exercise 3: store the leave-one-model-out table with margin_share=1.0 in `lomo_max` and its number
#   of correctly placed models in `n_placed_max`.
### BEGIN SOLUTION
lomo_max = pd.DataFrame(ec.leave_one_model_out(five, order, margin_share=1.0))
print(lomo_max[["held_out", "preferred_rank", "rank", "placed"]])
n_placed_max = int(lomo_max["placed"].sum())
print(f"{n_placed_max} of {len(lomo_max)} placed with max-margin weights, {placed} with the default pull")
print(pd.DataFrame(list(lomo_max["weights"]), index=lomo_max["held_out"]).round(3))
### END SOLUTION
assert list(lomo_max["held_out"]) == order, f"expected one row per held-out model, in the reviewer's order; got {list(lomo_max['held_out'])}"
assert [w == v for w, v in zip(lomo_max["weights"], [r["weights"] for r in ec.leave_one_model_out(five, order, margin_share=1.0)])] == [True] * len(order), (
    "expected the weights of max-margin fits (margin_share=1.0) on the other four models in each row")
assert n_placed_max == int(lomo_max["placed"].sum()), f"expected the number of True values in lomo_max['placed']; got {n_placed_max!r}"
print("Exercise 3: check passed.")

# %% [markdown] tags=["solution"]
# It places fewer: 2 of 5 instead of 3. Without the pull toward the defaults, each fit on four
# models goes to a vertex of the allowed region (section 3). There some weights are 0: the judge's
# always, and often one more.
#
# - Holding out *T=1.5* or *shipped* leaves no pair that needs perplexity, so the max-margin weights
#   put none on it. The held-out model then ties its twin instead of landing on the right side of
#   it.
# - Holding out *prefix*, *cut* or *early* puts most of the weight on perplexity (0.78 to 0.96).
#   That places *prefix* and *early*, but *cut*, held out, lands second.
#
# The regulariser is not decoration: with this few models, the defaults carry most of what the fit
# gets right about a new model.

# %% [markdown]
# ### Exercise 4: How many weightings fit?
#
# Draw 10,000 weight vectors uniformly from the simplex with
# `torch.distributions.Dirichlet(torch.ones(4, dtype=torch.float64))` (seed torch first). Find the
# share of them under which the aggregates of the five models fall in the reviewer's order `order`.
# Then keep only three of the models (in the reviewer's order) and find the share again.
#
# *Hint:* `table.loc[order, evals]` holds the normalised values, in the same eval order as the
# Dirichlet's columns if you use `evals`; the aggregate is their weighted sum. Fewer models, fewer
# constraints. Does it matter which three you keep?

# %%
# Exercise 4: store the share for the five models in `share5`, your three models in `three`, and
#   their share in `share3`.
### BEGIN SOLUTION
torch.manual_seed(0)
draws_w = torch.distributions.Dirichlet(torch.ones(4, dtype=torch.float64)).sample((10_000,))  # (N, 4)


def share_realising(models):
    X = torch.tensor(table.loc[models, evals].to_numpy(), dtype=torch.float64)  # (models, evals)
    agg = X @ draws_w.T  # (models, N): every model's aggregate under every weighting
    return (agg[:-1] > agg[1:]).all(0).double().mean().item()


share5 = share_realising(order)
three = ["shipped", "shipped+cut", "early"]
share3 = share_realising(three)
for kept in (order, three, ["shipped+prefix", "shipped+cut", "early"]):
    print(f"{share_realising(kept):.3f} of the weightings realise {kept}")
### END SOLUTION
assert len(three) == 3 and [m for m in order if m in three] == list(three), f"expected three of the five models, in the reviewer's order; got {three}"
assert abs(share5 - ((torch.tensor(table.loc[order, evals].to_numpy())
                      @ torch.distributions.Dirichlet(torch.ones(4, dtype=torch.float64)).sample((20_000,)).T)
                     .diff(dim=0) < 0).all(0).double().mean().item()) < 0.02, (
    f"expected the share of uniform weightings that realise the five-model order (within 0.02); got {share5!r}")
assert share3 > share5 - 0.02, f"expected at least the five-model share for three models; got {share3!r} against {share5!r}"
print("Exercise 4: check passed.")

# %% [markdown] tags=["solution"]
# About 12% of all weightings realise the order of the five: a region of the simplex, not a point,
# and `fit_weights` returns one point of it. Keeping *shipped*, *cut* and *early* raises the share
# to about 82%.
#
# Which three matters. Keeping *prefix*, *cut* and *early* leaves it at 12%, because the one
# constraint that cuts the region down is still there: *prefix* over *cut*, which needs a small
# exact-match weight. Every three-model order is implied by the five-model one, so the share can
# only stay or grow. Either way, a fit with so few constraints says little about the weights.

