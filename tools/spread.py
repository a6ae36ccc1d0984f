"""How far do the course's cross-checks move on another CPU? (issue 26)

    .venv/bin/python tools/spread.py [--threads 1 2] [--choices native aten=avx2 ...] [--json F]

Each check compares a computation with one made elsewhere or otherwise: SmolLM2 live against the
recordings committed from one machine (lessons 09, 13, 14), and batched against one text at a time.
A CPU's kernels, the thread count and the BLAS build change float32 sums in their last bits, so on
another machine each check sees other numbers. One machine can show another's view: this runs every
check in a fresh process under each kernel choice (torch's ATEN_CPU_CAPABILITY, MKL's and oneDNN's
instruction caps) and thread count, then prints, for each quantity, its spread (the largest change
between kernel choices here) and its gap to the recording, beside the tolerance evalcore sets for
it. Each tolerance is a stated multiple (about 10x) of the largest of these, with a comment saying
so; the last column says how many times the measured spread it is.

Each run takes about 3.5 CPU-minutes (eight took 67 minutes on 2 shared cores); run it idle.
"""

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

# Kernel choices: environment variables read when torch loads. "native" is what this CPU picks;
# the others show a machine without AVX512 (avx2), without any vector kernels of ATen's own
# (default), or whose MKL or oneDNN take another code path (the AMD EPYC of issue 26 moved SmolLM2's
# numbers by about as much as MKL's AVX2 cap does here; SmolLM2's products run in MKL's SGEMM, not
# oneDNN, so oneDNN's cap checks that a change of its path would not move them).
CHOICES = {
    "native": {},
    "aten=avx2": {"ATEN_CPU_CAPABILITY": "avx2"},
    "aten=default": {"ATEN_CPU_CAPABILITY": "default"},
    "mkl=avx2": {"MKL_ENABLE_INSTRUCTIONS": "AVX2"},
    "mkl=sse4_2": {"MKL_ENABLE_INSTRUCTIONS": "SSE4_2"},
    "onednn=avx2": {"ONEDNN_MAX_CPU_ISA": "AVX2"},
}
_KERNEL_VARIABLES = ("ATEN_CPU_CAPABILITY", "MKL_ENABLE_INSTRUCTIONS", "ONEDNN_MAX_CPU_ISA")


# The probe: what one process computes under one kernel choice ------------------------------------


def _greedy_margins(model, tok, ec):
    """Each recorded lesson-13 answer regenerated live: whether it is the recorded string, and the
    smallest gap between the chosen token's logit and the runner-up's along the way (a gap near 0
    is a near tie that another CPU can flip)."""
    import torch

    rec, fx = ec.load_recording_13(), ec.load_fixtures()
    flips, margins = [], []
    for name, (chat, suffix, keys) in ec.RECORD_13_VARIANTS.items():
        vtok = ec.prompt_variant(tok, chat, suffix)
        questions = list(dict.fromkeys(q for k in keys for q, _ in fx[k]))
        answers = ec._generate_hf_ids(model, vtok, questions, rec["decoding"]["max_new_tokens"])
        for q, ids in zip(questions, answers):
            if vtok.decode_answer(ids) != rec["variants"][name]["answers"][q]:
                flips.append(f"{name}: {q}")
            prompt = vtok.encode_prompt(q)
            with torch.no_grad():
                logits = model.hf(input_ids=torch.tensor([prompt + ids])).logits[0]  # (T, V)
            top2 = logits[len(prompt) - 1 :].topk(2, dim=-1).values  # (len(ids) + 1, 2)
            margins.append(float((top2[:, 0] - top2[:, 1]).min()))
    return flips, margins


def _served_probe(model, tok, ec):
    """The recorded vLLM responses of lessons 14 and 09 against this process (the same weights)."""
    fx = ec.load_fixtures()
    source = ec.served_source(ec.RECORDING_14_PATH)
    try:
        served, _ = ec.load_served(source.url, source.model, tok, progress=False)
        remote = served.prompt_logprobs([tok.encode(t) for t in fx["lm"]])
        remote_ppl = ec.perplexity_eval(served, tok, fx["lm"]).value
    finally:
        source.stop()
    local = ec.token_logprobs_local(model, tok, fx["lm"])
    labels = ec.load_course_labels()
    items = [(it["instruction"], it["answer"], it["reference"]) for it in labels["items"]][:4]
    source = ec.served_source(ec.RECORDING_09_PATH)
    try:
        served, _ = ec.load_served(source.url, source.model, tok, progress=False)
        judged = [d["expected"] for d in ec.ProbabilityJudge(served, tok).scores(items)]
    finally:
        source.stop()
    return {
        "served_token_logprobs": [x for lp in remote for x in lp[1:]],
        "local_token_logprobs": [x for lp in local for x in lp[1:]],
        "served_perplexity": remote_ppl,
        "served_judge_expected": judged,
        "local_judge_expected": [
            d["expected"] for d in ec.ProbabilityJudge(model, tok).scores(items)
        ],
    }


