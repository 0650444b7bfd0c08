"""The gateway's job kinds: ``infer`` (batch and long runs), ``benchmark`` and ``collaborate`` (merges).
Imported by ``hub.jobs.kinds``'s discovery, which registers them."""

from hub.gateway.jobs import benchmark, collaborate, infer

__all__ = ["benchmark", "collaborate", "infer"]
