"""A mutation pass over the newer parts of evalcore: do the unit tests catch the bugs a developer
would make? (`make mutation`; not part of `make test`.)

Each mutant below is one realistic edit to evalcore.py: a bug someone could write. For each, a
copy of the repository is made in a temporary folder with that one edit applied, and only the
test files of its area run there (pytest -x, under a timeout). A mutant is *killed* when those
tests fail (or time out), *survives* when they all pass. Every kill is then confirmed: the test
that made it must pass on the unmutated code (a timing test that fails under load would kill a
mutant it cannot see). A mutant whose edit changes no behaviour at all is *equivalent*: it is
listed with the reason, run anyway (it should survive), and left out of the score. A mutant whose
text is no longer in evalcore.py (the code was rewritten) is *stale*: reported, never run, never
scored.

The score is killed / (mutants - equivalent - stale), per area and over every area but
"intervals", whose mutants are reported apart (that code has another owner; issue 19).

    python tools/mutation.py                    # every mutant, then the scores
    python tools/mutation.py --area hf_adapter  # one area (repeatable)
    python tools/mutation.py --mutant pad-fixed-id --jobs 2
    python tools/mutation.py --list             # the mutants, without running anything
"""

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TARGET = "evalcore.py"
COPIED = ("evalcore.py", "pyproject.toml", "tests", "tools")  # copied; everything else linked
SKIPPED = {"reports", "__pycache__"}  # and every hidden entry (.git, .venv, caches)
SEPARATE = "intervals"  # reported apart from the score (its code has another owner)

# The test files that cover each area: all that runs for one of its mutants (fast ones first:
# pytest -x stops at the first failure).
AREA_TESTS = {
    "hf_adapter": ("test_11_hf_adapter_edge_cases.py", "test_11_real_model.py"),
    "bits_per_byte": (
        "test_12_bits_per_char_edge_cases.py",
        "test_12_beyond_english.py",
        "test_11_real_model.py",
    ),
    "multiple_choice": ("test_07_multiple_choice_edge_cases.py", "test_07_calibration.py"),
    "choice_accuracy": ("test_07_multiple_choice_edge_cases.py", "test_11_real_model.py"),
    "segmentation_nfkc": (
        "test_12_segmentation_edge_cases.py",
        "test_12_beyond_english.py",
        "test_03_token_f1.py",
    ),
    "judge_transport": (
        "test_09_key_redaction.py",
        "test_09_judge_transport_edge_cases.py",
        "test_09_http_judge.py",
    ),
    "protocol_log": ("test_06_protocol_log_edge_cases.py", "test_06_evidence.py"),
    "calibration_bins": (
        "test_07_calibration_bins_edge_cases.py",
        "test_07_multiple_choice_edge_cases.py",
        "test_07_calibration.py",
    ),
    "length_batches": ("test_01_length_batches.py", "test_01_perplexity.py"),
    "intervals": (
        "test_00_shared_uncertainty.py",
        "test_06_evidence.py",
        "test_08_robustness.py",
        "test_05_aggregation_report.py",
    ),
}


@dataclass(frozen=True)
class Mutant:
    area: str
    name: str
    old: str  # must occur exactly once in evalcore.py
    new: str
    bug: str  # the mistake it stands for
    equivalent: str = ""  # why no test can tell it apart, when it is equivalent


