"""evalcore: the shared code of a hands-on course on evaluating language models.

Read top to bottom, it follows the lessons:
  1. a byte tokenizer with INST/RESP/PAD specials and TinyGPT, a GPT-2-style decoder;
  2. seeded training, a shipped checkpoint, and batched greedy decoding with a KV cache;
  3. the fixtures the lessons evaluate on;
  4. perplexity (the next-token shift, padding kept out of the denominator, rolling windows);
  5. exact match and its normalisation (plus the official SQuAD normalisation);
  6. token F1 over a bag of tokens;
  7. a deterministic mock LLM-as-judge;
  8. the weighted aggregate and its report (text table, pandas, strict JSON);
  9. the demo behind `python evalcore.py`.

Every eval takes any `model` with the call `model(ids) -> logits`, ids a LongTensor (B, T) and logits
(B, T, vocab_size), and returns an `EvalResult`. Inputs are moved to the model's own device.
"""

import argparse
import hashlib
import json
import math
import re
import string
import sys
import time
from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path

import torch
import torch.nn as nn
import torch.nn.functional as F

ROOT = Path(__file__).resolve().parent
FIXTURES_PATH = ROOT / "data" / "fixtures.json"
CHECKPOINT_PATH = ROOT / "checkpoints" / "tinygpt.pt"
EARLY_CHECKPOINT_PATH = ROOT / "checkpoints" / "tinygpt_early.pt"  # under-trained, for comparisons
SEED = 0


def _device_of(model):
    """The device of the model's parameters (CPU for a plain callable without any)."""
    params = getattr(model, "parameters", None)
    if params is None:
        return torch.device("cpu")
    first = next(iter(params()), None)
    return first.device if first is not None else torch.device("cpu")


class _eval_mode:
    """Run a torch module in eval mode (dropout off) and restore its mode afterwards."""

    def __init__(self, model):
        self.module = model if isinstance(model, nn.Module) else None

    def __enter__(self):
        self.was_training = self.module is not None and self.module.training
        if self.was_training:
            self.module.eval()

    def __exit__(self, *exc):
        if self.was_training:
            self.module.train()


def _exp(x):
    """math.exp that returns infinity instead of raising OverflowError."""
    return math.exp(x) if x < 709.0 else math.inf


def _positive_int(name, value):
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{name} must be a positive int, got {value!r}")
    return value


# ---------------------------------------------------------------------------------------------
# 1. Tokenizer and model
# ---------------------------------------------------------------------------------------------

class InstructionTokenizer:
    """Byte-level tokenizer: one id per UTF-8 byte (0-255) plus three specials above that range.

    Convention: a prompt is INST + instruction bytes + RESP; the answer's bytes follow and the
    answer ends at the first PAD. PAD is also what batches are padded with, and a padded position
    is never scored. Plain texts (the perplexity fixture) are bytes with no specials at all.
    """

    inst_id = 256
    resp_id = 257
    pad_id = 258
    vocab_size = 259

    def encode(self, text):
        """Text -> list of byte ids; decode(encode(s)) == s for any str."""
        if not isinstance(text, str):
            raise ValueError(f"text must be a str, got {type(text).__name__}: {text!r}")
        return list(text.encode("utf-8"))

    def decode(self, ids):
        """Byte ids -> text; specials are dropped, and a cut multi-byte character becomes U+FFFD."""
        ids = [int(i) for i in ids]
        bad = [i for i in ids if not 0 <= i < self.vocab_size]
        if bad:
            raise ValueError(f"ids must lie in [0, {self.vocab_size}), got {bad[:5]}")
        return bytes(i for i in ids if i < 256).decode("utf-8", errors="replace")

    def encode_prompt(self, instruction):
        """INST + instruction + RESP: what the model sees before it answers."""
        return [self.inst_id] + self.encode(instruction) + [self.resp_id]

    def encode_example(self, instruction, response):
        """A full training example: the prompt, the response, and the PAD that ends it."""
        return self.encode_prompt(instruction) + self.encode(response) + [self.pad_id]


@dataclass
class TinyGPTConfig:
    vocab_size: int = InstructionTokenizer.vocab_size
    d_model: int = 128  # width of the residual stream
    n_layer: int = 4  # transformer blocks
    n_head: int = 4  # attention heads per block; must divide d_model
    max_len: int = 256  # longest input the position table covers
    dropout: float = 0.0  # on embeddings and residual branches while training; off in eval mode


