"""Lesson 14: sampled answers from a served model (ec.sample through ServedModel.sample_answers),
against a stub server on loopback that behaves as vLLM's OpenAI-compatible server does: n choices
per request, stop strings cut, /health; and its fault, the engine that dies on a seeded sampling
request and answers every later request with HTTP 500 and /health with 503."""

import json
import threading
import time

import pytest

import evalcore as ec
from conftest import JSONHandler, loopback_server

FAST = dict(backoff=0.001, max_backoff=0.005, progress=False)
# What vLLM 0.32.0 answered here (2026-12-02) to the requests in flight when a seeded request with
# a chunked prefill killed its CPU engine ("CPU Generator does not use offset" in its log); the
# server process then exited. The message is vllm/v1/engine/exceptions.py's EngineDeadError.
ENGINE_DEAD = {
    "error": {
        "message": "EngineCore encountered an issue. See stack trace (above) for the root cause.",
        "type": "InternalServerError",
        "param": None,
        "code": 500,
    }
}


class ChatTok:  # what load_served sees in a chat tokenizer
    prompt_format, vocab_size = "chat_template", 259


class SamplingStub(JSONHandler):
    """/MODE/v1/...: "ok" answers n choices (listed last first, as their "index" says), cut at
    the request's stop strings; "dies-on-seed" is vLLM's CPU engine, dead after a seeded sampling
    request (then every request 500, /health 503); "500" fails every request while /health stays
    200; "gone" fails every request and has no /health (404)."""

    def do_GET(self):
        mode = self.path.strip("/").split("/")[0]
        if self.path.endswith("/health"):
            if mode == "gone":
                return self.send(404, {"detail": "Not Found"})
            return self.send(503 if self.server.dead else 200, b"")
        self.send(200, {"data": [{"id": "stub", "max_model_len": 64}]})

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        mode, srv = self.path.strip("/").split("/")[0], self.server
        with srv.lock:
            srv.payloads.append(body)
            srv.in_flight += 1
            srv.most_in_flight = max(srv.most_in_flight, srv.in_flight)
        try:
            time.sleep(0.02)  # long enough for requests to overlap
            if mode == "dies-on-seed" and "seed" in body and body.get("temperature", 0) > 0:
                srv.dead = True
                return self.send(500, ENGINE_DEAD)
            if srv.dead or mode in ("500", "gone"):
                return self.send(500, ENGINE_DEAD)
            self.send(200, {"choices": self.choices(body)[::-1]})
        finally:
            with srv.lock:
                srv.in_flight -= 1

    def choices(self, body):
        if "messages" in body:
            asked = body["messages"][-1]["content"]
        else:
            asked = ec.InstructionTokenizer().decode(body["prompt"])
        out = []
        for k in range(body.get("n", 1)):
            text = f"sample {k} of {asked}. More\nclass X"
            cuts = [text.find(s) for s in body.get("stop", []) if s in text]
            text = text[: min(cuts)] if cuts else text
            msg = {"message": {"role": "assistant", "content": text}} if "messages" in body else {}
            out.append({"index": k, **({"text": text} if not msg else msg)})
        return out


@pytest.fixture
def stub():
    state = dict(payloads=[], in_flight=0, most_in_flight=0, dead=False)
    with loopback_server(SamplingStub, **state) as srv:
        yield srv


def served(stub, mode, tok, **kw):
    return ec.ServedModel(f"{stub.base}/{mode}/v1", "stub", tok, **{"timeout": 2.0, **FAST, **kw})


QUESTIONS = ["one", "two", "three", "four", "five", "six"]


def test_served_samples_come_n_per_request_in_choice_order_with_requests_in_flight(stub):
    tok = ec.InstructionTokenizer()
    remote = served(stub, "ok", tok, max_in_flight=4)
    got = ec.sample(remote, tok, QUESTIONS, n=3, temperature=0.8, top_p=0.95, max_new_tokens=9)
    assert got == [[f"sample {k} of {q}. More\nclass X" for k in range(3)] for q in QUESTIONS]
    assert len(stub.payloads) == len(QUESTIONS) and stub.most_in_flight > 1
    for body in stub.payloads:
        assert "seed" not in body  # never: a seeded sampling request kills vLLM's CPU engine
        assert (body["n"], body["temperature"], body["top_p"], body["max_tokens"]) == (
            3,
            0.8,
            0.95,
            9,
        )
        assert "stop" not in body and body["stop_token_ids"] == sorted(tok.stop_ids)


def test_stop_strings_reach_the_server_for_sampled_and_greedy_answers(stub):
    stop = ["\nclass", "\ndef"]
    chat = served(stub, "ok", ChatTok())
    got = ec.sample(chat, ChatTok(), QUESTIONS[:2], n=2, stop=stop, max_new_tokens=9)
    assert got == [[f"sample {k} of {q}. More" for k in range(2)] for q in QUESTIONS[:2]]
    assert all(body["stop"] == stop and "messages" in body for body in stub.payloads)
    greedy = ec.generate(chat, ChatTok(), ["one"], max_new_tokens=9, stop=["More"])
    assert greedy == ["sample 0 of one. "]
    body = stub.payloads[-1]
    assert body["stop"] == ["More"] and body["temperature"] == 0 and "n" not in body