M = Mutant
MUTANTS = [
    # -- The Hugging Face adapter (lesson 11) ------------------------------------------------
    M(
        "hf_adapter",
        "ids-not-moved",
        "        ids = ids.to(_device_of(self))\n",
        "",
        "ids are not moved to the model's device",
    ),
    M(
        "hf_adapter",
        "load-ignores-device",
        "        hf_model = hf_model.to(device)\n",
        "        hf_model = hf_model\n",
        "load_hf ignores device",
    ),
    M(
        "hf_adapter",
        "load-ignores-dtype",
        "from_pretrained(str(name_or_path), dtype=dtype)",
        "from_pretrained(str(name_or_path))",
        "load_hf ignores dtype",
    ),
    M(
        "hf_adapter",
        "bos-from-eos",
        "bos = hf_tokenizer.bos_token_id if hf_tokenizer.bos_token_id is not None else eos",
        "bos = eos",
        "BOS taken from EOS even when the tokenizer has its own",
    ),
    M(
        "hf_adapter",
        "pad-fixed-id",
        "self.pad_id = hf_tokenizer.pad_token_id if hf_tokenizer.pad_token_id is not None else eos",
        "self.pad_id = hf_tokenizer.pad_token_id if hf_tokenizer.pad_token_id is not None else 0",
        "a missing pad falls back to id 0 instead of EOS",
    ),
    M(
        "hf_adapter",
        "no-generation-prompt",
        "                add_generation_prompt=True,\n",
        "                add_generation_prompt=False,\n",
        "the chat template is applied without opening the assistant's turn",
    ),
    M(
        "hf_adapter",
        "bos-before-template",
        "            return self.encode(text)  # the template writes its own BOS",
        "            return list(self.bos_ids) + self.encode(text)  # the template writes its own"
        " BOS",
        "BOS added in front of the chat template's output",
    ),
    M(
        "hf_adapter",
        "prefix-under-template",
        'return PLAIN_ANSWER_PREFIX if self.prompt_format == "plain" else ""',
        "return PLAIN_ANSWER_PREFIX",
        "the answer prefix added under a chat template too",
    ),
    M(
        "hf_adapter",
        "decode-cuts-unconditionally",
        "return text[len(self._prefix()) :] if text.startswith(self._prefix()) else text",
        "return text[len(self._prefix()) :]",
        "decode_answer cuts a character whether or not the answer starts with the prefix",
    ),
    M(
        "hf_adapter",
        "stop-ids-dropped",
        "tok = HFTokenizer(hf_tokenizer, add_bos=add_bos, stop_ids=extra)",
        "tok = HFTokenizer(hf_tokenizer, add_bos=add_bos)",
        "the generation_config's EOS ids are dropped",
    ),
    M(
        "hf_adapter",
        "stop-ids-int-only",
        "[extra] if isinstance(extra, int) else list(extra)",
        "[extra] if isinstance(extra, int) else []",
        "a list of EOS ids in the generation_config is dropped, a single int kept",
    ),
    M(
        "hf_adapter",
        "stop-ids-without-eos",
        "self.stop_ids = frozenset({eos, *stop_ids})",
        "self.stop_ids = frozenset(stop_ids)",
        "the tokenizer's own EOS stops generation only if the generation_config lists it",
    ),
    M(
        "hf_adapter",
        "context-key-missing",
        'for key in ("max_position_embeddings", "n_positions", "n_ctx", "seq_length"):',
        'for key in ("n_positions", "n_ctx", "seq_length"):',
        "the context length read from GPT-2's key names only",
    ),
    M(
        "hf_adapter",
        "vocab-check-off-by-one",
        "if tok.vocab_size > model.config.vocab_size:",
        "if tok.vocab_size >= model.config.vocab_size:",
        "a tokenizer exactly as large as the embedding is refused",
    ),
    M(
        "hf_adapter",
        "not-in-eval-mode",
        "type(hf_model).__name__,\n        )\n        self.eval()\n",
        "type(hf_model).__name__,\n        )\n",
        "the wrapped model is left in train mode (dropout on)",
    ),
    # -- Bits per byte and per character (lessons 01, 11, 12) --------------------------------
    M(
        "bits_per_byte",
        "bytes-are-characters",
        '"n_bytes": len(text.encode("utf-8"))',
        '"n_bytes": len(text)',
        "bytes counted as characters",
    ),
    M(
        "bits_per_byte",
        "bytes-of-every-text",
        'total_bytes, total_chars = sum(r["n_bytes"] for r in scored)',
        'total_bytes, total_chars = sum(r["n_bytes"] for r in records)',
        "the bytes of texts too short to score counted in the denominator",
    ),
    M(
        "bits_per_byte",
        "chars-are-bytes",
        '"bits_per_char": bits / total_chars',
        '"bits_per_char": bits / total_bytes',
        "bits per character divided by bytes",
    ),
    M(
        "bits_per_byte",
        "nats-not-bits",
        "    bits = total_nll / math.log(2)\n",
        "    bits = total_nll\n",
        "nats reported as bits",
    ),
    M(
        "bits_per_byte",
        "chars-of-every-text",
        'sum(r["n_chars"] for r in scored)',
        'sum(r["n_chars"] for r in records)',
        "the characters of texts too short to score counted in the denominator",
    ),
    # -- Multiple choice: completion log-likelihoods (lesson 07) --------------------------------
    M(
        "multiple_choice",
        "end-token-always",
        "windows.append((prompt + (answer if end_token else answer[:-1]), len(prompt)))",
        "windows.append((prompt + answer, len(prompt)))",
        "the closing EOS/PAD always scored (not lm-evaluation-harness's rule)",
    ),
    M(
        "multiple_choice",
        "scores-last-prompt-token",
        "windows.append((prompt + (answer if end_token else answer[:-1]), len(prompt)))",
        "windows.append((prompt + (answer if end_token else answer[:-1]), len(prompt) - 1))",
        "the last prompt token scored as part of the completion",
    ),
    M(
        "multiple_choice",
        "choices-misaligned",
        'return [[next(scored)[0] for _ in it["choices"]] for it in items]',
        'return [[next(scored)[0] for _ in it["choices"]][::-1] for it in items]',
        "each item's log-likelihoods returned in the wrong order",
    ),
    M(
        "multiple_choice",
        "calibration-tie-to-last",
        "top = max(range(len(probs)), key=probs.__getitem__)",
        "top = max(reversed(range(len(probs))), key=probs.__getitem__)",
        "a tie between choices goes to the last, not the first",
    ),
    # -- Multiple choice: acc and acc_norm (lesson 11) -----------------------------------------
    M(
        "choice_accuracy",
        "acc-norm-bytes",
        'per_char = [ll / len(c) for ll, c in zip(lls, it["choices"])]',
        'per_char = [ll / len(c.encode("utf-8")) for ll, c in zip(lls, it["choices"])]',
        "acc_norm divides by UTF-8 bytes instead of characters",
    ),
    M(
        "choice_accuracy",
        "acc-tie-to-last",
        "pred, pred_norm = lls.index(max(lls)), per_char.index(max(per_char))",
        "pred, pred_norm = len(lls) - 1 - lls[::-1].index(max(lls)), per_char.index(max(per_char))",
        "acc breaks a tie to the last choice",
    ),
    M(
        "choice_accuracy",
        "acc-norm-tie-to-last",
        "pred, pred_norm = lls.index(max(lls)), per_char.index(max(per_char))",
        "pred, pred_norm = lls.index(max(lls)), "
        "len(per_char) - 1 - per_char[::-1].index(max(per_char))",
        "acc_norm breaks a tie to the last choice",
    ),
    M(
        "choice_accuracy",
        "acc-norm-by-tokens",
        'per_char = [ll / len(c) for ll, c in zip(lls, it["choices"])]',
        'per_char = [ll / len(c.split()) for ll, c in zip(lls, it["choices"])]',
        "acc_norm divides by words instead of characters",
    ),
    M(
        "choice_accuracy",
        "disagreements-inverted",
        'disagree = sum(r["pred"] != r["pred_norm"] for r in records)',
        'disagree = sum(r["pred"] == r["pred_norm"] for r in records)',
        "disagreements count the agreements",
    ),
    # -- Lesson 12: segmentation and NFKC -----------------------------------------------------
    M(
        "segmentation_nfkc",
        "no-compatibility-ideographs",
        r"\u4e00-\u9fff\uf900-\ufaff\U00020000",
        r"\u4e00-\u9fff\U00020000",
        "compatibility ideographs (U+F900-FAFF) not split",
    ),
    M(
        "segmentation_nfkc",
        "no-kana",
        r'"([\u3040-\u30ff\u3400-\u4dbf',
        r'"([\u3400-\u4dbf',
        "kana not split",
    ),
    M(
        "segmentation_nfkc",
        "no-extension-b",
        r"\uf900-\ufaff\U00020000-\U0002fa1f])",
        r"\uf900-\ufaff])",
        "ideographs beyond the BMP not split",
    ),
    M(
        "segmentation_nfkc",
        "nfkc-after-lowercase",
        '(lambda text: normalise(unicodedata.normalize("NFKC", text)))',
        '(lambda text: unicodedata.normalize("NFKC", normalise(text)))',
        "NFKC applied after lowercasing ('5㎒' -> '5MHz', not '5mhz')",
    ),
    M(
        "segmentation_nfkc",
        "nfc-not-nfkc",
        'normalise(unicodedata.normalize("NFKC", text))',
        'normalise(unicodedata.normalize("NFC", text))',
        "NFC instead of NFKC",
    ),
    M(
        "segmentation_nfkc",
        "eval-drops-segmentation",
        "(f1_counts(pred, r, normalise_f1, segmentation, nfkc) for r in _references(ref))",
        '(f1_counts(pred, r, normalise_f1, "whitespace", nfkc) for r in _references(ref))',
        "token_f1_eval scores with whitespace whatever segmentation it is given",
    ),
    M(
        "segmentation_nfkc",
        "eval-drops-nfkc",
        "(f1_counts(pred, r, normalise_f1, segmentation, nfkc) for r in _references(ref))",
        "(f1_counts(pred, r, normalise_f1, segmentation, False) for r in _references(ref))",
        "token_f1_eval scores without NFKC whatever nfkc it is given",
    ),
    M(
        "segmentation_nfkc",
        "eval-records-without-nfkc",
        '"prediction_normalised": normalise(pred),',
        '"prediction_normalised": normalise_f1(pred),',
        "token_f1_eval records the prediction normalised without NFKC",
    ),
    M(
        "segmentation_nfkc",
        "hangul-split",
        r"\u4e00-\u9fff\uf900-\ufaff",
        r"\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff",
        "Hangul syllables split though Korean writes spaces between words",
    ),
    # -- Key redaction and the judge transport (lesson 09, appendix A) -----------------------
    M(
        "judge_transport",
        "redact-unformatted-message",
        "            text = record.getMessage()\n",
        "            text = str(record.msg)\n",
        "the log filter reads the format string, not the message with its arguments",
    ),
    M(
        "judge_transport",
        "redact-keeps-args",
        "                record.msg, record.args = text, None\n",
        "                record.msg = text\n",
        "the redacted message keeps its arguments (formatted twice: a broken record)",
    ),
    M(
        "judge_transport",
        "key-not-stripped",
        "    key = key.strip()\n    if key and",
        "    if key and",
        "a key read from a file keeps its trailing newline",
    ),
    M(
        "judge_transport",
        "body-redacted-after-clip",
        "        body = self._redact(response.text)  # before any clipping",
        "        body = response.text  # before any clipping",
        "the key is redacted only after the body was clipped (a cut key survives)",
    ),
    M(
        "judge_transport",
        "no-retry-on-429",
        "    {408, 429, 500, 502, 503, 504}",
        "    {408, 500, 502, 503, 504}",
        "a rate limit (429) is not retried",
    ),
    M(
        "judge_transport",
        "no-retry-on-other-5xx",
        "if response.status_code in RETRY_STATUSES or response.status_code >= 500:",
        "if response.status_code in RETRY_STATUSES:",
        "a 5xx outside the list (507, 599) is not retried",
    ),
    M(
        "judge_transport",
        "retry-after-uncapped",
        "wait = max(wait, min(retry_after, self.max_retry_after))",
        "wait = max(wait, retry_after)",
        "a server's Retry-After obeyed however long",
    ),
    M(
        "judge_transport",
        "retry-after-negative",
        "    return max(0.0, seconds) if math.isfinite(seconds) else None",
        "    return seconds if math.isfinite(seconds) else None",
        "a Retry-After date in the past gives a negative wait",
    ),
    M(
        "judge_transport",
        "failure-cached",
        '            self.stats["unscored"] += 1\n'
        "            raise JudgeUnavailable(self._redact(exc.reason)) from None\n",
        '            self.stats["unscored"] += 1\n'
        "            _write_verdict(path, (3, 'unavailable'))\n"
        "            raise JudgeUnavailable(self._redact(exc.reason)) from None\n",
        "a failed call leaves a verdict in the cache",
    ),
    M(
        "judge_transport",
        "cache-ignores-url",
        "return json.dumps([base_url, model, messages], sort_keys=True, ensure_ascii=False)",
        "return json.dumps([model, messages], sort_keys=True, ensure_ascii=False)",
        "the cache key leaves out the endpoint",
    ),
    M(
        "judge_transport",
        "cached-float-score",
        "    ok = _in_range(score, 1, 5, integer=True)\n",
        "    ok = _in_range(score, 1, 5)\n",
        "a cached score of 3.5 is served as a verdict",
    ),
    M(
        "judge_transport",
        "retries-counted-every-request",
        'self.stats["retries"] += attempt > 0',
        'self.stats["retries"] += 1',
        "the first request counted as a retry",
    ),
    M(
        "judge_transport",
        "backoff-not-exponential",
        "cap = min(self.max_backoff, self.backoff * 2**attempt)",
        "cap = min(self.max_backoff, self.backoff)",
        "the backoff does not grow between retries",
    ),
    # -- The protocol log (lesson 06) --------------------------------------------------------
    M(
        "protocol_log",
        "empty-log-refused",
        '        if text and not text.endswith("\\n"):',
        '        if not text.endswith("\\n"):',
        "an empty log file is refused as cut",
    ),
    M(
        "protocol_log",
        "chain-to-first",
        '"prev_sha256": entries[-1]["entry_sha256"] if entries else None,',
        '"prev_sha256": entries[0]["entry_sha256"] if entries else None,',
        "each entry chained to the first instead of the one before",
    ),
    M(
        "protocol_log",
        "chain-not-checked",
        'if entry.get("prev_sha256") != prev or _canonical_sha256(body) != entry.get(',
        "if _canonical_sha256(body) != entry.get(",
        "verify checks each line's own hash but not the chain",
    ),
    M(
        "protocol_log",
        "index-from-one",
        '            "index": len(entries),\n',
        '            "index": len(entries) + 1,\n',
        "entries numbered from 1",
    ),
    M(
        "protocol_log",
        "exposed-includes-freezes",
        'e["kind"] == "exposure" for i in e["cases"]',
        'e["kind"] in ("exposure", "freeze") for i in e["cases"]',
        "frozen (not yet revealed) cases counted as exposed",
    ),
    # -- Calibration bins (lesson 07) --------------------------------------------------------
    M(
        "calibration_bins",
        "one-outside-the-top-bin",
        "            members[min(b, n_bins - 1)].append(i)",
        "            members[b].append(i)",
        "confidence 1.0 falls outside the top bin",
    ),
    M(
        "calibration_bins",
        "bins-right-closed",
        'index = numpy.searchsorted(edges, conf, side="right") - 1',
        'index = numpy.searchsorted(edges, conf, side="left") - 1',
        "bins closed on the right: an edge value goes to the bin below",
    ),
    M(
        "calibration_bins",
        "int-multiplication-bins",
        '        index = numpy.searchsorted(edges, conf, side="right") - 1\n',
        "        index = numpy.array([int(c * n_bins) for c in conf])\n",
        "bins computed as int(c * n_bins) (0.29 * 100 = 28.999...)",
    ),
    M(
        "calibration_bins",
        "mass-remainder-dropped",
        "starts = [b * size + min(b, extra) for b in range(n_bins + 1)]",
        "starts = [b * size for b in range(n_bins + 1)]",
        "equal-mass bins drop the remainder",
    ),
    M(
        "calibration_bins",
        "ece-unweighted",
        'return sum(b["count"] * b["gap"] for b in full) / n, max(b["gap"] for b in full)',
        'return sum(b["gap"] for b in full) / len(full), max(b["gap"] for b in full)',
        "ECE as the unweighted mean over bins",
    ),
    M(
        "calibration_bins",
        "mass-bins-by-input-order",
        "    order = sorted(range(len(conf)), key=lambda i: conf[i])  # equal mass",
        "    order = list(range(len(conf)))  # equal mass",
        "equal-mass bins cut in input order, not by confidence",
    ),
    # -- Padding-capped batching (lesson 01) -------------------------------------------------
    M(
        "length_batches",
        "cap-against-last-row",
        "and lengths[i] >= (1 - max_padding) * lengths[batches[-1][0]]",
        "and lengths[i] >= (1 - max_padding) * lengths[batches[-1][-1]]",
        "the padding cap measured against the batch's last row, not its longest",
    ),
    M(
        "length_batches",
        "cap-strict",
        "and lengths[i] >= (1 - max_padding) * lengths[batches[-1][0]]",
        "and lengths[i] > (1 - max_padding) * lengths[batches[-1][0]]",
        "a row at exactly the cap is refused",
    ),
    M(
        "length_batches",
        "cap-inverted",
        "and lengths[i] >= (1 - max_padding) * lengths[batches[-1][0]]",
        "and lengths[i] >= max_padding * lengths[batches[-1][0]]",
        "max_padding read as the share of real tokens",
    ),
    M(
        "length_batches",
        "rows-overflow",
        "            and len(batches[-1]) < batch_size\n",
        "            and len(batches[-1]) <= batch_size\n",
        "a batch takes one row more than batch_size",
    ),
    M(
        "length_batches",
        "shortest-first",
        "    for i in sorted(range(len(lengths)), key=lambda i: -lengths[i]):",
        "    for i in sorted(range(len(lengths)), key=lambda i: lengths[i]):",
        "rows sorted shortest first, so the first row is not the longest",
    ),
    # -- Round 2: written after the first run's survivors were closed, before any test for them
    M(
        "hf_adapter",
        "encode-adds-specials",
        "        return self.hf.encode(text, add_special_tokens=False)\n",
        "        return self.hf.encode(text)\n",
        "encode lets the tokenizer's post-processor add its BOS to every text",
    ),
    M(
        "hf_adapter",
        "vocab-without-added-tokens",
        "        self.vocab_size = len(hf_tokenizer)\n",
        "        self.vocab_size = hf_tokenizer.vocab_size\n",
        "the vocabulary counted without added tokens (tokenizer.vocab_size, not len)",
    ),
    M(
        "hf_adapter",
        "load-drops-add-bos",
        "    model, tok = wrap_hf(hf_model, hf_tokenizer, add_bos=add_bos)\n",
        "    model, tok = wrap_hf(hf_model, hf_tokenizer)\n",
        "load_hf ignores add_bos",
    ),
    M(
        "hf_adapter",
        "decode-keeps-specials",
        "return self.hf.decode([int(i) for i in ids], skip_special_tokens=True)",
        "return self.hf.decode([int(i) for i in ids])",
        "decoded answers keep special tokens' text",
    ),
    M(
        "hf_adapter",
        "short-name-absolute",
        "        return folder.relative_to(ROOT).as_posix()\n",
        "        return folder.as_posix()\n",
        "a course folder named by its machine path in reports",
    ),
    M(
        "hf_adapter",
        "attention-mask-omitted",
        "self.hf(input_ids=ids, attention_mask=torch.ones_like(ids), use_cache=False)",
        "self.hf(input_ids=ids, use_cache=False)",
        "the all-ones attention mask left out",
        equivalent="a transformers model given no attention_mask attends to every position, "
        "which is what the all-ones mask says: the logits are the same",
    ),
    M(
        "multiple_choice",
        "empty-completion-allowed",
        '    if not end_token and "" in completions:\n'
        '        i = list(completions).index("")\n'
        '        raise ValueError(f"completions[{i}] is empty: with end_token=False no token is '
        'scored")\n',
        "",
        "an empty completion scores nothing and gets log-likelihood 0 (the best)",
    ),
    M(
        "multiple_choice",
        "confidence-without-end",
        "    scored = completion_logliks(model, tok, instructions, answers, end_token=True)\n",
        "    scored = completion_logliks(model, tok, instructions, answers)\n",
        "answer_confidences leaves out the closing token its docstring includes",
    ),
    M(
        "segmentation_nfkc",
        "no-extension-a",
        r"\u3040-\u30ff\u3400-\u4dbf\u4e00",
        r"\u3040-\u30ff\u4e00",
        "ideographs of extension A (U+3400-4DBF) not split",
    ),
    M(
        "judge_transport",
        "key-not-registered",
        "            _RedactKeys.keys.add(key)",
        "            pass",
        "the key never reaches the log filter",
    ),
    M(
        "judge_transport",
        "empty-choices-crash",
        "    except (KeyError, IndexError, TypeError):\n",
        "    except (KeyError, TypeError):\n",
        "a reply with an empty choices list crashes instead of being unscored",
    ),
    M(
        "protocol_log",
        "nan-written",
        "f.write(json.dumps(_json_safe(entry), sort_keys=True, allow_nan=False) + ",
        "f.write(json.dumps(entry, sort_keys=True) + ",
        "a NaN in an entry written as NaN (not strict JSON)",
    ),
    M(
        "calibration_bins",
        "gap-signed",
        '"gap": None if c is None else abs(a - c),',
        '"gap": None if c is None else a - c,',
        "a bin's gap signed: over- and under-confidence cancel",
    ),
    # -- Round 3: a held-out round, run once before any test was written for it -------------
    M(
        "hf_adapter",
        "template-attribute-only",
        '"chat_template" if getattr(hf_tokenizer, "chat_template", None) else "plain"',
        '"chat_template" if hasattr(hf_tokenizer, "chat_template") else "plain"',
        "a tokenizer counted as chatty because it has the attribute, though it is None",
    ),
    M(
        "hf_adapter",
        "answer-without-eos",
        "        return self.encode(self._prefix() + answer) + [self.eos_id]\n",
        "        return self.encode(self._prefix() + answer)\n",
        "encode_answer forgets the EOS that closes the answer",
    ),
    M(
        "hf_adapter",
        "answer-closed-by-pad",
        "        return self.encode(self._prefix() + answer) + [self.eos_id]\n",
        "        return self.encode(self._prefix() + answer) + [self.pad_id]\n",
        "an answer closed by the pad token (Qwen's differs from its EOS)",
    ),
    M(
        "hf_adapter",
        "missing-file-passes",
        '        actual = _sha256(path) if path.is_file() else "missing"\n',
        "        if not path.is_file():\n            continue\n        actual = _sha256(path)\n",
        "a file the manifest lists but the folder lacks passes the check",
    ),
    M(
        "multiple_choice",
        "gold-past-the-end",
        "ok = ok and _in_range(gold, 0, len(choices), open_high=True, integer=True)",
        "ok = ok and _in_range(gold, 0, len(choices), integer=True)",
        "gold == len(choices) accepted, then an IndexError deep inside",
    ),
    M(
        "segmentation_nfkc",
        "space-after-only",
        '    return _CJK_CHAR.sub(r" \\1 ", text).split()',
        '    return _CJK_CHAR.sub(r"\\1 ", text).split()',
        "a space put only after each CJK character: a Latin word before one sticks to it",
    ),
    M(
        "judge_transport",
        "key-may-hold-spaces",
        'if key and not re.fullmatch(r"[\\x21-\\x7e]+", key):',
        'if key and not re.fullmatch(r"[\\x20-\\x7e]+", key):',
        "a key with a space inside is sent (an invalid header, or a split credential)",
    ),
    M(
        "judge_transport",
        "retry-reason-unredacted",
        "            self._redact(why),\n",
        "            why,\n",
        "the retry warning's reason not redacted",
        equivalent="the reasons that reach _sleep are built by _attempt from a status code, the "
        "timeout setting or an exception's class name, never from the server's text, so they "
        "cannot hold the key",
    ),
    M(
        "calibration_bins",
        "width-edges-shifted",
        "            (b / n_bins, (b + 1) / n_bins)\n",
        "            ((b - 1) / n_bins, b / n_bins)\n",
        "each equal-width bin reports the edges of the bin below",
    ),
    # -- Intervals (Part 0, lesson 06): reported apart --------------------------------------
    M(
        "intervals",
        "aggregate-shared-seed",
        "            values, statistic=statistic, n_resamples=n_resamples, seed=seed + k\n",
        "            values, statistic=statistic, n_resamples=n_resamples, seed=seed\n",
        "every eval in the aggregate interval resampled with the same seed",
    ),
    M(
        "intervals",
        "robustness-wilson-counts-records",
        "        return [worst[i] for i in sorted(worst)], None",
        '        return [r["score"] for r in scored], None',
        "robustness's Wilson n counts records (clean + perturbed), not examples",
    ),
    M(
        "intervals",
        "wilson-centre",
        "    centre = (p + z * z / (2 * n)) / (1 + z * z / n)",
        "    centre = p",
        "the Wald centre instead of Wilson's",
    ),
    M(
        "intervals",
        "percentile-tail",
        "    tail = (1 - confidence) / 2",
        "    tail = 1 - confidence",
        "a one-sided tail for a two-sided interval",
    ),
    M(
        "intervals",
        "mcnemar-tail",
        "tail = sum(math.comb(n, i) for i in range(low + 1)) / 2**n",
        "tail = sum(math.comb(n, i) for i in range(low)) / 2**n",
        "McNemar's tail without its end point",
    ),
    M(
        "intervals",
        "cluster-draws-examples",
        "    return counts[:, index]  # (R, n)",
        "    return counts[:, index] if groups is None else bootstrap_weights(n, None, "
        "n_resamples, seed)",
        "the cluster bootstrap draws examples, not groups",
    ),
    M(
        "intervals",
        "perplexity-mean-of-ratios",
        "    return torch.exp((weights * values[:, 0]).sum(-1) / (weights * values[:, 1]).sum(-1))",
        "    return torch.exp((weights * values[:, 0] / values[:, 1]).sum(-1) / weights.sum(-1))",
        "a resample's perplexity as the mean of per-text ratios",
    ),
    M(
        "intervals",
        "paired-unscored-kept",
        '        if a["score"] is not None and b["score"] is not None\n',
        '        if a["score"] is not None or b["score"] is not None\n',
        "an example unscored in one result kept in the paired difference",
    ),
    M(
        "intervals",
        "paired-aggregate-unpaired",
        "            dist = resampled_values(r, n_resamples, seed + k)",
        "            dist = resampled_values(r, n_resamples, seed + k + (sign > 0))",
        "a and b resampled on different draws in the paired aggregate difference",
    ),
    M(
        "intervals",
        "success-rate-groups-any",
        "        outcomes = [all(g) for g in groups.values()]",
        "        outcomes = [any(g) for g in groups.values()]",
        "a source group counted a success when any of its records is",
    ),
]