class CausalSelfAttention(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.n_head = cfg.n_head
        self.qkv = nn.Linear(cfg.d_model, 3 * cfg.d_model)
        self.proj = nn.Linear(cfg.d_model, cfg.d_model)
        self.drop = nn.Dropout(cfg.dropout)

    def forward(self, x, mask=None, cache=None):
        B, T, C = x.shape
        q, k, v = self.qkv(x).split(C, dim=2)
        q, k, v = (t.view(B, T, self.n_head, C // self.n_head).transpose(1, 2) for t in (q, k, v))
        if cache is not None:  # decoding: prepend the keys and values of earlier positions
            if "k" in cache:
                k, v = torch.cat([cache["k"], k], dim=2), torch.cat([cache["v"], v], dim=2)
            cache["k"], cache["v"] = k, v  # (B, H, S, hs)
        if mask is None:
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        else:
            y = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)  # mask (B, 1, T, S)
        return self.drop(self.proj(y.transpose(1, 2).reshape(B, T, C)))


class Block(nn.Module):
    """Pre-LayerNorm transformer block: x + attn(ln(x)), then x + mlp(ln(x))."""

    def __init__(self, cfg):
        super().__init__()
        self.ln1 = nn.LayerNorm(cfg.d_model)
        self.attn = CausalSelfAttention(cfg)
        self.ln2 = nn.LayerNorm(cfg.d_model)
        self.mlp = nn.Sequential(nn.Linear(cfg.d_model, 4 * cfg.d_model), nn.GELU(),
                                 nn.Linear(4 * cfg.d_model, cfg.d_model), nn.Dropout(cfg.dropout))

    def forward(self, x, mask=None, cache=None):
        x = x + self.attn(self.ln1(x), mask, cache)
        return x + self.mlp(self.ln2(x))


class TinyGPT(nn.Module):
    """A GPT-2-style decoder-only transformer; model(ids) -> logits (B, T, vocab_size)."""

    def __init__(self, vocab_size, d_model=128, n_layer=4, n_head=4, max_len=256, dropout=0.0):
        super().__init__()
        if d_model % n_head:
            raise ValueError(f"n_head={n_head} must divide d_model={d_model}")
        self.config = cfg = TinyGPTConfig(vocab_size, d_model, n_layer, n_head, max_len, dropout)
        self.tok_emb = nn.Embedding(vocab_size, d_model)
        self.pos_emb = nn.Embedding(max_len, d_model)
        self.drop = nn.Dropout(dropout)
        self.blocks = nn.ModuleList(Block(cfg) for _ in range(n_layer))
        self.ln_f = nn.LayerNorm(d_model)
        self.head = nn.Linear(d_model, vocab_size, bias=False)
        self.head.weight = self.tok_emb.weight  # tied: the same matrix reads and writes tokens
        self.apply(self._init_weights)

    @staticmethod
    def _init_weights(module):
        if isinstance(module, (nn.Linear, nn.Embedding)):
            nn.init.normal_(module.weight, mean=0.0, std=0.02)
        if isinstance(module, nn.Linear) and module.bias is not None:
            nn.init.zeros_(module.bias)

    def forward(self, ids, positions=None, mask=None, cache=None):
        """ids (B, T) -> logits (B, T, V); positions, mask and cache are for batched decoding."""
        B, T = ids.shape
        if positions is None:
            if T > self.config.max_len:
                raise ValueError(f"input length {T} exceeds max_len={self.config.max_len}")
            positions = torch.arange(T, device=ids.device)
        x = self.drop(self.tok_emb(ids) + self.pos_emb(positions))  # (B, T, C)
        for i, block in enumerate(self.blocks):
            x = block(x, mask, None if cache is None else cache[i])
        return self.head(self.ln_f(x))  # (B, T, V)

    def num_params(self):
        return sum(p.numel() for p in self.parameters())


# ---------------------------------------------------------------------------------------------
# 2. Training, the shipped checkpoint, and greedy decoding
# ---------------------------------------------------------------------------------------------

CHECKPOINT_STEPS = 900  # what `make checkpoint` trains; the demo trains less by default
EARLY_CHECKPOINT_STEPS = 150  # the under-trained checkpoint the lessons compare against
TRAIN_DROPOUT = 0.2  # without it the model memorises the training questions byte for byte


# Each training question is also asked in these framings, so that the model keys on the question's
# content rather than memorising its exact bytes (a 0.86M-parameter model memorises readily).
QUESTION_FRAMINGS = ("{q}", "Question: {q}", "Please answer this. {q}", "{bare}", "{lower}", "{bare}?")


def training_sequences(tok):
    """Token lists the model trains on: the fact statements as plain text, then the Q&A examples."""
    train = json.loads(FIXTURES_PATH.read_text(encoding="utf-8"))["train"]
    seqs = [tok.encode(s) for s in train["statements"]]
    for q, a in train["qa"]:
        framings = {f.format(q=q, bare=q.rstrip(".?!"), lower=q.lower()) for f in QUESTION_FRAMINGS}
        seqs += [tok.encode_example(framed, a) for framed in sorted(framings)]
    return seqs


def _training_batch(seqs, rows, pad_id):
    """Right-padded inputs and targets; a target at a padded position is -100 (ignored)."""
    width = max(len(seqs[r]) for r in rows)
    ids = torch.full((len(rows), width), pad_id, dtype=torch.long)
    targets = torch.full((len(rows), width - 1), -100, dtype=torch.long)
    for i, r in enumerate(rows):
        seq = torch.tensor(seqs[r])
        ids[i, :len(seq)] = seq
        targets[i, :len(seq) - 1] = seq[1:]
    return ids[:, :-1], targets  # (B, T), (B, T)


def train_tinygpt(steps=CHECKPOINT_STEPS, seed=SEED, batch_size=32, lr=3e-3, progress=True,
                  dropout=TRAIN_DROPOUT, **config):
    """Train a fresh TinyGPT on the training text, seeded; returns it in eval mode.

    The loss history is kept on `model.history` (one float per step)."""
    from tqdm.auto import tqdm

    _positive_int("steps", steps)
    _positive_int("batch_size", batch_size)
    tok = InstructionTokenizer()
    seqs = training_sequences(tok)
    torch.manual_seed(seed)
    model = TinyGPT(tok.vocab_size, dropout=dropout, **config)
    opt = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.01)
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=lr, total_steps=steps, pct_start=0.1)
    order = torch.Generator().manual_seed(seed)
    model.train()
    history = []
    bar = tqdm(range(steps), desc="training TinyGPT", disable=not progress, leave=False)
    for _ in bar:
        rows = torch.randint(len(seqs), (batch_size,), generator=order).tolist()
        ids, targets = _training_batch(seqs, rows, tok.pad_id)
        logits = model(ids)  # (B, T, V)
        loss = F.cross_entropy(logits.flatten(0, 1), targets.flatten(), ignore_index=-100)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        sched.step()
        history.append(loss.item())
        bar.set_postfix(loss=f"{loss.item():.3f}")
    model.eval()
    model.history = history
    return model


