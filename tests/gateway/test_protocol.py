"""The gateway's protocol (``hub.gateway.protocol``) and the decisions of one synchronous run
(``hub.gateway.pipeline.run_or_queue``) on their own: no database, no lane, no worker, milliseconds.

The end-to-end behaviour of the same code over HTTP, with a real worker, is in test_infer.py and
test_express.py."""

from __future__ import annotations

import ast
import io
import json
from pathlib import Path

import numpy as np
import pytest

from hub.errors import HubError
from hub.gateway import pipeline, protocol, tensors
from hub.gateway.protocol import ModelRef, Options

ROOT = Path(__file__).resolve().parents[2]


def model(inputs=None, outputs=None, **extra) -> ModelRef:
    fields = {"version_id": 7, "pid": "ark:/99999/fk4test", "name": "alice/mlp@1", "named_id": 6, "path": "mlp.onnx",
              "sha256": "ab" * 32, "size": 1234, "inputs": inputs, "outputs": outputs, **extra}
    return ModelRef(**fields)


ONE_INPUT = [{"name": "x", "shape": [None, 3], "dtype": "float32"}]
TWO_INPUTS = [{"name": "a", "shape": [None, 2], "dtype": "float32"}, {"name": "b", "shape": [None, 2],
                                                                      "dtype": "float32"}]


def npy(array: np.ndarray) -> bytes:
    buffer = io.BytesIO()
    np.save(buffer, array)
    return buffer.getvalue()


def code_of(call) -> str:
    with pytest.raises(HubError) as caught:
        call()
    return caught.value.error_code


# --- the module's place -----------------------------------------------------------------------------


@pytest.mark.parametrize("module", ["hub/gateway/protocol.py", "hub/gateway/tensors.py", "hub/gateway/wire.py"])
def test_the_protocol_imports_neither_drf_nor_django_models_nor_a_view(module):
    # Its own imports. (HubError, the one error table, is a DRF exception class, so DRF is loaded; but the
    # protocol takes and gives plain bytes, mappings and arrays, no request or response objects.)
    imported = set()
    for node in ast.walk(ast.parse((ROOT / module).read_text())):
        if isinstance(node, ast.Import):
            imported |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            imported |= {node.module or ""} | {f"{node.module}.{alias.name}" for alias in node.names}
    wrong = {name for name in imported if name.startswith(("rest_framework", "django.db", "django.http"))
             or name.endswith((".models", ".views", ".api")) or ".api." in name
             or name.startswith(("hub.gateway.pipeline", "hub.gateway.memory"))}
    assert not wrong, f"{module} imports {sorted(wrong)}"


# --- options and the body ---------------------------------------------------------------------------


def test_a_json_body_gives_its_options_checked_and_its_inputs_raw():
    options, raw, sent = protocol.parse_body({"threads": "2", "outputs": "y,z"}, json.dumps(
        {"inputs": {"x": [[1, 2, 3]]}, "mode": "sync", "file": None}).encode(), "application/json")
    assert sent == "json" and raw == {"x": [[1, 2, 3]]}
    assert options == {"threads": 2, "outputs": ["y", "z"], "mode": "sync"}  # null is the same as left out


def test_the_body_wins_over_the_query_and_unknown_query_parameters_are_ignored():
    options, _, _ = protocol.parse_body({"device": "gpu", "colour": "red"}, b'{"device": "cpu"}', "application/json")
    assert options == {"device": "cpu"}


def test_an_npy_body_is_one_array_and_takes_options_from_the_query_only():
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    options, raw, sent = protocol.parse_body({"output_format": "json"}, npy(x), "application/x-npy")
    assert sent == "npy" and options == {"output_format": "json"}
    np.testing.assert_array_equal(raw, x)
    assert protocol.parse_body({}, npy(x), "application/octet-stream")[2] == "npy"


def test_an_npz_body_is_arrays_by_name():
    buffer = io.BytesIO()
    np.savez(buffer, a=np.ones((1, 2), np.float32), b=np.zeros((1, 2), np.float32))
    _, raw, sent = protocol.parse_body({}, buffer.getvalue(), "application/zip")
    assert sent == "npz" and sorted(raw) == ["a", "b"]


@pytest.mark.parametrize(("body", "kind", "code"), [
    (b"<x/>", "text/xml", "unsupported_media_type"),
    (b"[1, 2]", "application/json", "malformed_request"),
    (b'{"inputs": {}, "colour": "red"}', "application/json", "invalid"),
    (b'{"mode": "fast"}', "application/json", "invalid"),
    (b'{"threads": 2.5}', "application/json", "invalid"),
    (b'{"batch_size": 0}', "application/json", "invalid"),
    (b"not numpy", "application/x-npy", "invalid_inputs"),
    (b"not a zip", "application/x-npz", "invalid_inputs"),
])
def test_a_body_that_cannot_be_read_is_a_coded_4xx(body, kind, code):
    assert code_of(lambda: protocol.parse_body({}, body, kind)) == code


