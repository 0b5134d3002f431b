"""Signed files for the record's exports: an Ed25519 key pair, a detached signature and a manifest.

Invariants:
- The key pair is made once (``ensure_key``, from ``appliance init``) and never replaced: the
  private key is PKCS#8 PEM in a 0600 file; the public key is PEM beside it, handed to the
  receiving side once (``appliance ehr export-key``). A private key file that others may read is
  refused, not used.
- ``write_signed`` writes ``OUT`` (the payload), ``OUT.sig`` (64 raw bytes: Ed25519 over the
  payload's bytes, so ``openssl pkeyutl -verify -rawin`` checks it too) and ``OUT.manifest.json``
  (format, file name, size, sha256, the key's fingerprint, the caller's facts) each through a
  temporary file in the same folder, fsynced, then renamed: companions first, the payload last,
  and the folder fsynced. Any failure removes every temporary file and every companion already
  renamed, so a failed write leaves nothing; it never overwrites an existing file.
- ``verify_signed`` reads only and names the first problem in one line: a missing or unreadable
  file, a manifest that is not this format or names another file, a size or sha256 that differs
  (the file or the manifest changed), a manifest naming another key, a signature that does not
  verify with the key. The signature covers the payload; the manifest's other facts are
  informational and only its file name, size, sha256 and fingerprint are checked.
"""

from __future__ import annotations

import hashlib
import json
import os
import stat
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import (
    Ed25519PrivateKey,
    Ed25519PublicKey,
)

from ehr_db.errors import EhrError

MANIFEST_FORMAT = "appliance-ehr-export/1"
SIGNATURE_SUFFIX = ".sig"
MANIFEST_SUFFIX = ".manifest.json"
PRIVATE_MODE = 0o600


class SigningError(EhrError):
    """A key cannot be made or used, or a signed file cannot be written (the message says why)."""


def signature_path(path: Path) -> Path:
    return path.with_name(path.name + SIGNATURE_SUFFIX)


def manifest_path(path: Path) -> Path:
    return path.with_name(path.name + MANIFEST_SUFFIX)


# -- keys --------------------------------------------------------------------------------------
def ensure_key(private_path: Path, public_path: Path) -> bool:
    """Make the key pair if there is none (True), else leave it as it is (False). A public key
    file that went missing is written again from the private key."""
    if private_path.exists():
        if not public_path.exists():
            _write_new(public_path, public_pem(load_private(private_path).public_key()))
        return False
    key = Ed25519PrivateKey.generate()
    pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                            serialization.NoEncryption())
    _write_new(private_path, pem)
    public_path.unlink(missing_ok=True)  # a public half without its private key belongs to no key
    _write_new(public_path, public_pem(key.public_key()))
    return True


def _write_new(path: Path, data: bytes) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, PRIVATE_MODE)
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


def load_private(path: Path) -> Ed25519PrivateKey:
    try:
        mode = path.stat().st_mode
        if stat.S_IMODE(mode) & 0o077:
            raise SigningError(f"the export signing key {path.name} may be read by others; it was not used "
                               f"(chmod 600 {path.name}, or run `appliance init`)")
        key = serialization.load_pem_private_key(path.read_bytes(), password=None)
    except FileNotFoundError:
        raise SigningError("there is no export signing key in the data home; run `appliance init` to make it") \
            from None
    except (ValueError, TypeError):
        raise SigningError(f"the export signing key {path.name} cannot be read (damaged)") from None
    if not isinstance(key, Ed25519PrivateKey):
        raise SigningError(f"the export signing key {path.name} is not an Ed25519 key")
    return key


def load_public(path: Path) -> Ed25519PublicKey:
    try:
        key = serialization.load_pem_public_key(Path(path).read_bytes())
    except FileNotFoundError:
        raise SigningError(f"no public key at {path}") from None
    except (ValueError, TypeError, UnicodeDecodeError):
        raise SigningError(f"{Path(path).name} is not a PEM public key") from None
    except OSError as exc:
        raise SigningError(f"cannot read {path}: {exc.strerror}") from None
    if not isinstance(key, Ed25519PublicKey):
        raise SigningError(f"{Path(path).name} is not an Ed25519 public key")
    return key


def public_pem(key: Ed25519PublicKey) -> bytes:
    return key.public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)