def _sha256(path):
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def save_checkpoint(model, path=CHECKPOINT_PATH, **info):
    """Write the weights and, beside them, a JSON manifest with their SHA-256 and `info`."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    torch.save({"config": asdict(model.config), "state_dict": model.state_dict()}, path)
    manifest = {"file": path.name, "sha256": _sha256(path), "config": asdict(model.config),
                "num_params": model.num_params(), **info}
    path.with_suffix(".json").write_text(json.dumps(manifest, indent=2) + "\n", encoding="utf-8")
    return manifest


def load_pretrained(path=CHECKPOINT_PATH):
    """The shipped, trained TinyGPT (eval mode, CPU), after checking the file's SHA-256."""
    path = Path(path)
    manifest_path = path.with_suffix(".json")
    if not path.is_file() or not manifest_path.is_file():
        raise FileNotFoundError(f"no checkpoint at {path} (with {manifest_path.name}); "
                                "run `make checkpoint` to rebuild it")
    expected = json.loads(manifest_path.read_text(encoding="utf-8"))["sha256"]
    actual = _sha256(path)
    if actual != expected:
        raise ValueError(f"checkpoint {path} has SHA-256 {actual}, manifest says {expected}: "
                         "the file is damaged (or a Git LFS pointer); run `make checkpoint`")
    blob = torch.load(path, map_location="cpu", weights_only=True)
    model = TinyGPT(**blob["config"])
    model.load_state_dict(blob["state_dict"])
    return model.eval()


def _stop_ids(tok):
    return {tok.inst_id, tok.resp_id, tok.pad_id}


@torch.no_grad()
def _generate_uncached(model, tok, instruction, max_new_tokens):
    """Greedy decoding for one prompt that re-runs the full forward at every step (the baseline)."""
    ids = torch.tensor([tok.encode_prompt(instruction)], device=_device_of(model))
    out = []
    for _ in range(max_new_tokens):
        nxt = int(model(ids)[0, -1].argmax())
        if nxt in _stop_ids(tok):
            break
        out.append(nxt)
        ids = torch.cat([ids, ids.new_tensor([[nxt]])], dim=1)
    return tok.decode(out)


def _check_instructions(instructions):
    if not isinstance(instructions, (list, tuple)) or not instructions:
        raise ValueError(f"instructions must be a non-empty list of str, got {instructions!r}")
    for i, s in enumerate(instructions):
        if not isinstance(s, str):
            raise ValueError(f"instructions[{i}] must be a str, got {s!r}")


@torch.no_grad()
def generate(model, tok, instructions, max_new_tokens=48):
    """Greedy answers, one str per instruction, decoded until PAD (or another special).

    TinyGPT is decoded in one left-padded batch with a KV cache; any other callable model is
    decoded one prompt at a time without a cache. Batched and one-at-a-time calls agree."""
    _check_instructions(instructions)
    _positive_int("max_new_tokens", max_new_tokens)
    with _eval_mode(model):
        if not isinstance(model, TinyGPT):
            return [_generate_uncached(model, tok, s, max_new_tokens) for s in instructions]
        return _generate_batched(model, tok, instructions, max_new_tokens)


def _generate_batched(model, tok, instructions, max_new_tokens):
    """Greedy decoding of all prompts at once: left padding, a KV cache, one token per step."""
    prompts = [tok.encode_prompt(s) for s in instructions]
    B, L = len(prompts), max(map(len, prompts))
    if L + max_new_tokens > model.config.max_len:
        raise ValueError(f"longest prompt ({L} tokens) + max_new_tokens={max_new_tokens} "
                         f"exceeds the model's max_len={model.config.max_len}")
    device = _device_of(model)
    ids = torch.full((B, L), tok.pad_id, dtype=torch.long)
    valid = torch.zeros(B, L, dtype=torch.bool)
    for i, p in enumerate(prompts):  # left padding: every prompt ends at column L - 1
        ids[i, L - len(p):] = torch.tensor(p)
        valid[i, L - len(p):] = True
    ids, valid = ids.to(device), valid.to(device)
    positions = (valid.long().cumsum(1) - 1).clamp(min=0)  # (B, L): each prompt starts at 0
    causal = torch.ones(L, L, dtype=torch.bool, device=device).tril()
    eye = torch.eye(L, dtype=torch.bool, device=device)  # a pad row sees itself, never NaN
    mask = ((causal & valid[:, None, :]) | eye)[:, None]  # (B, 1, L, L)
    cache = [{} for _ in model.blocks]
    logits = model(ids, positions, mask, cache)[:, -1]  # (B, V)
    stops = torch.tensor(sorted(_stop_ids(tok)), device=device)
    out, done = [], torch.zeros(B, dtype=torch.bool, device=device)
    for _ in range(max_new_tokens):
        nxt = logits.argmax(-1)  # (B,)
        done |= torch.isin(nxt, stops)
        if done.all():
            break
        out.append(torch.where(done, tok.pad_id, nxt))
        positions = positions[:, -1:] + 1
        valid = torch.cat([valid, torch.ones(B, 1, dtype=torch.bool, device=device)], dim=1)
        logits = model(nxt[:, None], positions, valid[:, None, None, :], cache)[:, -1]
    answers = torch.stack(out, dim=1).tolist() if out else [[] for _ in range(B)]
    return [tok.decode(t for t in row if t != tok.pad_id) for row in answers]


