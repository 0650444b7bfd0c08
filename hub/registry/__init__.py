"""Artifacts, versions, files, content-addressed blobs, provenance, uploads and persistent identifiers."""