def _tests_of(mutant):
    return [f"tests/{name}" for name in AREA_TESTS[mutant.area]]


def _status(mutant, source):
    count = source.count(mutant.old)
    return "stale" if count == 0 else "ambiguous" if count > 1 else None


def _prepare(folder, source):
    """A copy of the repository in folder: COPIED copied, evalcore.py = source, everything else
    linked file by file under real folders (a linked folder would resolve to the original, outside
    the copy's ROOT)."""
    for entry in ROOT.iterdir():
        if entry.name in SKIPPED or entry.name.startswith(".") or entry.suffix == ".egg-info":
            continue
        copy = shutil.copy2 if entry.name in COPIED else os.symlink
        if entry.is_dir():
            ignore = shutil.ignore_patterns("__pycache__")
            shutil.copytree(entry, folder / entry.name, ignore=ignore, copy_function=copy)
        else:
            copy(entry, folder / entry.name)
    (folder / TARGET).write_text(source, encoding="utf-8")


def _pytest(folder, tests, timeout, first_failure=True):
    """(outcome, seconds, failing tests, output tail) of pytest over tests in folder; outcome is
    passed, failed (a test failed, or the module broke collection), timeout or error."""
    env = {**os.environ, "PYTHONPATH": str(folder), "PYTHONDONTWRITEBYTECODE": "1"}
    command = [sys.executable, "-m", "pytest", "-q", "-rfE", "-o", "addopts="]
    command += ["-x"] * first_failure + ["-p", "no:cacheprovider", "-p", "no:nbval", *tests]
    start = time.monotonic()
    try:
        run = subprocess.run(
            command, cwd=folder, env=env, capture_output=True, text=True, timeout=timeout
        )
    except subprocess.TimeoutExpired:
        return "timeout", time.monotonic() - start, [], f"over {timeout:g} s"
    seconds = time.monotonic() - start
    failures = re.findall(r"^(?:FAILED|ERROR) (\S+)", run.stdout, re.M)
    if run.returncode == 0:
        return "passed", seconds, [], ""
    if run.returncode in (1, 2):
        return "failed", seconds, failures, run.stdout[-300:].strip()
    return "error", seconds, [], run.stdout[-500:] + run.stderr[-500:]


