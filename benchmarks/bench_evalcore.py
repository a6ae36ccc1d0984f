"""Performance figures for evalcore, each a ratio against a baseline measured in the same run.

    make bench        (or: python benchmarks/bench_evalcore.py [--skip-demo])

Figures, not tests: timings move with the machine and its load, ratios much less so.
"""

import argparse
import json
import math
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch

import evalcore as ec

ROOT = Path(__file__).resolve().parent.parent


def best_of(fn, repeat=5):
    """The fastest of `repeat` runs of fn(), in seconds (the least disturbed by other load)."""
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return min(times)


def padded_batches(token_lists, batch_size, sort):
    """Right-padded LongTensors, as perplexity_eval builds them (sorted, padding capped:
    ec.length_batches) or in input order."""
    if sort:
        groups = ec.length_batches([len(t) for t in token_lists], batch_size)
    else:
        groups = [
            list(range(s, min(s + batch_size, len(token_lists))))
            for s in range(0, len(token_lists), batch_size)
        ]
    batches = []
    for group in groups:
        rows = [token_lists[i] for i in group]
        ids = torch.full((len(rows), max(map(len, rows))), ec.InstructionTokenizer.pad_id)
        for i, r in enumerate(rows):
            ids[i, : len(r)] = torch.tensor(r)
        batches.append(ids)
    return batches


def padding_fraction(batches, token_lists):
    return 1 - sum(map(len, token_lists)) / sum(b.numel() for b in batches)


@torch.no_grad()
def bare_forward(model, batches):
    for ids in batches:
        model(ids[:, :-1])


def bench_perplexity(model, tok, texts, batch_size=16):
    token_lists = [tok.encode(t) for t in texts]
    sorted_batches = padded_batches(token_lists, batch_size, sort=True)
    input_batches = padded_batches(token_lists, batch_size, sort=False)
    n_tokens = sum(len(t) - 1 for t in token_lists)
    # interleaved rounds, the best of each kept: a burst of other load hits both alike
    t_eval, t_bare = math.inf, math.inf
    for _ in range(9):
        t_eval = min(
            t_eval, best_of(lambda: ec.perplexity_eval(model, tok, texts, batch_size=batch_size), 1)
        )
        t_bare = min(t_bare, best_of(lambda: bare_forward(model, sorted_batches), 1))
    t_input = best_of(lambda: bare_forward(model, input_batches))
    print(f"perplexity_eval: {len(texts)} texts, {n_tokens} scored tokens, batch_size {batch_size}")
    print(f"  perplexity_eval      {n_tokens / t_eval:10.0f} tokens/s")
    print(f"  bare forward, same batches {n_tokens / t_bare:4.0f} tokens/s")
    print(f"  throughput ratio eval / bare forward: {t_bare / t_eval:.2f} (target >= 0.9)")
    print(
        f"  padding: {padding_fraction(input_batches, token_lists):.0%} in input order, "
        f"{padding_fraction(sorted_batches, token_lists):.0%} length-sorted; "
        f"sorted is {t_input / t_bare:.2f}x faster"
    )


def bench_fixture_batching(model, tok, texts):
    """The lm fixture as it is (one 748-token text among 19 short ones): default batching against
    one text at a time. Batches capped by padding should never lose to batch size 1."""
    t_default = best_of(lambda: ec.perplexity_eval(model, tok, texts))
    t_one = best_of(lambda: ec.perplexity_eval(model, tok, texts, batch_size=1))
    print(f"perplexity_eval on the lm fixture ({len(texts)} texts, one longer than the window)")
    print(
        f"  default batching against batch_size=1: {t_one / t_default:.2f}x as fast (target >= 1)"
    )


class NeverStops(ec.TinyGPT):
    """The shipped weights, special tokens masked out: every prompt decodes every token."""

    def forward(self, *args, **kwargs):
        logits = super().forward(*args, **kwargs)
        logits[..., ec.InstructionTokenizer.inst_id :] = -math.inf
        return logits


