"""Archives the hub and its workers expand are checked before inflating (hpcfair.archives): .npz datasets
and sample inputs, zipped SavedModels and MLCubes, an MLCube zip's recipes."""

from __future__ import annotations

import io
import resource
import zipfile
from pathlib import Path

import numpy as np
import pytest
from hpcfair import archives
from hpcfair.convert.errors import ConversionError
from hpcfair.convert.formats import extract_archive
from hpcfair.convert.signature import load_sample_inputs
from hpcfair.cube.generate import unzip_cube
from hpcfair.cube.spec import MAX_CUBE_BYTES, CubeError, parse_zip

MiB = 2**20


def zip_of(path: Path, members: dict[str, bytes]) -> Path:
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        for name, data in members.items():
            archive.writestr(name, data)
    return path


@pytest.mark.slow
@pytest.mark.cpu  # reads archives in bounded children: over 1 s on a quiet machine
def test_an_npz_dataset_bomb_is_refused_before_inflating(tmp_path):
    bomb = tmp_path / "rows.npz"
    np.savez_compressed(bomb, x=np.zeros((256 * MiB // 4,), np.float32))
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    with pytest.raises(ConversionError) as refused:
        load_sample_inputs(bomb, None, max_inflated=64 * MiB)
    assert refused.value.code == "invalid_sample_inputs" and "inflates to 256.0 MiB" in refused.value.detail
    assert (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) * 1024 < 32 * MiB
    small = tmp_path / "small.npz"
    np.savez_compressed(small, x=np.ones((4, 3), np.float32))
    assert load_sample_inputs(small, None, max_inflated=64 * MiB)["x"].shape == (4, 3)


def test_stored_members_count_against_other_limits_not_the_inflation_one():
    buffer = io.BytesIO()
    np.savez(buffer, x=np.ones((1024, 1024), np.float32))  # 4 MiB stored as it is
    assert archives.read_npz(buffer.getvalue(), max_inflated=1024)["x"].shape == (1024, 1024)


def test_a_header_may_not_declare_more_than_it_holds():
    member = io.BytesIO()
    np.save(member, np.zeros((2, 2), np.float32))
    lying = member.getvalue().replace(b"(2, 2)", b"(99999, 99999)", 1)
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr("x.npy", lying)
    with pytest.raises(ValueError, match="declares shape"):
        archives.read_npz(buffer.getvalue(), max_inflated=MiB)


@pytest.mark.slow
@pytest.mark.cpu  # reads archives in bounded children: over 1 s on a quiet machine
def test_zipped_saved_models_and_cubes_are_bounded(tmp_path):
    bomb = {"model/saved_model.pb": b"\0" * (64 * MiB)}
    with pytest.raises(ConversionError) as refused:
        extract_archive(zip_of(tmp_path / "model.zip", bomb), tmp_path / "out", max_inflated=8 * MiB)
    assert refused.value.code == "archive_too_large"
    assert not any((tmp_path / "out").rglob("*.pb"))  # refused before anything was written
    with pytest.raises(archives.ArchiveTooLarge):
        unzip_cube(zip_of(tmp_path / "cube.zip", {"mlcube.yaml": b"name: x\n", "big": b"\0" * (64 * MiB)}),
                   tmp_path / "cube", max_inflated=8 * MiB)


@pytest.mark.slow
@pytest.mark.cpu  # reads archives in bounded children: over 1 s on a quiet machine
def test_a_cube_zip_recipe_is_read_only_up_to_its_limit(tmp_path):
    cube = "name: c\nplatform: {accelerator_count: 0}\ndocker: {image: x/y:1, build_file: Dockerfile}\n" \
           "tasks: {infer: {parameters: {inputs: {}, outputs: {}}}}\n"
    archive = zip_of(tmp_path / "p.zip", {"p/mlcube.yaml": cube.encode()})
    with zipfile.ZipFile(archive, "a", compression=zipfile.ZIP_DEFLATED) as zf, zf.open("p/Dockerfile", "w") as out:
        for _ in range(512):  # 512 MiB, written in pieces: the test itself never holds it
            out.write(b"#" * MiB)
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    try:
        parse_zip(archive)
    except CubeError:
        pass  # what the recipe says is judged elsewhere; only the memory matters here
    assert (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) * 1024 < 64 * MiB + MAX_CUBE_BYTES
