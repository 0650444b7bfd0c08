"""The compute library: what every executor of the hub runs, with no Django and no HTTP client.

- ``errors``: ``CodedError``, the one coded error, and ``JOB_CODES``, the table of job error codes;
- ``runs``: ONNX Runtime sessions, a run with a deadline and a memory bound, the chain rule
  (``hpcfair.chain``) and batches of rows: used by the hub's engine processes (the gateway's lanes, Celery
  jobs) and by the Slurm node's runner alike;
- with ``hpcfair.convert`` (sandboxed conversion), ``hpcfair.finetune`` (sandboxed training),
  ``hpcfair.cube`` (MLCube builds) and ``hpcfair.batches``.

``tests/test_imports.py`` checks that importing it loads neither Django nor requests.
"""

from hpcfair.compute.errors import JOB_CODES, CodedError

__all__ = ["JOB_CODES", "CodedError"]
