"""Request attestations: who a request acts for, signed by the service that read the comments.

The hooks processor turns screened comments into a request; it signs what the request is — its id,
room, creation time, deadline, the user ids of its comments and a digest of the screened comments
themselves (author and text, in order) — with its own key (its mutual-TLS credential, EC P-256) and
puts the signature and its certificate in ``RequestState.attestation``. Every later hop copies the
state. The tools service derives the viewer a side effect is for (coupon recipient, whose order to
look up) only from an attestation that verifies: a certificate the LiveHost CA signed, for an identity
holding the ``service`` role, a signature over exactly this request, and a deadline not yet passed. A
tool call record forged on Kafka, a state whose comments were edited after screening, or an old request
replayed after its time budget has no valid attestation: the tool runs with no viewer, so nothing is
granted to anybody.
"""

from __future__ import annotations

import base64
import hashlib
import json
import time
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from livehost.security.limits import BoundedMap
from livehost.security.pki import load_credential

SIGNER_ROLES = ("service",)
VERIFIED_MEMORY = 4096  # requests in flight at once are far fewer


class AttestationError(ValueError):
    """The request's attestation is missing or does not verify; the message says why."""


# Clocks of the signing and the verifying host may differ a little; a replay is seconds late, not this.
CLOCK_SKEW_MS = 2000


def comments_digest(comments: Iterable[Mapping[str, Any]]) -> str:
    """SHA-256 of the screened comments' authors and texts, in order (what the request acts on)."""
    rows = [[str(c.get("user_id") or ""), str(c.get("text") or "")] for c in comments]
    return hashlib.sha256(json.dumps(rows, ensure_ascii=False, separators=(",", ":")).encode()).hexdigest()


def payload(state: Mapping[str, Any]) -> bytes:
    """What is signed: canonical JSON of a request's id, room, creation time, deadline, viewers and the
    digest of its comments."""
    comments = list(state.get("comments") or [])
    viewers = sorted({str(c.get("user_id") or "") for c in comments})
    return json.dumps({"request_id": state.get("request_id"), "room_id": state.get("room_id"),
                       "created_ms": state.get("created_ms"), "deadline_ms": state.get("deadline_ms"),
                       "viewers": viewers, "comments": comments_digest(comments)},
                      sort_keys=True, separators=(",", ":")).encode()


class Signer:
    """Signs request states with one identity's key (the hooks processor's)."""

    def __init__(self, cert_pem: bytes, key_pem: bytes):
        key = serialization.load_pem_private_key(key_pem, password=None)
        if not isinstance(key, ec.EllipticCurvePrivateKey):
            raise ValueError("attestations need an EC key")
        self._key = key
        self._cert = cert_pem.decode()

    @classmethod
    def from_pki(cls, directory: Path, identity: str) -> Signer:
        cred = load_credential(directory, identity)
        return cls(cred.cert, cred.key)

    def sign(self, state: Mapping[str, Any]) -> str:
        sig = self._key.sign(payload(state), ec.ECDSA(hashes.SHA256()))
        return json.dumps({"cert": self._cert, "sig": base64.b64encode(sig).decode()}, separators=(",", ":"))


class Verifier:
    """Verifies attestations against the CA and the identities allowed to sign (bounded cert cache)."""

    def __init__(self, ca_pem: bytes, roles: Mapping[str, Iterable[str]], signer_roles: Iterable[str] = SIGNER_ROLES):
        self._ca = x509.load_pem_x509_certificate(ca_pem)
        self._signers = {identity for identity, r in roles.items() if set(r) & set(signer_roles)}
        self._certs: BoundedMap[str, ec.EllipticCurvePublicKey] = BoundedMap(64)
        # Attestations that verified, by their exact text and the exact identity they signed: a request
        # is checked at every tool call of every turn, and one ECDSA verification is ~0.1 ms. A forged
        # or edited state differs in one of the two and is verified afresh.
        self._verified: BoundedMap[tuple[str, bytes], frozenset[str]] = BoundedMap(VERIFIED_MEMORY)

    @classmethod
    def from_pki(cls, directory: Path, roles: Mapping[str, Iterable[str]]) -> Verifier:
        return cls((Path(directory) / "ca.pem").read_bytes(), roles)

    def _signer_key(self, cert_pem: str) -> ec.EllipticCurvePublicKey:
        fingerprint = hashlib.sha256(cert_pem.encode()).hexdigest()
        cached = self._certs.get(fingerprint)
        if cached is not None:
            return cached
        try:
            cert = x509.load_pem_x509_certificate(cert_pem.encode())
            cert.verify_directly_issued_by(self._ca)
        except (ValueError, TypeError, InvalidSignature) as exc:
            raise AttestationError(f"the signer's certificate is not from the LiveHost CA ({exc})") from None
        cn = cert.subject.get_attributes_for_oid(NameOID.COMMON_NAME)
        identity = str(cn[0].value) if cn else ""
        if identity not in self._signers:
            raise AttestationError(f"{identity!r} may not attest requests")
        key = cert.public_key()
        if not isinstance(key, ec.EllipticCurvePublicKey):
            raise AttestationError("the signer's key is not an EC key")
        self._certs[fingerprint] = key
        return key

    def viewers(self, state: Mapping[str, Any], now_ms: int | None = None) -> set[str]:
        """The attested viewers of ``state``; AttestationError when there is no valid attestation or
        the request's deadline (signed with it) has passed."""
        raw = state.get("attestation")
        if not raw:
            raise AttestationError("the request carries no attestation")
        deadline = state.get("deadline_ms")
        if not isinstance(deadline, int) or isinstance(deadline, bool):
            raise AttestationError("the request carries no deadline")
        now = int(time.time() * 1000) if now_ms is None else now_ms
        if now > deadline + CLOCK_SKEW_MS:
            raise AttestationError(f"the attestation expired {now - deadline} ms ago (the request's deadline)")
        signed = payload(state)
        known = self._verified.get((str(raw), signed))
        if known is not None:
            return set(known)
        try:
            doc = json.loads(raw)
            cert_pem, sig = str(doc["cert"]), base64.b64decode(doc["sig"], validate=True)
        except (ValueError, KeyError, TypeError) as exc:
            raise AttestationError(f"malformed attestation ({type(exc).__name__})") from None
        key = self._signer_key(cert_pem)
        try:
            key.verify(sig, signed, ec.ECDSA(hashes.SHA256()))
        except InvalidSignature:
            raise AttestationError("the attestation does not match this request") from None
        viewers = frozenset(json.loads(signed)["viewers"])
        self._verified[(str(raw), signed)] = viewers
        return set(viewers)