# ---------------------------------------------------------------------------------------------
# 3. Fixtures and results
# ---------------------------------------------------------------------------------------------

def load_fixtures():
    """The held-out data: "lm" (20 texts) and "em", "f1", "judge" (20 (instruction, reference) each).

    A reference is a str, or a list of acceptable answers. None of it appears verbatim in the
    training text, which states the same facts in other words."""
    raw = json.loads(FIXTURES_PATH.read_text(encoding="utf-8"))
    pairs = {k: [(q, a) for q, a in raw[k]] for k in ("em", "f1", "judge")}
    return {"lm": list(raw["lm"]), **pairs}


@dataclass
class EvalResult:
    name: str  # "perplexity", "exact_match", "token_f1" or "judge"
    value: float  # the metric in its natural unit
    per_example: list  # one dict per example, each with at least "score"
    extras: dict = field(default_factory=dict)  # eval-specific details


# ---------------------------------------------------------------------------------------------
# 4. Perplexity
# ---------------------------------------------------------------------------------------------

def rolling_windows(n_tokens, max_len, stride):
    """(begin, end, first_scored) for each window over a text of n_tokens tokens.

    A window feeds tokens[begin:end-1] and predicts tokens[begin+1:end]; it scores only the targets
    at positions >= first_scored, so every token after the first is scored exactly once."""
    if n_tokens <= max_len + 1:
        return [(0, n_tokens, 1)]
    windows, scored_up_to = [(0, max_len + 1, 1)], max_len + 1
    while scored_up_to < n_tokens:
        end = min(scored_up_to + stride, n_tokens)
        windows.append((end - max_len - 1, end, scored_up_to))
        scored_up_to = end
    return windows


def _check_texts(texts):
    if not isinstance(texts, (list, tuple)) or not texts:
        raise ValueError(f"texts must be a non-empty list of str, got {texts!r}")
    for i, t in enumerate(texts):
        if not isinstance(t, str):
            raise ValueError(f"texts[{i}] must be a str, got {t!r}")


@torch.no_grad()
def token_losses(model, windows, batch_size, pad_id):
    """Per-window next-token NLLs (nats), batched over length-sorted windows, in input order.

    windows: list of (token list, index of the first target to score)."""
    device = _device_of(model)
    order = sorted(range(len(windows)), key=lambda w: -len(windows[w][0]))
    losses = [None] * len(windows)
    for start in range(0, len(order), batch_size):
        rows = order[start:start + batch_size]
        width = len(windows[rows[0]][0])
        ids = torch.full((len(rows), width), pad_id, dtype=torch.long)
        for i, r in enumerate(rows):
            ids[i, :len(windows[r][0])] = torch.tensor(windows[r][0])
        ids = ids.to(device)
        with _eval_mode(model):
            logits = model(ids[:, :-1])  # (B, T-1, V): position i predicts token i+1
        targets = ids[:, 1:].to(logits.device)  # a plain function may answer on another device
        nll = F.cross_entropy(logits.float().transpose(1, 2), targets, reduction="none")  # (B, T-1)
        nll = nll.cpu().double()
        if nll.isnan().any():
            raise ValueError("the model's logits hold NaN: no loss can be computed")
        for i, r in enumerate(rows):
            tokens, first = windows[r]
            losses[r] = nll[i, first - 1:len(tokens) - 1]  # pads beyond the text never enter
    return losses


