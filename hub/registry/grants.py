"""Grants and access requests: a person asks for an artifact's restricted files with a purpose and the answers
its policy requires; its owner (for an organization: the admins) approves, which makes a ``Grant``, or
refuses, with a message; a policy may approve complete requests at once. Each step is one ``hub.audit`` line
and an e-mail through Django's mail backend (``EMAIL_*`` settings) to whom it concerns; the web UI shows the
same lists (``hub.web.access``)."""

from __future__ import annotations

import logging
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.core.mail import send_mail
from django.db import transaction
from django.utils import timezone

from hub.errors import HubError
from hub.orgs.models import Membership, Role
from hub.registry.models import AccessPolicy, AccessRequest, Artifact, Grant

audit = logging.getLogger("hub.audit")
log = logging.getLogger(__name__)

MAX_ANSWER = 2000  # characters per answer, and of the purpose


def policy_of(artifact: Artifact) -> AccessPolicy:
    """The artifact's policy (an unsaved default one: purpose only, decided by hand)."""
    return AccessPolicy.objects.filter(artifact=artifact).first() or AccessPolicy(artifact=artifact)


def approvers(artifact: Artifact) -> list:
    """Who decides: the owner, or the owning organization's admins."""
    if hasattr(artifact.owner, "organization"):
        return [m.user for m in Membership.objects.filter(org_id=artifact.owner_id, role=Role.ADMIN)
                .select_related("user")]
    return [artifact.owner]


def give_grant(artifact: Artifact, user, by, expires=None) -> Grant:
    """A live grant for ``user`` (an existing live one takes the new expiry); one audit line."""
    grant = Grant.objects.filter(artifact=artifact, user=user, revoked_at__isnull=True).first()
    if grant is None:
        grant = Grant.objects.create(artifact=artifact, user=user, granted_by=by, expires=expires)
    else:
        grant.expires, grant.granted_by = expires, by
        grant.save(update_fields=["expires", "granted_by"])
    audit.info("files of %s granted to %s by %s%s", artifact, user.username, getattr(by, "username", "the hub"),
               f" until {expires.isoformat()}" if expires else "")
    return grant


def ask(artifact: Artifact, user, purpose: str, answers: dict[str, Any], agreed_terms: bool) -> AccessRequest:
    """File a request (400 ``invalid`` naming what is missing; 409 ``conflict`` when one is pending); approved
    at once where the policy says so."""
    policy = policy_of(artifact)
    purpose = (purpose or "").strip()
    missing = [] if purpose else ["purpose"]
    answers = {str(k): str(v).strip()[:MAX_ANSWER] for k, v in (answers or {}).items()}
    missing += [name for name in policy.fields if not answers.get(name)]
    if missing:
        raise HubError("invalid", f"The owner of {artifact} asks for: {', '.join(missing)}. Give "
                                  f"{'--purpose and ' if 'purpose' in missing else ''}--field name=value for each.",
                       missing=missing)
    if policy.terms and not agreed_terms:
        raise HubError("invalid", f"Agree to the terms of {artifact} (--agree): {policy.terms[:300]}",
                       missing=["agree_terms"])
    extra = sorted(set(answers) - set(policy.fields))
    if extra:
        raise HubError("invalid", f"{artifact} asks for no {', '.join(extra)}; it asks for: "
                                  f"{', '.join(policy.fields) or 'a purpose only'}.")
    with transaction.atomic():
        if AccessRequest.objects.filter(artifact=artifact, requester=user, state=AccessRequest.State.PENDING).exists():
            raise HubError("conflict", f"You have a pending request for {artifact}; its owner will answer it.")
        made = AccessRequest.objects.create(artifact=artifact, requester=user, purpose=purpose[:MAX_ANSWER],
                                            answers=answers, agreed_terms=agreed_terms)
    audit.info("access to the files of %s asked by %s (request %s)", artifact, user.username, made.pk)
    if policy.auto_approve:
        return decide(made, None, approve=True, message="Approved automatically by the owner's policy.")
    _mail([u.email for u in approvers(artifact)], f"[HPCFair Hub] {user.username} asks for the files of {artifact}",
          f"{user.username} asks for the restricted files of {artifact}.\n\nPurpose: {purpose}\n"
          + "".join(f"{k}: {v}\n" for k, v in answers.items())
          + f"\nApprove or refuse it at {_site()}/access/requests/ or with the API "
            f"(POST /api/v1/artifacts/{artifact.full_name}/access-requests/{made.pk}).\n")
    return made


def decide(request: AccessRequest, by, *, approve: bool, message: str = "") -> AccessRequest:
    """Approve (a grant, expiring after the policy's ``grant_days``) or refuse a pending request."""
    if request.state != AccessRequest.State.PENDING:
        raise HubError("conflict", f"Request {request.pk} is {request.state} already.")
    request.state = AccessRequest.State.APPROVED if approve else AccessRequest.State.REFUSED
    request.decided_by, request.decided_at, request.message = by, timezone.now(), (message or "")[:MAX_ANSWER]
    request.save(update_fields=["state", "decided_by", "decided_at", "message"])
    artifact = request.artifact
    if approve:
        days = policy_of(artifact).grant_days
        give_grant(artifact, request.requester, by, timezone.now() + timedelta(days=days) if days else None)
    audit.info("access request %s for %s by %s %s by %s", request.pk, artifact, request.requester.username,
               request.state, getattr(by, "username", "policy"))
    word = "approved: you may download its files" if approve else "refused"
    _mail([request.requester.email], f"[HPCFair Hub] Your request for {artifact} was {request.state}",
          f"Your request for the files of {artifact} was {word}.\n"
          + (f"\nMessage: {request.message}\n" if request.message else "")
          + f"\n{_site()}/access/requests/\n")
    return request


def _site() -> str:
    return settings.HUB_PUBLIC_URL.rstrip("/")


def _mail(to: list[str], subject: str, body: str) -> None:
    """Send through Django's mail backend; a failure is logged, never the request's (the web UI lists it)."""
    to = [address for address in to if address]
    if not to:
        return
    try:
        send_mail(subject, body, settings.DEFAULT_FROM_EMAIL, to)
    except OSError:
        log.exception("access-request e-mail to %s not sent", ", ".join(to))
