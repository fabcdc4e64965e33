"""The KMS hooks: key pairs made when used."""

from moto.kms import models

from moto_capacity.core.patching import hook

from .keys import made_when_used


def install() -> None:
    hook(models, "generate_private_key", made_when_used)
