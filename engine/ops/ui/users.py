"""The dashboard's ``--users`` file and its password hashes.

The file is a JSON list ``[{"username": ..., "password_hash": ..., "role": "admin" |
"viewer"}]``. A ``password_hash`` is ``scrypt$N$r$p$SALT$KEY``: the standard library's
``hashlib.scrypt`` with cost ``N`` (a power of two), block size ``r``, parallelism ``p``, a
random 16-byte ``SALT`` per user and the 32-byte derived ``KEY``, both base64 (standard
alphabet, no padding). ``raftflow hash-password`` prints one (:func:`hash_password`).

Unsalted ``password_sha256`` digests and plain ``password`` entries (the old format) are
refused, with what to do instead: a leaked file of them gives the passwords away.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import secrets
import threading
from dataclasses import dataclass
from pathlib import Path

ROLES = ("admin", "viewer")
SCHEME = "scrypt"
#: 16 MiB and tens of milliseconds a hash: slow for a guesser, fine for one sign-in.
COST, BLOCK_SIZE, PARALLELISM = 2**14, 8, 1
_KEY_BYTES = 32


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii").rstrip("=")


def _unb64(text: str) -> bytes:
    return base64.b64decode(text + "=" * (-len(text) % 4), validate=True)


def _derive(password: str, salt: bytes, n: int, r: int, p: int) -> bytes:
    return hashlib.scrypt(
        password.encode("utf-8", "surrogatepass"),
        salt=salt,
        n=n,
        r=r,
        p=p,
        maxmem=n * r * 129 + (1 << 20),
        dklen=_KEY_BYTES,
    )


def hash_password(password: str, *, cost: int = COST) -> str:
    """A new salted scrypt hash of ``password``, in the ``password_hash`` format."""
    salt = secrets.token_bytes(16)
    key = _derive(password, salt, cost, BLOCK_SIZE, PARALLELISM)
    return f"{SCHEME}${cost}${BLOCK_SIZE}${PARALLELISM}${_b64(salt)}${_b64(key)}"


@dataclass(frozen=True)
class PasswordHash:
    """A parsed ``password_hash``."""

    n: int
    r: int
    p: int
    salt: bytes
    key: bytes

    @classmethod
    def parse(cls, text: str) -> PasswordHash:
        """:class:`ValueError` (never quoting ``text``) unless it is ``scrypt$N$r$p$SALT$KEY``."""
        parts = text.split("$")
        try:
            if len(parts) != 6 or parts[0] != SCHEME:
                raise ValueError
            n, r, p = (int(x) for x in parts[1:4])
            salt, key = _unb64(parts[4]), _unb64(parts[5])
        except ValueError:
            raise ValueError("a password_hash is scrypt$N$r$p$SALT$KEY") from None
        if n < 2 or n & (n - 1) or not 0 < r <= 64 or not 0 < p <= 16 or n * r > 2**20:
            raise ValueError("a password_hash's scrypt parameters are out of range")
        if len(salt) < 8 or len(key) < 16:
            raise ValueError("a password_hash's salt or key is too short")
        return cls(n, r, p, salt, key)

    def verify(self, password: str) -> bool:
        derived = _derive(password, self.salt, self.n, self.r, self.p)[: len(self.key)]
        return hmac.compare_digest(derived, self.key)


@dataclass(frozen=True)
class User:
    username: str
    password_hash: PasswordHash
    role: str = "admin"

    def check(self, password: str) -> bool:
        return _VERIFIED.check(self, password)


class _VerifiedPasswords:
    """Passwords already verified, so that HTTP Basic (sent with every request) costs one
    scrypt per user and password, not one per request. Held as HMACs under a key of this
    process only; wrong passwords are never remembered (each costs a full scrypt)."""

    LIMIT = 1024

    def __init__(self) -> None:
        self._key = secrets.token_bytes(32)
        self._seen: set[bytes] = set()
        self._lock = threading.Lock()

    def check(self, user: User, password: str) -> bool:
        entry = hmac.new(
            self._key,
            b"\0".join(s.encode("utf-8", "surrogatepass") for s in (user.username, password))
            + user.password_hash.key,
            hashlib.sha256,
        ).digest()
        with self._lock:
            if entry in self._seen:
                return True
        if not user.password_hash.verify(password):
            return False
        with self._lock:
            if len(self._seen) >= self.LIMIT:
                self._seen.clear()
            self._seen.add(entry)
        return True


_VERIFIED = _VerifiedPasswords()

OLD_FORMAT = (
    "{path}: user {name!r} has a {field} entry: unsalted or plain passwords are no longer "
    "accepted. Make a password_hash with `raftflow hash-password` (scrypt, salted) and "
    "put it in place of {field}"
)


def load_users(path: str | Path) -> dict[str, User]:
    """The users of a ``--users`` file; :class:`ValueError` with what is wrong."""
    try:
        entries = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ValueError(f"{path}: not a readable JSON file ({type(exc).__name__})") from None
    if not isinstance(entries, list) or not all(isinstance(e, dict) for e in entries):
        raise ValueError(f"{path}: expected a JSON list of users")
    users = {}
    for entry in entries:
        name, role = entry.get("username"), entry.get("role", "admin")
        for old in ("password_sha256", "password"):
            if old in entry:
                raise ValueError(OLD_FORMAT.format(path=path, name=name, field=old))
        if not isinstance(name, str) or not name or role not in ROLES:
            raise ValueError(f"{path}: each user needs a username and a role in {ROLES}")
        if ":" in name:
            raise ValueError(f"{path}: a username cannot hold ':' (HTTP Basic)")
        try:
            digest = PasswordHash.parse(str(entry.get("password_hash", "")))
        except ValueError as exc:
            raise ValueError(f"{path}: user {name!r}: {exc}") from None
        users[name] = User(name, digest, role)
    return users