def bench_generate(tok, n_prompts=20, new_tokens=32):
    model = NeverStops(**json.loads(ec.CHECKPOINT_PATH.with_suffix(".json").read_text())["config"])
    model.load_state_dict(ec.load_pretrained().state_dict())
    model.eval()
    prompts = [q for q, _ in ec.load_fixtures()["em"]][:n_prompts]
    batched = ec.generate(model, tok, prompts, max_new_tokens=new_tokens)
    naive = [ec._generate_uncached(model, tok, p, new_tokens) for p in prompts]
    assert batched == naive, "batched KV-cache decoding disagrees with naive decoding"
    assert all(len(tok.encode(a)) >= new_tokens for a in batched)  # no prompt stopped early
    t_batched = best_of(lambda: ec.generate(model, tok, prompts, max_new_tokens=new_tokens))
    t_cache_only = best_of(
        lambda: [ec.generate(model, tok, [p], max_new_tokens=new_tokens) for p in prompts]
    )
    t_naive = best_of(
        lambda: [ec._generate_uncached(model, tok, p, new_tokens) for p in prompts], 1
    )
    print(f"generate: {n_prompts} prompts x {new_tokens} new tokens (same strings as naive)")
    print(f"  naive (full forward per step, one prompt at a time) {t_naive:6.2f} s")
    print(
        f"  KV cache, one prompt at a time                       {t_cache_only:6.2f} s "
        f"({t_naive / t_cache_only:.1f}x)"
    )
    print(
        f"  KV cache + left-padded batch (generate)              {t_batched:6.2f} s "
        f"({t_naive / t_batched:.1f}x, target >= 10x)"
    )


@torch.no_grad()
def hf_batched_generate(model, tok, prompts, new_tokens):
    """transformers' own greedy generate on the left-padded batch: the baseline to match."""
    encoded = [tok.encode_prompt(q) for q in prompts]
    L = max(map(len, encoded))
    ids = torch.tensor([[tok.pad_id] * (L - len(p)) + p for p in encoded])
    mask = torch.tensor([[0] * (L - len(p)) + [1] * len(p) for p in encoded])
    out = model.hf.generate(
        ids,
        attention_mask=mask,
        do_sample=False,
        max_new_tokens=new_tokens,
        eos_token_id=sorted(tok.stop_ids),
        pad_token_id=tok.pad_id,
    )
    answers = []
    for row in out[:, L:].tolist():
        stop = next((i for i, t in enumerate(row) if t in tok.stop_ids), len(row))
        answers.append(tok.decode_answer(row[:stop]))
    return answers


def bench_smollm2(n_prompts=20, new_tokens=48, n_uncached=4, uncached_tokens=32):
    """SmolLM2-135M-Instruct on one thread: loading from the cache, evalcore's batched KV-cached
    generate against transformers' batched generate and against the uncached one-prompt loop,
    and core_evals end to end."""
    ec.smollm2_folder()  # built once (about 15-40 s) if the cache is empty; not timed
    t_load = best_of(ec.load_smollm2, 3)
    model, tok = ec.load_smollm2()
    prompts = [q for q, _ in ec.load_fixtures()["em"]][:n_prompts]
    ours = ec.generate(model, tok, prompts, max_new_tokens=new_tokens)
    assert ours == hf_batched_generate(model, tok, prompts, new_tokens), "differs from HF generate"
    t_ours, t_hf = math.inf, math.inf
    for _ in range(2):  # interleaved, the best of each kept
        t_ours = min(t_ours, best_of(lambda: ec.generate(model, tok, prompts, new_tokens), 1))
        t_hf = min(t_hf, best_of(lambda: hf_batched_generate(model, tok, prompts, new_tokens), 1))
    few = prompts[:n_uncached]
    naive = [ec._generate_uncached(model, tok, p, uncached_tokens) for p in few]
    assert ec.generate(model, tok, few, uncached_tokens) == naive, "differs from the uncached loop"
    t_few = best_of(lambda: ec.generate(model, tok, few, uncached_tokens), 2)
    t_naive = best_of(
        lambda: [ec._generate_uncached(model, tok, p, uncached_tokens) for p in few], 1
    )
    t = time.perf_counter()
    ec.core_evals(model, tok)
    t_core = time.perf_counter() - t
    print(f"SmolLM2-135M-Instruct, {torch.get_num_threads()} thread(s)")
    print(f"  load_smollm2 from the cached folder   {t_load:6.2f} s (target < 5 s)")
    print(
        f"  generate, {n_prompts} prompts x {new_tokens} new tokens: {t_ours:6.2f} s, "
        f"transformers' batched generate {t_hf:6.2f} s: {t_hf / t_ours:.2f}x its throughput "
        "(target >= 0.9x)"
    )
    print(
        f"  generate, {n_uncached} prompts x {uncached_tokens} new tokens: {t_few:6.2f} s, the "
        f"uncached loop {t_naive:6.2f} s: {t_naive / t_few:.1f}x (target >= 5x)"
    )
    print(f"  core_evals end to end                 {t_core:6.2f} s (target < 60 s)")