def fingerprint(key: Ed25519PublicKey) -> str:
    """sha256 of the key's 32 raw bytes, hex: what a manifest names and an operator reads out."""
    raw = key.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    return hashlib.sha256(raw).hexdigest()


# -- writing -----------------------------------------------------------------------------------
def write_signed(path: Path, payload: bytes, key: Ed25519PrivateKey, facts: dict,
                 before_commit: Callable[[], None] | None = None) -> dict:
    """Write ``path`` with its signature and manifest (module docstring); returns the manifest.
    ``before_commit`` runs once every temporary file is written, before the first rename."""
    targets = [path, signature_path(path), manifest_path(path)]
    for target in targets:
        if target.exists() or target.is_symlink():
            raise SigningError(f"{target} already exists; choose a new name (an export never overwrites a file)")
    manifest = {"format": MANIFEST_FORMAT, "file": path.name, "bytes": len(payload),
                "sha256": hashlib.sha256(payload).hexdigest(), "signature": {
                    "algorithm": "Ed25519", "file": signature_path(path).name,
                    "key_fingerprint": fingerprint(key.public_key())}, **facts}
    contents = [payload, key.sign(payload), json.dumps(manifest, indent=1).encode("utf-8")]
    temps = [t.with_name(f".{t.name}.{os.getpid()}.tmp") for t in targets]
    renamed: list[Path] = []
    try:
        for tmp, data in zip(temps, contents):
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, PRIVATE_MODE)
            with os.fdopen(fd, "wb") as handle:
                handle.write(data)
                handle.flush()
                os.fsync(handle.fileno())
        if before_commit is not None:
            before_commit()
        for tmp, target in reversed(list(zip(temps, targets))):  # the payload last
            os.replace(tmp, target)
            renamed.append(target)
        _fsync_dir(path.parent)
    except BaseException:
        for leftover in temps + renamed:
            leftover.unlink(missing_ok=True)
        raise
    return manifest


def _fsync_dir(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


# -- checking ----------------------------------------------------------------------------------
@dataclass
class SignedCheck:
    """What ``verify_signed`` found: ``problem`` is None when the file verifies."""

    path: Path
    problem: str | None = None
    sha256: str | None = None
    key_fingerprint: str | None = None
    manifest: dict = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return self.problem is None


def verify_signed(path: Path, key: Ed25519PublicKey) -> SignedCheck:
    """Check ``path`` against its manifest and its signature with ``key`` (module docstring)."""
    check = SignedCheck(path=path, key_fingerprint=fingerprint(key))
    try:
        payload = path.read_bytes()
    except FileNotFoundError:
        check.problem = f"{path.name} does not exist"
        return check
    except OSError as exc:
        check.problem = f"cannot read {path.name}: {exc.strerror}"
        return check
    check.sha256 = hashlib.sha256(payload).hexdigest()
    try:
        manifest = json.loads(manifest_path(path).read_text(encoding="utf-8"))
        signature = signature_path(path).read_bytes()
    except FileNotFoundError as exc:
        check.problem = f"{Path(exc.filename).name} is missing (the manifest and signature travel with the file)"
        return check
    except (OSError, ValueError):
        check.problem = f"{manifest_path(path).name} cannot be read as JSON (damaged or changed)"
        return check
    if not isinstance(manifest, dict) or manifest.get("format") != MANIFEST_FORMAT:
        check.problem = f"{manifest_path(path).name} is not an export manifest ({MANIFEST_FORMAT})"
        return check
    check.manifest = manifest
    signed = manifest.get("signature") if isinstance(manifest.get("signature"), dict) else {}
    if manifest.get("file") != path.name:
        check.problem = f"the manifest is for {manifest.get('file')!r}, not {path.name} (renamed or swapped)"
    elif manifest.get("bytes") != len(payload) or manifest.get("sha256") != check.sha256:
        check.problem = (f"{path.name} does not match its manifest's size and sha256: the file or the manifest "
                         "was changed")
    elif signed.get("key_fingerprint") != check.key_fingerprint:
        check.problem = (f"the manifest names signing key {str(signed.get('key_fingerprint'))[:16]}..., not the key "
                         f"given ({check.key_fingerprint[:16]}...): another site's key, or the wrong one")
    else:
        try:
            key.verify(signature, payload)
        except InvalidSignature:
            check.problem = f"the signature does not verify with key {check.key_fingerprint[:16]}...: the file or " \
                            "its signature was changed, or another key signed it"
    return check
