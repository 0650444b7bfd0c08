"""The Hugging Face Hub protocol (``HF_ENDPOINT``): repository info, trees, refs, commits and ``resolve``
downloads (``views``), and the write side, create, pre-upload, the Git LFS batch and commits (``writes``), spoken
as ``huggingface_hub`` expects them, so that ``transformers``, ``sentence-transformers`` and ``datasets`` load hub
artifacts by ``owner/name`` unchanged and ``upload_folder``/``push_to_hub`` publish versions.

A repository is an artifact (models under ``/api/models/``, datasets under ``/api/datasets/``, projects as
spaces under ``/api/spaces/``); a revision is a version (``revisions``); access is the hub's own
(``readable_by``), and a repository the reader may not see answers exactly as the Hub answers a missing one.
"""