def _function_of(node):
    """The test function of a node id, without its parameters."""
    return node.split("[")[0]


def _imports_the_copy(folder):
    """True if python started in folder imports that folder's evalcore, not the installed one."""
    env = {**os.environ, "PYTHONPATH": str(folder)}
    probe = "import evalcore, pathlib; print(pathlib.Path(evalcore.__file__).resolve())"
    out = subprocess.run(
        [sys.executable, "-c", probe], cwd=folder, env=env, capture_output=True, text=True
    )
    return Path(out.stdout.strip()) == (folder / TARGET).resolve()


def run_mutant(mutant, source, timeout):
    """(verdict, seconds, detail) for one mutant: killed, survived, stale, ambiguous or error."""
    status = _status(mutant, source)
    if status:
        return status, 0.0, "its text is not in evalcore.py exactly once"
    mutated = source.replace(mutant.old, mutant.new)
    try:
        compile(mutated, TARGET, "exec")
    except SyntaxError as exc:
        return "error", 0.0, f"the mutant does not compile: {exc}"
    with tempfile.TemporaryDirectory(prefix="mutant-") as tmp:
        folder = Path(tmp)
        _prepare(folder, mutated)
        outcome, seconds, failures, tail = _pytest(folder, _tests_of(mutant), timeout)
    verdict = {"failed": "killed", "timeout": "killed", "passed": "survived"}.get(outcome, outcome)
    return verdict, seconds, failures[0] if failures else tail