def perplexity_eval(model, tok, texts, max_len=None, batch_size=8, stride=None):
    """Corpus perplexity exp(total NLL / total scored tokens) over held-out texts, no BOS.

    max_len defaults to the model's own (model.config.max_len), else 256; stride to max_len // 2."""
    _check_texts(texts)
    model_len = getattr(getattr(model, "config", None), "max_len", None)
    max_len = (model_len or 256) if max_len is None else max_len
    _positive_int("max_len", max_len)
    _positive_int("batch_size", batch_size)
    stride = max_len // 2 if stride is None else stride
    _positive_int("stride", stride)
    if stride > max_len:
        raise ValueError(f"stride={stride} must not exceed max_len={max_len}")
    if model_len is not None and max_len > model_len:
        raise ValueError(f"max_len={max_len} exceeds the model's max_len={model_len}")
    encoded = [tok.encode(t) for t in texts]
    spans, windows = [], []  # spans[i]: text i's (begin, end, first_scored) windows
    for ids in encoded:
        spans.append(rolling_windows(len(ids), max_len, stride) if len(ids) >= 2 else [])
        windows += [(ids[b:e], first - b) for b, e, first in spans[-1]]
    losses = iter(token_losses(model, windows, batch_size, tok.pad_id))
    records, all_losses = [], []
    for i, ids in enumerate(encoded):
        if not spans[i]:
            records.append({"index": i, "text": texts[i], "score": None, "n_tokens": 0, "nll": None,
                            "note": f"{len(ids)} token(s): nothing to predict"})
            continue
        text_losses = torch.cat([next(losses) for _ in spans[i]])
        nll = float(text_losses.sum())
        records.append({"index": i, "text": texts[i], "score": _exp(nll / len(text_losses)),
                        "n_tokens": len(text_losses), "nll": nll,
                        "token_nll": text_losses.tolist()})
        all_losses.append(text_losses)
    if not all_losses:
        raise ValueError("texts holds no text of 2 or more tokens: nothing to score")
    flat = torch.cat(all_losses)
    total_nll, total_tokens = float(flat.sum()), len(flat)  # sum everything, divide once
    mean_nll = total_nll / total_tokens
    finite = flat[flat.isfinite()]  # a target given probability 0 costs infinity: counted apart
    top = max(1.0, math.ceil(float(finite.max()))) if len(finite) else 1.0
    counts, edges = torch.histogram(finite, bins=20, range=(0.0, top))
    extras = {"total_tokens": total_tokens, "total_nll": total_nll, "mean_nll": mean_nll,
              "bits_per_token": mean_nll / math.log(2), "max_len": max_len, "stride": stride,
              "histogram": {"edges": edges.tolist(), "counts": [int(c) for c in counts],
                            "infinite": len(flat) - len(finite)},
              "windows": [{"text": i, "begin": b, "end": e, "first_scored": f}
                          for i, s in enumerate(spans) for b, e, f in s]}
    return EvalResult("perplexity", _exp(mean_nll), records, extras)


# ---------------------------------------------------------------------------------------------
# 5. Exact match
# ---------------------------------------------------------------------------------------------

def _collapse(text):
    """Lowercase, strip, and turn every run of (Unicode) whitespace into one space."""
    return " ".join(text.lower().split())


def normalise_em(text):
    """Lowercase, strip, collapse whitespace, drop every trailing . ! ? (then strip again)."""
    return _collapse(text).rstrip(".!? ")


def _references(reference):
    """A reference as a non-empty list of acceptable answers."""
    refs = [reference] if isinstance(reference, str) else reference
    if not isinstance(refs, (list, tuple)) or not refs or not all(isinstance(r, str) for r in refs):
        raise ValueError(f"reference must be a str or a non-empty list of str, got {reference!r}")
    return list(refs)


def _check_prediction(prediction):
    if not isinstance(prediction, str):
        raise ValueError(f"prediction must be a str, got {prediction!r}")


def exact_match(prediction, reference, normalise=normalise_em):
    """1.0 if the normalised prediction equals a normalised reference (best over a list), else 0.0."""
    _check_prediction(prediction)
    pred = normalise(prediction)
    return max(float(pred == normalise(r)) for r in _references(reference))


def _check_pairs(pairs):
    if not isinstance(pairs, (list, tuple)) or not pairs:
        raise ValueError(f"pairs must be a non-empty list of (instruction, reference), got {pairs!r}")
    for i, pair in enumerate(pairs):
        if not isinstance(pair, (list, tuple)) or len(pair) != 2 or not isinstance(pair[0], str):
            raise ValueError(f"pairs[{i}] must be (instruction: str, reference), got {pair!r}")
        _references(pair[1])


def _answer(model, tok, pairs, max_new_tokens):
    _check_pairs(pairs)
    return generate(model, tok, [q for q, _ in pairs], max_new_tokens=max_new_tokens)


def _normalised_reference(reference, normalise):
    return normalise(reference) if isinstance(reference, str) else [normalise(r) for r in reference]


def exact_match_eval(model, tok, pairs, max_new_tokens=48):
    """Generate an answer per instruction and score it with exact_match; value is the mean."""
    records = []
    for (q, ref), pred in zip(pairs, _answer(model, tok, pairs, max_new_tokens)):
        records.append({"instruction": q, "prediction": pred, "reference": ref,
                        "score": exact_match(pred, ref), "prediction_normalised": normalise_em(pred),
                        "reference_normalised": _normalised_reference(ref, normalise_em)})
    return EvalResult("exact_match", _mean(r["score"] for r in records), records)


def _mean(values):
    values = list(values)
    return sum(values) / len(values)


# ---------------------------------------------------------------------------------------------
# 6. Token F1 (and the official SQuAD normalisation, for comparison)
# ---------------------------------------------------------------------------------------------

def normalise_f1(text):
    """Lowercase, strip, collapse whitespace; punctuation is kept ("Paris." != "Paris")."""
    return _collapse(text)


_ASCII_PUNCTUATION = frozenset(string.punctuation)  # the script's set: "。" and "“" are not in it


def normalise_squad(text):
    """The official SQuAD v2.0 script's normalize_answer: lower, drop ASCII punctuation, drop
    the articles a/an/the, collapse whitespace, in that order."""
    text = "".join(ch for ch in text.lower() if ch not in _ASCII_PUNCTUATION)
    text = re.sub(r"\b(a|an|the)\b", " ", text)
    return " ".join(text.split())


