"""The Files + Batch APIs of the loopback stand-in, driven by the real openai SDK over real HTTP."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import openai
import pytest
from openai.types import Batch
from openai.types.chat import ChatCompletion

from arcticqa.standins.replies import Drop, Fault, Hang, Reply, Response, by_role
from arcticqa.standins.server import FakeOpenAIServer

TERMINAL = {"completed", "failed", "expired", "cancelled"}


def _line(custom_id: str, content: str = "hello", model: str = "fake-model") -> dict[str, Any]:
    return {"custom_id": custom_id, "method": "POST", "url": "/v1/chat/completions",
            "body": {"model": model, "messages": [{"role": "user", "content": content}]}}


def _jsonl(lines: list[dict[str, Any]]) -> bytes:
    return b"".join(json.dumps(line).encode() + b"\n" for line in lines)


def _client(srv: FakeOpenAIServer) -> openai.OpenAI:
    return openai.OpenAI(base_url=srv.base_url, api_key="test", max_retries=0, timeout=5.0)


def _submit(client: openai.OpenAI, lines: list[dict[str, Any]]) -> Batch:
    upload = client.files.create(file=("input.jsonl", _jsonl(lines)), purpose="batch")
    return client.batches.create(input_file_id=upload.id, endpoint="/v1/chat/completions",
                                 completion_window="24h", metadata={"run": "test"})


def _wait(client: openai.OpenAI, batch_id: str, timeout: float = 4.0) -> Batch:
    deadline = time.monotonic() + timeout
    while True:
        batch = client.batches.retrieve(batch_id)
        if batch.status in TERMINAL:
            return batch
        assert time.monotonic() < deadline, f"batch stuck in {batch.status}"
        time.sleep(0.005)


def _entries(client: openai.OpenAI, file_id: str | None) -> list[dict[str, Any]]:
    assert file_id is not None
    return [json.loads(text) for text in client.files.content(file_id).content.splitlines()]


@pytest.fixture
def srv() -> Iterator[FakeOpenAIServer]:
    def echo(body: dict[str, Any], headers: Any) -> Reply:
        return Reply(f"echo:{body['messages'][-1]['content']}")

    with FakeOpenAIServer(echo) as server:
        yield server


def test_upload_create_poll_download_round_trip(srv: FakeOpenAIServer, tmp_path: Path) -> None:
    client = _client(srv)
    lines = [_line(f"q{i}", content=f"question {i}") for i in range(5)]
    path = tmp_path / "input.jsonl"
    path.write_bytes(_jsonl(lines))
    with path.open("rb") as fh:
        upload = client.files.create(file=fh, purpose="batch")
    assert (upload.object, upload.purpose, upload.status) == ("file", "batch", "processed")
    assert upload.bytes == path.stat().st_size and upload.filename == "input.jsonl"
    assert client.files.retrieve(upload.id) == upload
    assert client.files.content(upload.id).content == path.read_bytes()

    created = client.batches.create(input_file_id=upload.id, endpoint="/v1/chat/completions",
                                    completion_window="24h", metadata={"run": "t1"})
    assert created.id.startswith("batch_") and created.status == "validating"
    assert created.metadata == {"run": "t1"} and created.input_file_id == upload.id

    done = _wait(client, created.id)
    assert done.status == "completed" and done.error_file_id is None and done.errors is None
    assert done.request_counts is not None
    assert (done.request_counts.total, done.request_counts.completed, done.request_counts.failed) == (5, 5, 0)
    assert done.in_progress_at and done.finalizing_at and done.completed_at

    output_meta = client.files.retrieve(done.output_file_id or "")
    assert output_meta.purpose == "batch_output"
    entries = _entries(client, done.output_file_id)
    assert sorted(e["custom_id"] for e in entries) == [f"q{i}" for i in range(5)]
    # the server must not hand back input order, so clients are forced to join on custom_id
    assert [e["custom_id"] for e in entries] != [f"q{i}" for i in range(5)]
    for entry in entries:
        assert entry["id"].startswith("batch_req_") and entry["error"] is None
        assert entry["response"]["status_code"] == 200
        assert entry["response"]["request_id"].startswith("req_")
        completion = ChatCompletion.model_validate(entry["response"]["body"])
        number = entry["custom_id"][1:]
        assert completion.choices[0].message.content == f"echo:question {number}"
        assert completion.model == "fake-model" and completion.usage is not None
    assert len({e["response"]["body"]["id"] for e in entries}) == 5
    assert srv.batches_created == 1 and srv.files_created == 1
    assert [line["custom_id"] for line in srv.batch_lines] == [f"q{i}" for i in range(5)]
    assert srv.batch_status_polls >= 1
    assert srv.requests == []  # batch lines are not live chat requests


def test_batch_and_live_payloads_are_built_the_same_way(srv: FakeOpenAIServer) -> None:
    client = _client(srv)
    live = client.chat.completions.with_raw_response.create(
        model="fake-model", messages=[{"role": "user", "content": "x"}])
    done = _wait(client, _submit(client, [_line("only", content="x")]).id)
    batch_body = _entries(client, done.output_file_id)[0]["response"]["body"]
    live_body = live.http_response.json()
    assert live_body.pop("id") == "chatcmpl-fake-1" and batch_body.pop("id") == "chatcmpl-fake-2"
    assert batch_body == live_body
    assert srv.completions == 2


def test_fault_drop_and_hang_lines_land_where_openai_puts_them() -> None:
    scripts: dict[str, Response] = {
        "ok": Reply("fine"),
        "limited": Fault(429, body='{"error": {"message": "slow down", "type": "rate_limit"}}'),
        "broken": Fault(500, body="not json"),
        "dropped": Drop(),
        "hung": Hang(30.0),
    }
    with FakeOpenAIServer(by_role(scripts)) as srv:
        client = _client(srv)
        started = time.monotonic()
        done = _wait(client, _submit(client, [_line(f"{role}|1") for role in scripts]).id)
        assert time.monotonic() - started < 2.0, "a Hang line must not stall the batch"
        assert done.status == "completed"
        assert done.request_counts is not None
        assert (done.request_counts.total, done.request_counts.completed, done.request_counts.failed) == (5, 1, 4)
        output = {e["custom_id"]: e for e in _entries(client, done.output_file_id)}
        errors = {e["custom_id"]: e for e in _entries(client, done.error_file_id)}
    assert set(output) == {"ok|1", "limited|1", "broken|1"} and set(errors) == {"dropped|1", "hung|1"}
    assert output["ok|1"]["response"]["body"]["choices"][0]["message"]["content"] == "fine"
    assert output["limited|1"]["response"]["status_code"] == 429
    assert output["limited|1"]["response"]["body"] == {"error": {"message": "slow down", "type": "rate_limit"}}
    # a malformed fault body cannot be embedded as JSON, so it arrives as the raw text
    assert (output["broken|1"]["response"]["status_code"], output["broken|1"]["response"]["body"]) == (
        500, "not json")
    for entry in errors.values():
        assert entry["response"] is None and entry["error"]["code"] == "server_error"
        assert entry["error"]["message"]


def test_role_prefix_of_custom_id_reaches_the_responder() -> None:
    seen: list[dict[str, Any]] = []

    def judge(body: dict[str, Any]) -> Reply:
        seen.append(body)
        return Reply("judged")

    with FakeOpenAIServer(by_role({"verifier": Reply("verified"), "judge": judge})) as srv:
        client = _client(srv)
        lines = [_line("verifier|a"), _line("judge|b"), _line("nobody")]
        done = _wait(client, _submit(client, lines).id)
        output = {e["custom_id"]: e["response"] for e in _entries(client, done.output_file_id)}
    assert output["verifier|a"]["body"]["choices"][0]["message"]["content"] == "verified"
    assert output["judge|b"]["body"]["choices"][0]["message"]["content"] == "judged"
    assert seen == [lines[1]["body"]]
    # without a "|" there is no role header, and by_role falls back to the model name: no script
    assert output["nobody"]["status_code"] == 400


def test_injected_failure_and_expiry_follow_batch_sequence_numbers() -> None:
    fates = {1: "failed", 2: "expired"}
    with FakeOpenAIServer(lambda body, headers: Reply("ok"), batch_fate=fates.get) as srv:
        client = _client(srv)
        lines = [_line(f"q{i}") for i in range(4)]
        failed = _wait(client, _submit(client, lines).id)
        assert failed.status == "failed" and failed.failed_at
        assert failed.output_file_id is None and failed.error_file_id is None
        assert failed.errors is not None and failed.errors.data is not None
        assert [(e.code, e.message) for e in failed.errors.data] == [("injected", "injected batch failure")]

        expired = _wait(client, _submit(client, lines).id)
        assert expired.status == "expired" and expired.expired_at and expired.completed_at is None
        answered = _entries(client, expired.output_file_id)
        unanswered = _entries(client, expired.error_file_id)
        assert sorted(e["custom_id"] for e in answered) == ["q0", "q1"]
        assert sorted(e["custom_id"] for e in unanswered) == ["q2", "q3"]
        assert {e["error"]["code"] for e in unanswered} == {"batch_expired"}
        assert expired.request_counts is not None
        assert (expired.request_counts.completed, expired.request_counts.failed) == (2, 2)

        normal = _wait(client, _submit(client, lines).id)
        assert normal.status == "completed"
        assert srv.batches_created == 3
        # the failed batch never reached the responder; the expired one only for its first half
        assert [line["custom_id"] for line in srv.batch_lines] == ["q0", "q1", "q0", "q1", "q2", "q3"]


def test_batch_latency_keeps_the_batch_in_progress() -> None:
    with FakeOpenAIServer(lambda body, headers: Reply("ok"), batch_latency=0.05) as srv:
        client = _client(srv)
        started = time.monotonic()
        batch = _submit(client, [_line("q0")])
        statuses, polls = [batch.status], 0
        while batch.status not in TERMINAL:
            batch = client.batches.retrieve(batch.id)
            polls += 1
            statuses.append(batch.status)
            time.sleep(0.005)
        assert time.monotonic() - started >= 0.05
        assert "in_progress" in statuses and statuses[-1] == "completed"
        assert srv.batch_status_polls == polls


def test_cancel_while_waiting_keeps_the_answered_lines() -> None:
    with FakeOpenAIServer(lambda body, headers: Reply("ok"), batch_latency=30.0) as srv:
        client = _client(srv)
        batch = _submit(client, [_line("q0"), _line("q1")])
        deadline = time.monotonic() + 2.0
        while batch.request_counts is None or batch.request_counts.completed < 2:
            assert time.monotonic() < deadline
            batch = client.batches.retrieve(batch.id)
        assert batch.status == "in_progress"  # every line answered, now sitting out batch_latency
        cancelling = client.batches.cancel(batch.id)
        assert cancelling.status == "cancelling" and cancelling.cancelling_at
        started = time.monotonic()
        done = _wait(client, batch.id)
        assert time.monotonic() - started < 2.0, "cancel must cut the in-progress wait short"
        assert done.status == "cancelled" and done.cancelled_at and done.completed_at is None
        assert client.batches.cancel(batch.id).status == "cancelled"  # idempotent
        assert sorted(e["custom_id"] for e in _entries(client, done.output_file_id)) == ["q0", "q1"]
        assert done.error_file_id is None


def test_cancel_mid_run_skips_the_remaining_lines() -> None:
    entered, release = threading.Event(), threading.Event()

    def slow_first(body: dict[str, Any], headers: Any) -> Reply:
        if body["messages"][0]["content"] == "first":
            entered.set()
            release.wait(5.0)
        return Reply("ok")

    with FakeOpenAIServer(slow_first) as srv:
        client = _client(srv)
        batch = _submit(client, [_line("a", content="first"), _line("b"), _line("c")])
        assert entered.wait(2.0)
        assert client.batches.cancel(batch.id).status == "cancelling"
        release.set()
        done = _wait(client, batch.id)
        assert done.status == "cancelled"
        assert [e["custom_id"] for e in _entries(client, done.output_file_id)] == ["a"]
        skipped = _entries(client, done.error_file_id)
        assert sorted(e["custom_id"] for e in skipped) == ["b", "c"]
        assert {e["error"]["code"] for e in skipped} == {"batch_cancelled"}
        assert [line["custom_id"] for line in srv.batch_lines] == ["a"]
        with pytest.raises(openai.ConflictError):
            client.batches.cancel(_wait(client, _submit(client, [_line("z")]).id).id)


def test_list_batches_newest_first_with_paging(srv: FakeOpenAIServer) -> None:
    client = _client(srv)
    ids = [_submit(client, [_line("q")]).id for _ in range(3)]
    first_page = client.batches.list(limit=2)
    assert [b.id for b in first_page.data] == ids[::-1][:2] and first_page.has_more
    assert [b.id for b in client.batches.list(limit=2)] == ids[::-1]  # auto-pagination follows after=


def test_unknown_ids_are_not_found(srv: FakeOpenAIServer) -> None:
    client = _client(srv)
    with pytest.raises(openai.NotFoundError) as info:
        client.files.retrieve("file-nope")
    assert info.value.status_code == 404 and "file-nope" in str(info.value)
    with pytest.raises(openai.NotFoundError):
        client.files.content("file-nope")
    with pytest.raises(openai.NotFoundError):
        client.batches.retrieve("batch_nope")
    with pytest.raises(openai.NotFoundError):
        client.batches.cancel("batch_nope")
    with pytest.raises(openai.NotFoundError):
        client.batches.create(input_file_id="file-nope", endpoint="/v1/chat/completions",
                              completion_window="24h")
    assert srv.batches_created == 0


def test_bad_uploads_and_bad_batches_are_rejected(srv: FakeOpenAIServer) -> None:
    client = _client(srv)
    with pytest.raises(openai.BadRequestError) as info:
        client.files.create(file=("x.jsonl", _jsonl([_line("q")])), purpose="fine-tune")
    assert info.value.status_code == 400
    assert isinstance(info.value.body, dict) and info.value.body["type"] == "invalid_request_error"
    with pytest.raises(openai.BadRequestError, match="JSON"):
        client.files.create(file=("x.jsonl", b'{"custom_id": "q"}\n{not json\n'), purpose="batch")
    with pytest.raises(openai.BadRequestError):
        client.files.create(file=("x.jsonl", b"[1, 2]\n"), purpose="batch")
    assert srv.files_created == 0

    upload = client.files.create(file=("x.jsonl", _jsonl([_line("q")])), purpose="batch")
    with pytest.raises(openai.BadRequestError, match="endpoint"):
        client.batches.create(input_file_id=upload.id, endpoint="/v1/embeddings", completion_window="24h")


def test_invalid_lines_fail_the_batch_in_validation(srv: FakeOpenAIServer) -> None:
    client = _client(srv)
    wrong_url = {**_line("b"), "url": "/v1/embeddings"}
    done = _wait(client, _submit(client, [_line("a"), wrong_url, _line("a")]).id)
    assert done.status == "failed" and done.errors is not None and done.errors.data is not None
    assert sorted((e.line, e.param) for e in done.errors.data) == [(2, "url"), (3, "custom_id")]
    assert srv.batch_lines == []