def probe(threads):
    """Every quantity this process computes, as JSON-ready lists (run under one kernel choice)."""
    import torch

    import evalcore as ec

    torch.set_num_threads(threads)
    model, tok = ec.load_smollm2()
    fx, items = ec.load_fixtures(), ec.multiple_choice_items()
    batched = ec.perplexity_eval(model, tok, fx["lm"])
    alone = ec.perplexity_eval(model, tok, fx["lm"], batch_size=1)
    tiny, tiny_tok = ec.load_pretrained(), ec.InstructionTokenizer()
    tiny_batched = ec.perplexity_eval(tiny, tiny_tok, fx["lm"])
    tiny_alone = ec.perplexity_eval(tiny, tiny_tok, fx["lm"], batch_size=1)
    flips, margins = _greedy_margins(model, tok, ec)
    return {
        "capability": torch.backends.cpu.get_cpu_capability(),
        "threads": torch.get_num_threads(),
        "choice_logliks": [x for row in ec.choice_logliks(model, tok, items) for x in row],
        "perplexity": batched.value,
        "text_nll_batched": [r["nll"] for r in batched.per_example],
        "text_nll_alone": [r["nll"] for r in alone.per_example],
        "tiny_text_nll_batched": [r["nll"] for r in tiny_batched.per_example],
        "tiny_text_nll_alone": [r["nll"] for r in tiny_alone.per_example],
        "greedy_flips": flips,
        "greedy_margins": margins,
        **_served_probe(model, tok, ec),
    }


