"""MLCube packaging of models and projects: checking ``mlcube.yaml`` files (``spec``), generating a
model's cube (``generate``) and building and running cubes with Podman or Docker offline (``engine``).
Used by the hub's workers and by ``hpcfair``'s ``container`` task alike."""

from hpcfair.cube.engine import EngineError, build, find_engine, prepare_context, run_task
from hpcfair.cube.generate import CubeInfo, generate, unzip_cube, zip_cube
from hpcfair.cube.spec import CubeError, CubeSpec, parse, parse_dir, parse_zip

__all__ = ["CubeError", "CubeInfo", "CubeSpec", "EngineError", "build", "find_engine", "generate", "parse",
           "parse_dir", "parse_zip", "prepare_context", "run_task", "unzip_cube", "zip_cube"]