def f1_counts(prediction, reference, normalise=normalise_f1):
    """(overlap, prediction length, reference length) of the two bags of whitespace tokens."""
    pred, ref = normalise(prediction).split(), normalise(reference).split()
    return sum((Counter(pred) & Counter(ref)).values()), len(pred), len(ref)


def _f1_from_counts(overlap, n_pred, n_ref):
    if n_pred == 0 or n_ref == 0:
        return float(n_pred == n_ref)  # both empty: a vacuous match; one empty: nothing shared
    return 2 * overlap / (n_pred + n_ref)  # = harmonic mean of overlap/n_pred and overlap/n_ref


def token_f1(prediction, reference, normalise=normalise_f1):
    """Bag-of-tokens F1 between prediction and reference (best over a list of references)."""
    _check_prediction(prediction)
    return max(_f1_from_counts(*f1_counts(prediction, r, normalise)) for r in _references(reference))


def _precision_recall(overlap, n_pred, n_ref):
    if n_pred == 0 or n_ref == 0:
        return (float(n_pred == n_ref),) * 2
    return overlap / n_pred, overlap / n_ref


def token_f1_eval(model, tok, pairs, max_new_tokens=48):
    """Generate an answer per instruction and score it with token_f1; value is the mean."""
    records = []
    for (q, ref), pred in zip(pairs, _answer(model, tok, pairs, max_new_tokens)):
        counts = max((f1_counts(pred, r) for r in _references(ref)), key=lambda c: _f1_from_counts(*c))
        precision, recall = _precision_recall(*counts)
        records.append({"instruction": q, "prediction": pred, "reference": ref,
                        "score": _f1_from_counts(*counts), "precision": precision, "recall": recall,
                        "prediction_normalised": normalise_f1(pred),
                        "reference_normalised": _normalised_reference(ref, normalise_f1)})
    return EvalResult("token_f1", _mean(r["score"] for r in records), records)


# ---------------------------------------------------------------------------------------------
# 7. LLM-as-judge, mocked
# ---------------------------------------------------------------------------------------------

def mock_judge(instruction, prediction, reference):
    """A deterministic stand-in for an LLM judge: (score 1-5, one-line rationale) from EM and F1."""
    if exact_match(prediction, reference):
        return 5, "matches the reference after normalisation"
    f = token_f1(prediction, reference)
    if f >= 0.8:
        return 4, f"near match: token F1 {f:.2f} >= 0.8"
    if f >= 0.5:
        return 3, f"partly right: token F1 {f:.2f} in [0.5, 0.8)"
    if f >= 0.2:
        return 2, f"mostly wrong: token F1 {f:.2f} in [0.2, 0.5)"
    return 1, f"unrelated to the reference: token F1 {f:.2f} < 0.2"


def _check_verdict(verdict, index):
    """A judge's (score, rationale) or a ValueError naming the example: never averaged in broken."""
    if not isinstance(verdict, (tuple, list)) or len(verdict) != 2:
        raise ValueError(f"judge_fn returned {verdict!r} for example {index}; "
                         "expected (score, rationale)")
    score, rationale = verdict
    if (isinstance(score, bool) or not isinstance(score, (int, float))
            or not math.isfinite(score) or not 1 <= score <= 5):
        raise ValueError(f"judge_fn gave score {score!r} for example {index}; "
                         "expected an int or float in [1, 5]")
    if not isinstance(rationale, str):
        raise ValueError(f"judge_fn gave rationale {rationale!r} for example {index}; expected a str")
    return score, rationale


def judge_eval(model, tok, pairs, judge_fn=None, max_new_tokens=48):
    """Generate an answer per instruction and have judge_fn (default mock_judge) score it 1-5."""
    judge_fn = mock_judge if judge_fn is None else judge_fn
    records = []
    for i, ((q, ref), pred) in enumerate(zip(pairs, _answer(model, tok, pairs, max_new_tokens))):
        score, rationale = _check_verdict(judge_fn(q, pred, ref), i)
        records.append({"instruction": q, "prediction": pred, "reference": ref,
                        "score": score, "rationale": rationale})
    return EvalResult("judge", _mean(r["score"] for r in records), records)


# ---------------------------------------------------------------------------------------------
# 8. The weighted aggregate and the report
# ---------------------------------------------------------------------------------------------

DEFAULT_WEIGHTS = {"perplexity": 0.2, "exact_match": 0.3, "token_f1": 0.3, "judge": 0.2}
SCHEMA_VERSION = 1


def _check_eval_name(name, where):
    if name not in DEFAULT_WEIGHTS:
        raise ValueError(f"unknown eval name {name!r} in {where}; known: {sorted(DEFAULT_WEIGHTS)}")


def normalise_metric(name, value):
    """Map an eval's value to [0, 1], higher is better: perplexity -> 1 / (1 + ln ppl),
    judge -> value / 5, exact_match and token_f1 as they are; NaN -> 0."""
    _check_eval_name(name, "normalise_metric")
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValueError(f"value for {name!r} must be a number, got {value!r}")
    if math.isnan(value):
        return 0.0
    if name == "perplexity":
        if value <= 0 or math.isinf(value):
            return 0.0
        score = 1.0 if value <= 1 else 1.0 / (1.0 + math.log(value))  # ppl < 1 is no distribution
    elif name == "judge":
        score = value / 5
    else:
        score = value
    return min(1.0, max(0.0, float(score)))


