"""The worker's run deadline (``hpcfair.compute.runs.run_model``): a run whose deadline has passed before it
starts never runs, and a deadline reached mid-run stops it within a few milliseconds, not at the
watchdog's next scheduled look."""

from __future__ import annotations

import time

import numpy as np
import onnxruntime as ort
import pytest
from hpcfair.compute import CodedError
from hpcfair.compute.runs import run_model

from tests.gateway import models


@pytest.fixture(scope="module")
def slow_session():
    session = ort.InferenceSession(models.slow(size=1024, repeats=64), providers=["CPUExecutionProvider"])
    session.hub_output_names = [o.name for o in session.get_outputs()]
    return session


def feeds(session) -> dict[str, np.ndarray]:
    name = session.get_inputs()[0].name
    return {name: np.random.default_rng(0).standard_normal((256, 1024)).astype(np.float32) / 32}


def test_a_run_whose_deadline_passed_before_it_starts_never_runs():
    quick = ort.InferenceSession(models.mlp(), providers=["CPUExecutionProvider"])  # done in about a millisecond
    quick.hub_output_names = [o.name for o in quick.get_outputs()]
    data = {quick.get_inputs()[0].name: np.zeros((1, 784), np.float32)}
    assert run_model(quick, data, deadline=time.time() + 60)  # it runs with time left
    with pytest.raises(CodedError) as refused:
        run_model(quick, data, deadline=time.time() - 0.001)
    assert refused.value.code == "overtime"


@pytest.mark.slow
@pytest.mark.cpu  # runs a model to its deadline: over 1 s on a quiet machine
def test_a_deadline_reached_mid_run_stops_it(slow_session):
    data = feeds(slow_session)
    started = time.perf_counter()
    run_model(slow_session, data, deadline=time.time() + 600)
    whole = time.perf_counter() - started
    started = time.perf_counter()
    with pytest.raises(CodedError) as stopped:
        run_model(slow_session, data, deadline=time.time() + whole / 4)
    assert stopped.value.code == "overtime"
    assert time.perf_counter() - started < whole, "stopped before the run would have ended on its own"