def test_the_collaboration_fields_are_known_only_where_asked_for():
    body = b'{"models": ["a/b", "c/d"], "merge": "yes"}'
    assert code_of(lambda: protocol.parse_body({}, body, "application/json")) == "invalid"
    options, _, _ = protocol.parse_body({}, body, "application/json", protocol.COLLABORATE_FIELDS)
    assert options == {"models": ["a/b", "c/d"], "merge": True}


def test_the_media_type_is_read_without_its_parameters():
    assert protocol.base_media_type("Application/JSON; charset=utf-8") == "application/json"
    assert protocol.base_media_type(None) == "application/json"


def test_options_have_defaults_and_threads_may_be_named_worker_num():
    assert Options.parse({}) == Options(device="cpu", threads=0, mode="auto", if_no_worker="refuse", outputs=[])
    assert Options.parse({"worker_num": 3, "device": "gpu", "outputs": "a,b"}) == Options(
        device="gpu", threads=3, outputs=["a", "b"])
    assert code_of(lambda: Options.parse({"threads": 10**6})) == "invalid"
    assert code_of(lambda: Options.parse({"if_no_worker": "wait"})) == "invalid"


def test_batch_size_unset_is_left_to_the_worker():
    assert protocol.batch_size({}) == 0 and protocol.batch_size({"batch_size": 5}) == 5
    assert code_of(lambda: protocol.batch_size({"batch_size": -1})) == "invalid"


# --- inputs against the model ------------------------------------------------------------------------


def test_a_bare_json_array_feeds_a_one_input_model_cast_to_its_dtype():
    arrays = protocol.input_arrays([[1, 2, 3], [4, 5, 6]], "json", model(ONE_INPUT))
    assert list(arrays) == ["x"] and arrays["x"].dtype == np.float32 and arrays["x"].shape == (2, 3)


def test_an_npy_body_for_a_model_of_two_inputs_is_refused_naming_them():
    with pytest.raises(HubError) as caught:
        protocol.raw_arrays(np.zeros((1, 2)), "npy", model(TWO_INPUTS))
    assert caught.value.error_code == "invalid_inputs" and "a, b" in caught.value.message


def test_inputs_that_do_not_fit_the_signature_say_what_was_expected():
    with pytest.raises(HubError) as caught:
        protocol.input_arrays({"x": [[1, 2]]}, "json", model(ONE_INPUT))
    assert caught.value.error_code == "invalid_inputs" and "axis 1" in caught.value.message
    assert caught.value.extra["expected"] == [{"name": "x", "shape": [None, 3], "dtype": "float32"}]
    assert code_of(lambda: protocol.input_arrays(None, "json", model(ONE_INPUT))) == "invalid_inputs"


def test_a_model_without_a_recorded_signature_takes_the_arrays_as_sent():
    arrays = protocol.input_arrays(np.ones((2, 2), np.int64), "npy", model())
    assert list(arrays) == ["input"] and arrays["input"].dtype == np.int64


# --- the answer ----------------------------------------------------------------------------------------


def test_the_output_format_is_asked_for_else_accepted_else_the_request_s_own():
    assert protocol.output_format("application/x-npy", {"output_format": "npz"}, "json") == "npz"
    assert protocol.output_format("text/html, application/x-npy;q=0.9", {}, "json") == "npy"
    assert protocol.output_format("*/*", {}, "npz") == "npz"
    assert code_of(lambda: protocol.output_format("", {}, "xml")) == "invalid"


def test_a_json_answer_carries_outputs_shapes_dtypes_timings_and_the_model():
    meta = {"ok": True, "device": "cpu", "provider": "CPUExecutionProvider", "worker": "w:1", "run_ms": 0.1,
            "lane_ms": 0.5, "serve_ms": 0.2, "steps": ["not an answer's business"]}
    info = protocol.timings(meta)
    assert set(info) == set(protocol.TIMING_KEYS)
    outputs = {"y": np.array([[1.0, np.nan]], np.float32)}
    body, content_type, headers = protocol.encode_answer(outputs, "json", info, model())
    answer = json.loads(body)
    assert content_type == "application/json"
    assert answer["outputs"] == {"y": [[1.0, None]]} and answer["shapes"] == {"y": [1, 2]}
    assert answer["dtypes"] == {"y": "float32"} and answer["model"] == {"pid": "ark:/99999/fk4test", "file": "mlp.onnx"}
    assert answer["provider"] == "CPUExecutionProvider" and "steps" not in answer
    assert headers == {"X-Hub-Device": "cpu", "X-Hub-Provider": "CPUExecutionProvider",
                       "X-Hub-Model": "ark:/99999/fk4test", "Server-Timing": "lane;dur=0.5, run;dur=0.1, serve;dur=0.2"}


def test_a_chain_s_providers_are_listed_and_missing_timings_left_out():
    _, _, headers = protocol.encode_answer({"y": np.zeros(1)}, "json", {"provider": ["A", "B"]}, model())
    assert headers["X-Hub-Provider"] == "A,B" and headers["Server-Timing"] == "" and headers["X-Hub-Device"] == ""