def _check_weights(weights, present):
    for name, w in weights.items():
        _check_eval_name(name, "weights")
        if isinstance(w, bool) or not isinstance(w, (int, float)) or not w >= 0 or math.isinf(w):
            raise ValueError(f"weight for {name!r} must be a finite number >= 0, got {w!r}")
    missing = [n for n in present if n not in weights]
    if missing:
        raise ValueError(f"no weight given for eval(s) {missing}; weights has {sorted(weights)}")
    total = sum(weights[n] for n in present)
    if total <= 0:
        raise ValueError(f"weights sum to {total} over the evals present {present}: nothing to average")
    return {n: weights[n] / total for n in present}


def aggregate(results, weights=None, meta=None):
    """Weighted mean of the normalised eval values, weights renormalised over the evals present."""
    results = list(results) if isinstance(results, (list, tuple)) else None
    if not results or not all(isinstance(r, EvalResult) for r in results):
        raise ValueError("results must be a non-empty list of EvalResult")
    names = [r.name for r in results]
    for name in names:
        _check_eval_name(name, "results")
    dupes = sorted({n for n in names if names.count(n) > 1})
    if dupes:
        raise ValueError(f"results holds {dupes} more than once")
    if weights is not None and not isinstance(weights, dict):
        raise ValueError(f"weights must be a dict of eval name -> weight, got {weights!r}")
    used = _check_weights(DEFAULT_WEIGHTS if weights is None else weights, names)
    score = sum(used[r.name] * normalise_metric(r.name, r.value) for r in results)
    return FinalReport(score, used, results, dict(meta or {}))


def _json_safe(obj):
    """A copy of obj that strict JSON accepts: NaN and infinity become None, tuples lists."""
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, dict):
        return {str(k): _json_safe(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_json_safe(v) for v in obj]
    if isinstance(obj, torch.Tensor):
        return _json_safe(obj.tolist())
    if obj is None or isinstance(obj, (str, int, bool)):
        return obj
    if hasattr(obj, "item"):  # numpy scalars
        return _json_safe(obj.item())
    raise ValueError(f"cannot write {type(obj).__name__} {obj!r} to JSON")


def _scored(records):
    return [r for r in records if r.get("score") is not None]


@dataclass
class FinalReport:
    score: float  # the aggregate, in [0, 1]
    weights: dict  # renormalised over the evals present, as used
    results: list  # the EvalResults, in the order given
    meta: dict = field(default_factory=dict)  # seed, versions, model size, timings

    def normalised(self):
        return {r.name: normalise_metric(r.name, r.value) for r in self.results}

    def to_dict(self):
        """The report as JSON-safe Python objects, with stable keys."""
        norm = self.normalised()
        evals = {r.name: {"value": r.value, "normalised": norm[r.name], "weight": self.weights[r.name],
                          "n": len(_scored(r.per_example)), "extras": r.extras,
                          "per_example": r.per_example} for r in self.results}
        return _json_safe({"schema_version": SCHEMA_VERSION, "aggregate": self.score,
                           "weights": self.weights, "evals": evals, "meta": self.meta})

    def to_json(self, path):
        """Write strict JSON (no NaN, no Infinity) to path; returns the path."""
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(self.to_dict(), indent=2, allow_nan=False) + "\n", encoding="utf-8")
        return path

    def to_frame(self):
        """One row per example across evals: eval, index, score, normalised score and the text fields."""
        import pandas as pd

        rows = []
        for r in self.results:
            for i, rec in enumerate(r.per_example):
                row = {"eval": r.name, "index": i}
                row.update({k: v for k, v in rec.items() if k != "token_nll" and k != "index"})
                row["normalised"] = (None if rec.get("score") is None
                                     else normalise_metric(r.name, rec["score"]))
                rows.append(row)
        return pd.DataFrame(rows)

    def table(self, worst=3):
        """Text table: the aggregate, a row per eval, then each eval's `worst` lowest examples."""
        norm = self.normalised()
        lines = [f"aggregate score: {self.score:.4f}  (weighted mean of normalised values, 0-1)", "",
                 f"{'eval':<12} {'value':>10} {'normalised':>10} {'weight':>7} {'n':>4}"]
        for r in self.results:
            lines.append(f"{r.name:<12} {r.value:>10.4g} {norm[r.name]:>10.4f} "
                         f"{self.weights[r.name]:>7.3f} {len(_scored(r.per_example)):>4}")
        lines += ["", "worst examples:"]
        for r in self.results:
            ranked = sorted(_scored(r.per_example), key=lambda e: normalise_metric(r.name, e["score"]))
            for e in ranked[:worst]:
                what = e.get("prediction", e.get("text", ""))
                lines.append(f"  {r.name:<12} score {e['score']:<8.4g} {what[:60]!r}")
        return "\n".join(lines)


# ---------------------------------------------------------------------------------------------
# 9. Evidence and protocol (lesson 06): reference loss in bits, wrappers, rubrics, raters, a frozen protocol
# ---------------------------------------------------------------------------------------------