def test_greedy_requests_are_unchanged_without_stop_strings(stub):
    # recordings are filed under the request (ec.request_key): a greedy one must not change
    tok = ec.InstructionTokenizer()
    ec.generate(served(stub, "ok", tok), tok, ["one"], max_new_tokens=9)
    (body,) = stub.payloads
    assert set(body) == {"model", "temperature", "max_tokens", "prompt", "stop_token_ids"}


def test_a_reply_with_too_few_choices_leaves_the_prompt_unanswered(stub, monkeypatch):
    tok = ec.InstructionTokenizer()
    monkeypatch.setattr(SamplingStub, "choices", lambda self, body: [{"index": 0, "text": "x"}])
    remote = served(stub, "ok", tok, max_retries=0)
    with pytest.raises(ec.ServerUnavailable, match="1 choices, not 2 with a str text"):
        ec.sample(remote, tok, ["one"], n=2)
    (answer,) = ec.sample(remote, tok, ["one"], n=2, keep_unanswered=True)
    assert isinstance(answer, ec.Unanswered) and "1 choices, not 2" in answer.reason


def test_an_engine_killed_by_a_seeded_request_is_reported_dead_not_unanswered(stub):
    import httpx

    tok = ec.InstructionTokenizer()
    remote = served(stub, "dies-on-seed", tok, max_retries=1, max_in_flight=2)
    assert ec.sample(remote, tok, ["one"], n=2)[0][1] == "sample 1 of one. More\nclass X"
    killer = {"model": "stub", "prompt": [1, 2], "n": 2, "temperature": 0.8, "seed": 1}
    assert httpx.post(f"{stub.base}/dies-on-seed/v1/completions", json=killer).status_code == 500
    sent = len(stub.payloads)
    with pytest.raises(ec.ServerDead, match=r"is dead: a request failed \(HTTP 500; gave up after "
                       r"1 retries\) and GET /health gives 503.*restarted"):  # fmt: skip
        ec.sample(remote, tok, QUESTIONS * 4, n=2, keep_unanswered=True)
    assert len(stub.payloads) - sent < 2 * len(QUESTIONS)  # the rest were never sent
    sent = len(stub.payloads)
    with pytest.raises(ec.ServerDead):  # known dead: the next call fails at once, sends nothing
        ec.generate(remote, tok, ["one"], keep_unanswered=True)
    assert len(stub.payloads) == sent


def test_failures_on_a_live_server_stay_unanswered(stub):
    tok = ec.InstructionTokenizer()
    for mode in ("500", "gone"):  # /health 200, or none to ask: nothing says the server is dead
        remote = served(stub, mode, tok, max_retries=0)
        (answer,) = ec.sample(remote, tok, ["one"], n=2, keep_unanswered=True)
        assert isinstance(answer, ec.Unanswered) and "HTTP 500" in answer.reason


def test_a_dead_server_is_detected_when_nothing_answers(stub):
    tok = ec.InstructionTokenizer()
    remote = served(stub, "ok", tok, max_retries=1)
    stub.shutdown()  # the server stops listening, as vLLM's does after its engine died
    stub.server_close()
    with pytest.raises(
        ec.ServerDead, match=r"connection failed .* GET /health gives no connection"
    ):
        ec.sample(remote, tok, ["one"], n=2, keep_unanswered=True)


def test_a_replay_cannot_sample_and_a_stop_it_was_not_recorded_with_is_refused():
    rep = ec.Replay({"q": "a"}, "inst_resp", 48)
    tok = ec.InstructionTokenizer()
    with pytest.raises(ValueError, match="Replay gives greedy answers only: it cannot sample"):
        ec.sample(rep, tok, ["q"], n=2)
    with pytest.raises(ValueError, match="takes no stop=: it cannot honour it"):
        ec.generate(rep, tok, ["q"], stop=["\n"])
    assert ec.generate(rep, tok, ["q"]) == ["a"]


def test_samples_from_threads_share_one_served_model(stub):
    tok = ec.InstructionTokenizer()
    remote = served(stub, "ok", tok, max_in_flight=2)
    results = {}

    def run(q):
        results[q] = ec.sample(remote, tok, [q], n=2)

    threads = [threading.Thread(target=run, args=(q,)) for q in QUESTIONS]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert results == {
        q: [[f"sample {k} of {q}. More\nclass X" for k in range(2)]] for q in QUESTIONS
    }


def test_temperature_zero_asks_for_one_greedy_answer(stub):
    # vLLM answers n > 1 at temperature 0 with HTTP 400 ("n must be 1 when using greedy
    # sampling"): the greedy request generate sends, its answer n times
    tok = ec.InstructionTokenizer()
    remote = served(stub, "ok", tok)
    got = ec.sample(remote, tok, ["one"], n=3, temperature=0, max_new_tokens=9)
    assert got == [["sample 0 of one. More\nclass X"] * 3]
    (body,) = stub.payloads
    assert set(body) == {"model", "temperature", "max_tokens", "prompt", "stop_token_ids"}
