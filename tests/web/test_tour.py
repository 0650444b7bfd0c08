"""The tours (issue 41, point 8; issue 56): the manual's "What make run gives you"
(docs/getting-started/embedded-default.md) names every demo artifact the demo loader makes, the five-minute tour's
API block (docs/getting-started/tour.md) pasted as one block runs against a live hub (it waits for the conversion
before it reads ``…/versions/1-onnx/``), the "Try it" input it gives fits each demo model that search shows, and the
README's ten-line tour runs as one pasted block too."""

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
TOUR = (ROOT / "docs" / "getting-started" / "tour.md").read_text()
EMBEDDED = (ROOT / "docs" / "getting-started" / "embedded-default.md").read_text()


def sh_block(text: str, after: str) -> str:
    """The first shell block after ``after``, as a reader pastes it."""
    start = text.index("```sh\n", text.index(after)) + len("```sh\n")
    return text[start:text.index("\n```", start)]


def tour_block() -> str:
    """The API tour's shell block."""
    return sh_block(TOUR, "**Over the API.**")


def test_what_make_run_gives_you_names_every_demo_artifact():
    told = EMBEDDED
    for demo in DEMOS:
        assert demo["title"] in told and f"`demo/{demo['name']}@1.0`" in told, demo["name"]
    assert "four demo artifacts" in told and len(DEMOS) == 4


def test_the_tour_waits_for_the_conversion_before_reading_it():
    lines = tour_block().splitlines()
    first = next(i for i, line in enumerate(lines) if "versions/1-onnx/" in line)
    assert "&& break" in lines[first] and lines[first - 1].lstrip().startswith(("for ", "until ", "while ")), \
        lines[first - 1:first + 1]


def try_it_input() -> list:
    return json.loads(re.search(r'"Try it" runs the model on the numbers you type\s*\(`(\[\[.*?\]\])`', TOUR,
                                re.S).group(1))


def pasted(block: str, base: str, var: Path) -> tuple[subprocess.CompletedProcess, list[tuple[str, str]]]:
    """``block`` run by bash as a reader pastes it, on the hub at ``base`` (up already: the fixture is `make run`,
    so its first line is left out); curl also says what each request answered: (the run, [(status, url)])."""
    script = ('curl() { command curl -w "\\n=> %{http_code} %{url_effective}\\n" "$@"; }\n'
              + "\n".join(block.splitlines()[1:]).replace("http://127.0.0.1:8000", base))
    env = {k: v for k, v in os.environ.items() if k not in {"DATABASE_URL", "HUB_BROKER_URL", "HUB_STORAGE"}}
    env["HUB_VAR_DIR"] = str(var)
    before = {p.name for p in ROOT.iterdir()}
    try:
        done = subprocess.run(["bash", "-c", script], cwd=ROOT, env=env, capture_output=True, text=True,
                              errors="replace", timeout=400)
    finally:  # what the tour downloads into the reader's folder (part.bin), not left in the checkout
        for made in {p.name for p in ROOT.iterdir()} - before:
            if (ROOT / made).is_file():
                (ROOT / made).unlink()
    return done, re.findall(r"^=> (\d{3}) (\S+)$", done.stdout, re.M)


@pytest.mark.slow
def test_the_tour_runs_as_one_pasted_block_and_its_try_it_input_fits_the_demo_models(embedded_hub):
    base, token, var = embedded_hub
    block = tour_block()
    assert block.splitlines()[0].startswith("make run &")
    done, answers = pasted(block, base, var)
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


@pytest.mark.slow
def test_the_readme_tour_runs_as_one_pasted_block(embedded_hub):
    """The README's ten-line tour: search, the wait for the demo's conversion, inference, metadata, the client."""
    base, _, var = embedded_hub
    block = sh_block(README, "## A ten-line tour")
    assert block.splitlines()[0].startswith("make run &") and len(block.splitlines()) <= 10
    done, answers = pasted(block, base, var)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    last = {url.split("?")[0].removeprefix(base): status for status, url in answers}
    assert last == {"/api/v1/artifacts/": "200", "/api/v1/artifacts/demo/iris-classifier/versions/1.0-onnx/": "200",
                    "/api/v1/artifacts/demo/iris-classifier/versions/1.0/infer": "200",
                    "/api/v1/artifacts/demo/iris-classifier/versions/1.0/metadata/turtle": "200"}, answers
    assert '"outputs"' in done.stdout and "hpc:" in done.stdout, done.stdout[-3000:]
    assert "demo/iris-classifier" in done.stdout.split("=> 200")[-1], done.stdout[-3000:]  # the client's search