# ---------------------------------------------------------------------------------------------
# 10. Calibration (lesson 07)
# ---------------------------------------------------------------------------------------------


# ---------------------------------------------------------------------------------------------
# 11. Robustness under perturbation (lesson 08)
# ---------------------------------------------------------------------------------------------


# ---------------------------------------------------------------------------------------------
# 12. A real judge over HTTP (lesson 09)
# ---------------------------------------------------------------------------------------------


# ---------------------------------------------------------------------------------------------
# 13. Learning aggregate weights (lesson 10)
# ---------------------------------------------------------------------------------------------


# ---------------------------------------------------------------------------------------------
# 14. The demo: train briefly, run every eval, report
# ---------------------------------------------------------------------------------------------

DEMO_STEPS = 450  # half the checkpoint's training, so the demo stays near a minute on 2 cores


def plot_report(report, path=None):
    """Bar chart of each eval's normalised value with the aggregate, beside the per-example spread."""
    import matplotlib

    if path is not None:
        matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    norm = report.normalised()
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 4))
    ax1.bar(list(norm), list(norm.values()), color="tab:blue")
    ax1.axhline(report.score, color="tab:red", linestyle="--", label=f"aggregate {report.score:.3f}")
    ax1.set(ylim=(0, 1), ylabel="normalised value (0-1, higher is better)", title="Per-eval scores")
    ax1.legend()
    frame = report.to_frame().dropna(subset=["normalised"])
    groups = [frame.loc[frame["eval"] == n, "normalised"].to_numpy() for n in norm]
    ax2.boxplot(groups, tick_labels=list(norm))
    for x, g in enumerate(groups, start=1):
        ax2.scatter([x] * len(g), g, alpha=0.5, s=14, color="tab:gray")
    ax2.set(ylim=(-0.02, 1.02), ylabel="normalised per-example score", title="Per-example spread")
    fig.tight_layout()
    if path is not None:
        fig.savefig(path, dpi=100)
        plt.close(fig)
    return fig


def _versions():
    import platform

    return {"python": platform.python_version(), "torch": torch.__version__}


def run_demo(seed=SEED, steps=DEMO_STEPS, out="reports/report.json", progress=True):
    """Train TinyGPT briefly, run the four evals, print the table, write JSON and a PNG chart."""
    if Path(out).suffix != ".json":
        raise ValueError(f"out must name a .json file (the chart goes beside it), got {out!r}")
    t0 = time.perf_counter()
    tok = InstructionTokenizer()
    model = train_tinygpt(steps=steps, seed=seed, progress=progress)
    timings = {"train_s": time.perf_counter() - t0}
    fx = load_fixtures()
    results = []
    for name, run in [("perplexity", lambda: perplexity_eval(model, tok, fx["lm"])),
                      ("exact_match", lambda: exact_match_eval(model, tok, fx["em"])),
                      ("token_f1", lambda: token_f1_eval(model, tok, fx["f1"])),
                      ("judge", lambda: judge_eval(model, tok, fx["judge"]))]:
        t = time.perf_counter()
        results.append(run())
        timings[f"{name}_s"] = time.perf_counter() - t
    timings["total_s"] = time.perf_counter() - t0
    meta = {"seed": seed, "steps": steps, "versions": _versions(),
            "model": {"num_params": model.num_params(), **asdict(model.config)}, "timings": timings}
    report = aggregate(results, meta=meta)
    print(report.table())
    path = report.to_json(out)
    plot_report(report, path.with_suffix(".png"))
    print(f"\nwrote {path} and {path.with_suffix('.png')}")
    return report


def build_checkpoint(seed=SEED, steps=CHECKPOINT_STEPS, path=CHECKPOINT_PATH):
    """Retrain a shipped checkpoint from the seed and write it with its manifest."""
    t0 = time.perf_counter()
    model = train_tinygpt(steps=steps, seed=seed)
    manifest = save_checkpoint(model, path, seed=seed, steps=steps,
                               final_loss=round(sum(model.history[-20:]) / 20, 4),
                               train_s=round(time.perf_counter() - t0, 1), versions=_versions())
    print(json.dumps(manifest, indent=2))
    return manifest


def build_checkpoints(seed=SEED):
    """Retrain both shipped checkpoints, the main one and the under-trained one (`make checkpoint`)."""
    return [build_checkpoint(seed, CHECKPOINT_STEPS, CHECKPOINT_PATH),
            build_checkpoint(seed, EARLY_CHECKPOINT_STEPS, EARLY_CHECKPOINT_PATH)]


def main(argv=None):
    parser = argparse.ArgumentParser(description="Train TinyGPT briefly, run every eval, report.")
    parser.add_argument("command", nargs="?", default="demo", choices=["demo", "checkpoint"],
                        help="demo (default): train, evaluate, report; checkpoint: rebuild the "
                             "shipped checkpoint")
    parser.add_argument("--seed", type=int, default=SEED)
    parser.add_argument("--steps", type=int, default=None, help="training steps")
    parser.add_argument("--out", default="reports/report.json", help="where the JSON report goes")
    args = parser.parse_args(argv)
    try:
        if args.command == "checkpoint":
            build_checkpoints(args.seed)
        else:
            run_demo(args.seed, DEMO_STEPS if args.steps is None else args.steps, args.out)
    except (ValueError, OSError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
