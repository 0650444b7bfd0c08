"""A rebuilt tag does not leave its previous image behind as a dangling ``<none>`` image (issue 41, point 14:
every rebuild of a version's cube left ~343 MB). Runs podman with the base image."""

from __future__ import annotations

import subprocess
import uuid

import pytest
from hpcfair.cube.engine import build, image_id

pytestmark = pytest.mark.slow


def test_a_rebuilt_tag_removes_the_image_it_replaced_and_keeps_one_another_tag_holds(cube_base, tmp_path):
    image = f"localhost/hpcfair-test/superseded-{uuid.uuid4().hex[:8]}:1"
    recipe = tmp_path / "Containerfile"
    recipe.write_text(f"FROM {cube_base}\nRUN echo first > /built\n")
    first = build("podman", tmp_path, recipe, image, timeout=300)
    first_id = image_id("podman", image)
    assert first.removed == ""  # nothing to replace
    recipe.write_text(f"FROM {cube_base}\nRUN echo second > /built\n")
    second = build("podman", tmp_path, recipe, image, timeout=300)
    second_id = image_id("podman", image)
    assert second_id != first_id and second.removed == first_id
    assert subprocess.run(["podman", "image", "exists", first_id]).returncode == 1  # gone, not <none>
    kept = image.replace(":1", ":kept")
    subprocess.run(["podman", "tag", image, kept], check=True)  # another tag holds the second image
    recipe.write_text(f"FROM {cube_base}\nRUN echo third > /built\n")
    third = build("podman", tmp_path, recipe, image, timeout=300)
    assert third.removed == "" and image_id("podman", kept) == second_id  # not removed: still named
    subprocess.run(["podman", "rmi", "--force", image, kept], capture_output=True, timeout=120)