def baseline(source, mutants, timeout):
    """Every test file the mutants use must pass on the unmutated code, in the same kind of copy."""
    tests = sorted({t for m in mutants for t in _tests_of(m)})
    with tempfile.TemporaryDirectory(prefix="mutant-baseline-") as tmp:
        folder = Path(tmp)
        _prepare(folder, source)
        if not _imports_the_copy(folder):
            sys.exit("the copy's evalcore.py is not the one imported: check PYTHONPATH")
        outcome, seconds, failures, tail = _pytest(folder, tests, timeout * 2)
    if outcome != "passed":
        sys.exit(f"the unmutated tests do not pass ({outcome}): {failures or tail}")
    print(f"baseline: {len(tests)} test files pass on the unmutated code ({seconds:.0f} s)")


def confirm_kills(rows, source, timeout):
    """A kill counts only if its test passes on the unmutated code: a test that fails now and then
    (a time limit under load) would kill mutants it cannot see. Mutants killed by such a test run
    once more; killed by one again, they are "unsure" and scored as survivors."""
    killers = sorted({_function_of(r[3]) for r in rows if r[1] == "killed" and "::" in r[3]})
    if not killers:
        return rows
    with tempfile.TemporaryDirectory(prefix="mutant-confirm-") as tmp:
        folder = Path(tmp)
        _prepare(folder, source)
        outcome, _, failures, tail = _pytest(folder, killers, timeout * 2, first_failure=False)
    if outcome not in ("passed", "failed"):
        sys.exit(f"the killing tests could not be rerun unmutated ({outcome}): {tail}")
    flaky = {_function_of(f) for f in failures}
    print(f"{len(killers)} killing tests rerun on the unmutated code: {len(flaky)} failed there")
    confirmed = []
    for m, verdict, seconds, detail in rows:
        if verdict == "killed" and _function_of(detail) in flaky:
            print(f"  {m.area}/{m.name} was killed by {detail}, which failed unmutated: rerun")
            verdict, seconds, detail = run_mutant(m, source, timeout)
            verdict = "unsure" if _function_of(detail) in flaky else verdict
        confirmed.append((m, verdict, seconds, detail))
    return confirmed