def test_npy_and_npz_answers_read_back_with_numpy():
    y = np.arange(4, dtype=np.float32).reshape(2, 2)
    body, content_type, _ = protocol.encode_answer({"y": y}, "npy", {}, model())
    assert content_type == tensors.NPY
    np.testing.assert_array_equal(np.load(io.BytesIO(body), allow_pickle=False), y)
    body, content_type, _ = protocol.encode_answer({"y": y, "z": y + 1}, "npz", {}, model())
    with np.load(io.BytesIO(body), allow_pickle=False) as archive:
        assert content_type == tensors.NPZ and sorted(archive.files) == ["y", "z"]
        np.testing.assert_array_equal(archive["z"], y + 1)
    assert code_of(lambda: protocol.encode_answer({"y": y, "z": y}, "npy", {}, model())) == "not_acceptable"


def test_a_chain_s_steps_say_which_file_runs_and_how_each_joint_feeds():
    first, second = model(), model(version_id=8, sha256="cd" * 32, path="head.onnx")
    steps = protocol.steps_of([first, second], [{"h": "y"}])
    assert steps == [{"sha256": "ab" * 32, "path": "mlp.onnx", "size": 1234, "version_id": 7},
                     {"sha256": "cd" * 32, "path": "head.onnx", "size": 1234, "version_id": 8, "links": {"h": "y"}}]
    assert protocol.steps_of([first, second])[1]["links"] == {}


def test_no_worker_names_the_device():
    error = protocol.no_worker("gpu")
    assert error.error_code == "no_worker" and error.extra["device"] == "gpu" and "GPU" in error.message


# --- run or queue, decided without a worker ---------------------------------------------------------


class Jobs:
    """``start_job`` for ``run_or_queue``: records the reasons it was called with."""

    def __init__(self) -> None:
        self.reasons: list[str] = []

    def __call__(self, reason: str) -> str:
        self.reasons.append(reason)
        return f"job: {reason}"


STEPS = protocol.steps_of([model(ONE_INPUT)])
X = {"x": np.zeros((1, 3), np.float32)}


def earlier(result) -> pipeline.EarlierAnswer:
    return pipeline.EarlierAnswer(STEPS, result)


def test_the_express_path_s_successful_answer_is_taken_without_another_run():
    jobs = Jobs()
    meta, outputs = {"ok": True, "provider": "P"}, {"y": np.ones(1)}
    assert pipeline.run_or_queue(STEPS, X, Options(), jobs, earlier((meta, outputs))) == (meta, outputs)
    assert jobs.reasons == []


def test_an_overtime_run_becomes_a_job_or_with_mode_sync_a_timeout():
    jobs = Jobs()
    overtime = ({"ok": False, "code": "overtime"}, {})
    queued = pipeline.run_or_queue(STEPS, X, Options(), jobs, earlier(overtime))
    assert queued == "job: longer than the synchronous limit"
    strict = Options(mode="sync")
    assert code_of(lambda: pipeline.run_or_queue(STEPS, X, strict, jobs, earlier(overtime))) == "worker_timeout"


@pytest.mark.parametrize(("code", "expected"), [("invalid_inputs", "invalid_inputs"), ("run_failed", "run_failed"),
                                                ("gpu_unavailable", "gpu_unavailable"), ("segfault", "internal_error"),
                                                (None, "internal_error")])
def test_a_worker_s_refusal_keeps_its_code_when_the_hub_knows_it(code, expected):
    refusal = ({"ok": False, "code": code, "detail": "what went wrong"}, {})
    assert code_of(lambda: pipeline.run_or_queue(STEPS, X, Options(), Jobs(), earlier(refusal))) == expected


def test_an_error_the_express_path_met_is_raised_here():
    timeout = HubError("worker_timeout", "No worker answered.")
    assert code_of(lambda: pipeline.run_or_queue(STEPS, X, Options(), Jobs(), earlier(timeout))) == "worker_timeout"


def test_async_and_large_inputs_go_to_a_job_before_anything_is_sent(settings):
    jobs = Jobs()
    assert pipeline.run_or_queue(STEPS, X, Options(mode="async"), jobs) == "job: asked for"
    settings.HUB_INFER_SYNC_MAX_BYTES = 4
    assert pipeline.run_or_queue(STEPS, X, Options(), jobs) == "job: large inputs"
    assert code_of(lambda: pipeline.run_or_queue(STEPS, X, Options(mode="sync"), jobs)) == "request_too_large"
    assert jobs.reasons == ["asked for", "large inputs"]


def test_an_earlier_answer_is_taken_once():
    environ = {pipeline.EARLIER_ANSWER: earlier(({"ok": True}, {}))}
    assert isinstance(pipeline.earlier_answer(environ), pipeline.EarlierAnswer)
    assert pipeline.earlier_answer(environ) is None
