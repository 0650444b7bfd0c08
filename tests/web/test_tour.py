"""The README's tour (issue 41, point 8): "What make run gives you" names every demo artifact the demo loader
makes, the API tour pasted as one block runs against a live hub (it waits for the conversion before it reads
``…/versions/1-onnx/``), and the "Try it" input it gives fits each demo model that search shows."""

from __future__ import annotations

import json
import os
import re
import subprocess
import time
from pathlib import Path

import pytest
import requests

from hub.registry.management.commands.hub_demo import DEMOS

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text()


def section(heading: str) -> str:
    start = README.index(heading)
    return README[start:README.index("\n## ", start + 1)]


def tour_block() -> str:
    """The API tour's shell block, as a reader pastes it."""
    tour = section("## A five-minute tour")
    start = tour.index("```sh\n", tour.index("**Over the API.**")) + len("```sh\n")
    return tour[start:tour.index("\n```", start)]


def test_what_make_run_gives_you_names_every_demo_artifact():
    told = section("## What `make run` gives you")
    for demo in DEMOS:
        assert demo["title"] in told and f"`demo/{demo['name']}@1.0`" in told, demo["name"]
    assert "four demo artifacts" in told and len(DEMOS) == 4


def test_the_tour_waits_for_the_conversion_before_reading_it():
    lines = tour_block().splitlines()
    first = next(i for i, line in enumerate(lines) if "versions/1-onnx/" in line)
    assert "&& break" in lines[first] and lines[first - 1].lstrip().startswith(("for ", "until ", "while ")), \
        lines[first - 1:first + 1]


def try_it_input() -> list:
    return json.loads(re.search(r'"Try it" runs the model on the numbers you type\s*\(`(\[\[.*?\]\])`', README,
                                re.S).group(1))


@pytest.mark.slow
def test_the_tour_runs_as_one_pasted_block_and_its_try_it_input_fits_the_demo_models(embedded_hub):
    base, token, var = embedded_hub
    block = tour_block()
    assert block.splitlines()[0].startswith("make run &")
    # The hub is up already (the fixture is `make run`); curl also says what each request answered.
    script = ('curl() { command curl -w "\\n=> %{http_code} %{url_effective}\\n" "$@"; }\n'
              + "\n".join(block.splitlines()[1:]).replace("http://127.0.0.1:8000", base))
    env = {k: v for k, v in os.environ.items() if k not in {"DATABASE_URL", "HUB_BROKER_URL", "HUB_STORAGE"}}
    env["HUB_VAR_DIR"] = str(var)
    done = subprocess.run(["bash", "-c", script], cwd=ROOT, env=env, capture_output=True, text=True, errors="replace",
                          timeout=400)
    answers = re.findall(r"^=> (\d{3}) (\S+)$", done.stdout, re.M)
    assert answers, done.stdout[-3000:] + done.stderr[-3000:]
    onnx = [status for status, url in answers if url.endswith("/versions/1-onnx/")]
    assert onnx and onnx[-1] == "200" and onnx.count("200") == 2, answers  # the wait, then the read
    assert all(int(status) < 500 for status, _ in answers), answers
    published = [status for status, url in answers if url.endswith("/artifacts/demo/tiny-cnn/versions/")]
    assert published == ["201"], done.stdout[-3000:]

    rows = try_it_input()
    auth = {"Authorization": f"Bearer {token}"}
    found = requests.get(f"{base}/api/v1/artifacts/", params={"q": "iris", "kind": "model"}, timeout=30).json()
    names = [entry["full_name"] for entry in (found["results"] if isinstance(found, dict) else found)]
    names = [name for name in names if name.startswith("demo/iris")]
    assert set(names) == {"demo/iris-classifier", "demo/iris-mlp"}
    for name in names:  # whichever search shows first
        for _ in range(120):  # converted when the worker started
            if requests.get(f"{base}/api/v1/artifacts/{name}/versions/1.0-onnx/", timeout=30).status_code == 200:
                break
            time.sleep(2)
        answer = requests.post(f"{base}/api/v1/artifacts/{name}/versions/1.0/infer", json={"inputs": rows},
                               headers=auth, timeout=120)
        assert answer.status_code == 200, (name, answer.text)