def run_probe(choice, threads):
    """probe() in a fresh process under one kernel choice: the variables must be set before torch
    loads, and nothing of this process's own choice may leak in."""
    env = {k: v for k, v in os.environ.items() if k not in _KERNEL_VARIABLES}
    env.update(CHOICES[choice])
    done = subprocess.run(
        [sys.executable, __file__, "--probe", str(threads)],
        env=env, cwd=ROOT, capture_output=True, text=True, check=False,
    )  # fmt: skip
    if done.returncode:
        raise RuntimeError(f"{choice}, {threads} threads: the probe failed\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


# The quantities: each a function of one probe's output, and of the recording ----------------------


def _relative(a, b):
    return max(abs(x - y) / abs(y) for x, y in zip(a, b) if y)


def _absolute(a, b):
    return max(abs(x - y) for x, y in zip(a, b))


def _recording_13_logliks():
    rec = json.loads((ROOT / "data" / "recording_13.json").read_text(encoding="utf-8"))
    return [x for row in rec["choice_logliks"] for x in row]


# name: (what it is, its unit, how far two probes' values are apart, the gap to the recording or
# to the other side of the check within one probe, and the evalcore constant that bounds it)
QUANTITIES = {
    "lesson 13: choice log-likelihoods, live against recording_13.json": (
        "nats",
        lambda p, q: _absolute(p["choice_logliks"], q["choice_logliks"]),
        lambda p: _absolute(p["choice_logliks"], _recording_13_logliks()),
        "RECORDING_13_LOGLIK_TOLERANCE",
    ),
    "lesson 14: token log-probabilities, in-process against the recorded vLLM": (
        "nats",
        lambda p, q: _absolute(p["local_token_logprobs"], q["local_token_logprobs"]),
        lambda p: _absolute(p["local_token_logprobs"], p["served_token_logprobs"]),
        "SANITY_TOLERANCE",
    ),
    "lesson 14: perplexity, in-process against the recorded vLLM": (
        "relative",
        lambda p, q: abs(p["perplexity"] - q["perplexity"]) / q["perplexity"],
        lambda p: abs(p["perplexity"] - p["served_perplexity"]) / p["served_perplexity"],
        "SERVED_RTOL",
    ),
    "lesson 09: judge's expected score, in-process against the recorded vLLM": (
        "score points",
        lambda p, q: _absolute(p["local_judge_expected"], q["local_judge_expected"]),
        lambda p: _absolute(p["local_judge_expected"], p["served_judge_expected"]),
        "JUDGE_SERVED_TOLERANCE",
    ),
    "lessons 01/11: SmolLM2 text NLL, batched against one text at a time": (
        "relative",
        lambda p, q: _relative(p["text_nll_batched"], q["text_nll_batched"]),
        lambda p: _relative(p["text_nll_batched"], p["text_nll_alone"]),
        "BATCHED_RTOL",
    ),
    "lesson 01: TinyGPT text NLL, batched against one text at a time": (
        "relative",
        lambda p, q: _relative(p["tiny_text_nll_batched"], q["tiny_text_nll_batched"]),
        lambda p: _relative(p["tiny_text_nll_batched"], p["tiny_text_nll_alone"]),
        "BATCHED_RTOL",
    ),
}


def report(probes):
    """The table: per quantity, the spread over kernel choices and threads, the largest gap of
    its check, and the tolerance evalcore sets, as a multiple of the larger of the two."""
    import evalcore as ec

    reference = probes[("native", 1)]
    rows = []
    for name, (unit, between, gap, constant) in QUANTITIES.items():
        spread = max(between(p, reference) for p in probes.values())
        worst = max(gap(p) for p in probes.values())
        tolerance = getattr(ec, constant, None)
        measured = max(spread, worst)
        rows.append(
            {
                "quantity": name,
                "unit": unit,
                "spread": spread,
                "largest gap": worst,
                "constant": constant,
                "tolerance": tolerance,
                "x measured": None if tolerance is None or not measured else tolerance / measured,
            }
        )
    margins = {k: min(p["greedy_margins"]) for k, p in probes.items()}
    flips = {k: p["greedy_flips"] for k, p in probes.items() if p["greedy_flips"]}
    return rows, margins, flips


def _fmt(value):
    if value is None:
        return "-"
    return f"{value:.2e}" if isinstance(value, float) else str(value)


def print_report(probes, rows, margins, flips):
    print(f"{len(probes)} runs: " + ", ".join(f"{c} x{t}" for c, t in probes))
    print(f"capabilities seen: {sorted({p['capability'] for p in probes.values()})}")
    for row in rows:
        times = row["x measured"]
        print(
            f"\n{row['quantity']} ({row['unit']})\n"
            f"  spread over kernel choices {_fmt(row['spread'])}, "
            f"largest gap {_fmt(row['largest gap'])}\n"
            f"  {row['constant']} = {_fmt(row['tolerance'])} "
            f"({'not set' if times is None else f'{times:.0f}x the larger'})"
        )
    low = min(margins.values())
    print(
        f"\nlesson 13's recorded greedy answers (100 prompts): regenerated under every choice, "
        f"{'none differs' if not flips else 'some differ'}; the smallest top-1 minus top-2 logit "
        f"gap on the way is {low:.3g} (per choice: "
        + ", ".join(f"{c} x{t} {m:.3g}" for (c, t), m in margins.items())
        + ")"
    )
    for (c, t), which in flips.items():
        print(f"  {c} x{t}: {len(which)} differ, e.g. {which[0]!r}")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--probe", type=int, help=argparse.SUPPRESS)  # one run, in a child
    parser.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--choices", nargs="+", default=list(CHOICES), choices=list(CHOICES))
    parser.add_argument("--json", type=Path, help="also write every run's raw output here")
    args = parser.parse_args(argv)
    if args.probe:
        print(json.dumps(probe(args.probe), allow_nan=False))
        return 0
    if "native" not in args.choices or 1 not in args.threads:
        parser.error("the spread is measured from native x1: keep both in --choices/--threads")
    probes = {(c, t): run_probe(c, t) for c in args.choices for t in args.threads}
    rows, margins, flips = report(probes)
    print_report(probes, rows, margins, flips)
    if args.json:
        raw = {f"{c} x{t}": p for (c, t), p in probes.items()}
        args.json.write_text(json.dumps({"runs": raw, "rows": rows}, indent=1, allow_nan=False))
    return 0


if __name__ == "__main__":
    sys.exit(main())
