"""A KMS key's private key, made when the key first signs, verifies or gives its public key.

moto makes an RSA private key with every KMS key, a symmetric one too (its fallback for a key
spec that is neither RSA nor ECC): 2048 bits, about 40 ms of CPU. DynamoDB makes the account's
`alias/aws/dynamodb` key with the first table that asks for encryption at rest, so every local
cloud paid for a key pair nothing ever used (a symmetric key neither signs nor verifies on
AWS). Here the key pair is made by moto's own `generate_private_key`, of the same spec, the
first time moto's KMS asks it to sign, verify or give its public key: what it answers is what
it answered before.
"""

from collections.abc import Callable

from moto.kms.utils import AbstractPrivateKey, KeySpec


class KeyMadeWhenUsed(AbstractPrivateKey):
    """A private key of `key_spec` that `make` makes on first use."""

    def __init__(self, key_spec: str, make: Callable[[str], AbstractPrivateKey]) -> None:
        self.key_spec = key_spec
        self._make = make
        self._made: AbstractPrivateKey | None = None

    @property
    def made(self) -> AbstractPrivateKey:
        if self._made is None:
            self._made = self._make(self.key_spec)
        return self._made

    def sign(self, message: bytes, signing_algorithm: str) -> bytes:
        return self.made.sign(message, signing_algorithm)

    def verify(self, message: bytes, signature: bytes, signing_algorithm: str) -> bool:
        return self.made.verify(message, signature, signing_algorithm)

    def public_key(self) -> bytes:
        return self.made.public_key()


def made_when_used(
    original: Callable[[str], AbstractPrivateKey],
) -> Callable[[str], AbstractPrivateKey]:
    """moto's `generate_private_key`, deferred for RSA key pairs (ECC ones cost little, and
    moto checks their spec as it makes them)."""

    def generate_private_key(key_spec: str) -> AbstractPrivateKey:
        if key_spec in KeySpec.ecc_key_specs():
            return original(key_spec)
        return KeyMadeWhenUsed(key_spec, original)

    return generate_private_key
