"""Operations: liveness (``/healthz``), readiness (``/readyz``) and Prometheus metrics (``/metrics``), answered
by ``middleware.OperationsMiddleware`` before the rest of Django (no session, CSRF, host check or throttle)."""