def _score(rows):
    """(killed, scored): equivalent mutants, stale and broken ones are not scored; unsure ones
    count as survivors."""
    scored = [r for r in rows if not r[0].equivalent and r[1] in ("killed", "survived", "unsure")]
    return sum(r[1] == "killed" for r in scored), len(scored)


def _percent(killed, scored):
    return f"{killed}/{scored} = {killed / scored:.1%}" if scored else "nothing scored"


def report(rows):
    """Per-mutant lines, then the score per area and over every area but SEPARATE."""
    for m, verdict, seconds, detail in rows:
        note = f"  [equivalent: {m.equivalent}]" if m.equivalent else ""
        shown = detail if verdict != "survived" else m.bug
        print(f"{verdict.upper():9} {m.area}/{m.name} ({seconds:.0f} s): {shown}{note}")
    print()
    for area in AREA_TESTS:
        part = [r for r in rows if r[0].area == area]
        if part:
            print(f"{area:18} {_percent(*_score(part))}")
    main_rows = [r for r in rows if r[0].area != SEPARATE]
    separate = [r for r in rows if r[0].area == SEPARATE]
    killed, scored = _score(main_rows)
    print(f"\nscore, every area but {SEPARATE}: {_percent(killed, scored)}")
    if separate:
        print(f"{SEPARATE} (reported apart): {_percent(*_score(separate))}")
    for verdict in ("survived", "unsure", "stale", "ambiguous", "error"):
        names = [
            f"{r[0].area}/{r[0].name}" for r in rows if r[1] == verdict and not r[0].equivalent
        ]
        if names:
            print(f"{verdict}: {', '.join(names)}")
    equivalent = [f"{r[0].area}/{r[0].name} ({r[1]})" for r in rows if r[0].equivalent]
    if equivalent:
        print(f"equivalent, not scored: {', '.join(equivalent)}")
    return killed, scored


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--area", action="append", choices=sorted(AREA_TESTS))
    parser.add_argument("--mutant", action="append", help="a mutant's name (repeatable)")
    parser.add_argument("--jobs", type=int, default=1, help="mutants run at once (default 1)")
    parser.add_argument("--timeout", type=float, default=300.0, help="seconds per mutant")
    parser.add_argument("--no-baseline", action="store_true", help="skip the unmutated run")
    parser.add_argument("--list", action="store_true", help="list the mutants and stop")
    parser.add_argument(
        "--min-score", type=float, default=0.0, help="exit 1 below this score (e.g. 0.95)"
    )
    args = parser.parse_args(argv)
    source = (ROOT / TARGET).read_text(encoding="utf-8")
    mutants = [
        m
        for m in MUTANTS
        if (not args.area or m.area in args.area) and (not args.mutant or m.name in args.mutant)
    ]
    if not mutants:
        parser.error("no mutant matches")
    if args.list:
        for m in mutants:
            state = _status(m, source) or ("equivalent" if m.equivalent else "ok")
            print(f"{m.area}/{m.name} [{state}]: {m.bug}")
        return 0
    if not args.no_baseline:
        baseline(source, mutants, args.timeout)
    print(f"{len(mutants)} mutants, {args.jobs} at a time\n", flush=True)
    with ThreadPoolExecutor(max(1, args.jobs)) as pool:
        results = pool.map(lambda m: (m, *run_mutant(m, source, args.timeout)), mutants)
        rows = []
        for row in results:
            rows.append(row)
            print(f"  {row[1]:9} {row[0].area}/{row[0].name} ({row[2]:.0f} s)", flush=True)
    print()
    rows = confirm_kills(rows, source, args.timeout)
    print()
    killed, scored = report(rows)
    return 1 if scored and killed / scored < args.min_score else 0


if __name__ == "__main__":
    sys.exit(main())