def bench_demo():
    with tempfile.TemporaryDirectory() as tmp:
        t = time.perf_counter()
        subprocess.run(
            [sys.executable, str(ROOT / "evalcore.py"), "--out", f"{tmp}/report.json"],
            check=True,
            cwd=tmp,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        wall = time.perf_counter() - t
    peak_mb = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    print(
        f"demo: {wall:.1f} s wall on {ec.DEMO_THREADS} thread "
        "(target <= 150 s, whatever else runs), "
        f"peak memory {peak_mb:.0f} MB"
    )


def bench_served(n_prompts=20, new_tokens=48):
    """SmolLM2 behind vLLM (lesson 14): the same chat answers with 1 and 4 requests in flight, and
    perplexity through the server against the same weights in this process."""
    if not ec.VLLM_PYTHON.is_file():
        print(f"served: skipped, no vLLM environment at {ec.VLLM_PYTHON} (`make vllm`)")
        return
    fx, (local, tok) = ec.load_fixtures(), ec.load_smollm2()
    questions = [q for q, _ in fx["em"]][:n_prompts]
    start = time.perf_counter()
    with ec.smollm2_server() as server:
        ready = time.perf_counter() - start
        seconds, answers = {}, {}
        for k in (4, 1, 4):  # 4 first warms the server; the second 4 is the one compared
            model, _ = ec.load_served(
                server.url, server.model, tok, max_in_flight=k, progress=False
            )
            t = time.perf_counter()
            answers[k] = ec.generate(model, tok, questions, max_new_tokens=new_tokens)
            seconds[k] = time.perf_counter() - t
        t = time.perf_counter()
        ec.perplexity_eval(model, tok, fx["lm"])
        t_served = time.perf_counter() - t
    t = time.perf_counter()
    ec.perplexity_eval(local, tok, fx["lm"])
    t_local = time.perf_counter() - t
    print(
        f"served (SmolLM2 behind vLLM on this CPU, ready in {ready:.0f} s): {n_prompts} chat "
        f"answers x up to {new_tokens} tokens"
    )
    print(f"  1 request in flight {seconds[1]:6.2f} s, 4 in flight {seconds[4]:6.2f} s")
    print(
        f"  throughput ratio 4 / 1 in flight: {seconds[1] / seconds[4]:.2f} "
        f"(same answers: {answers[1] == answers[4]})"
    )
    print(
        f"  perplexity_eval on the lm fixture: served {t_served:.2f} s, in-process "
        f"{t_local:.2f} s (ratio {t_local / t_served:.2f})"
    )


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--skip-demo", action="store_true", help="skip the demo wall-time run")
    parser.add_argument("--skip-smollm2", action="store_true", help="skip lesson 13's model")
    parser.add_argument("--only-smollm2", action="store_true", help="lesson 13's model only")
    parser.add_argument("--skip-served", action="store_true", help="skip vLLM (lesson 14)")
    parser.add_argument("--only-served", action="store_true", help="vLLM (lesson 14) only")
    args = parser.parse_args()
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads\n")
    if not args.skip_served:
        threads = torch.get_num_threads()
        torch.set_num_threads(1)  # the in-process side as lesson 14 runs it
        bench_served()
        torch.set_num_threads(threads)
        print()
    if args.only_served:
        return
    if not args.skip_smollm2:
        threads = torch.get_num_threads()
        torch.set_num_threads(1)  # as lesson 13 runs it
        bench_smollm2()
        torch.set_num_threads(threads)
        print()
    if args.only_smollm2:
        return
    tok = ec.InstructionTokenizer()
    model = ec.load_pretrained()
    fx = ec.load_fixtures()
    fits = [
        t for t in fx["lm"] if len(tok.encode(t)) <= model.config.max_len + 1
    ]  # one window each
    texts = fits * 10  # texts of very different lengths, as a real held-out set has
    bench_perplexity(model, tok, texts)
    print()
    bench_fixture_batching(model, tok, fx["lm"])
    print()
    bench_generate(tok)
    if not args.skip_demo:
        print()
        bench_demo()


if __name__ == "__main__":
    main()
