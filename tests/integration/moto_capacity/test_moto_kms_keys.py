"""KMS keys' key pairs made when used (moto_capacity/kms/keys.py): a symmetric key, such as the
`alias/aws/dynamodb` key DynamoDB makes with an encrypted table, costs no RSA key pair; an
asymmetric one signs, verifies and gives its public key as moto's does."""

from collections.abc import Callable
from typing import Any

import pytest
from moto.kms import utils as kms_utils

TABLE = "encrypted"


@pytest.fixture
def key_pairs_made(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The size of every RSA key pair moto's KMS makes from now on."""
    made: list[int] = []
    original = kms_utils.rsa.generate_private_key

    def counted(public_exponent: int, key_size: int, **kwargs: Any) -> Any:
        made.append(key_size)
        return original(public_exponent=public_exponent, key_size=key_size, **kwargs)

    monkeypatch.setattr(kms_utils.rsa, "generate_private_key", counted)
    return made


def test_an_encrypted_table_and_a_symmetric_key_make_no_key_pair(
    aws_client: Callable[[str], Any], key_pairs_made: list[int]
) -> None:
    dynamodb = aws_client("dynamodb")
    dynamodb.create_table(
        TableName=TABLE,
        KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
        AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}],
        BillingMode="PAY_PER_REQUEST",
        SSESpecification={"Enabled": True},
    )
    kms = aws_client("kms")
    key_id = kms.create_key()["KeyMetadata"]["KeyId"]
    encrypted = kms.encrypt(KeyId=key_id, Plaintext=b"secret")["CiphertextBlob"]
    assert kms.decrypt(CiphertextBlob=encrypted)["Plaintext"] == b"secret"
    described = dynamodb.describe_table(TableName=TABLE)["Table"]["SSEDescription"]
    assert described["Status"] == "ENABLED"
    assert key_pairs_made == []


def test_an_rsa_key_signs_verifies_and_gives_one_public_key(
    aws_client: Callable[[str], Any], key_pairs_made: list[int]
) -> None:
    kms = aws_client("kms")
    key_id = kms.create_key(KeyUsage="SIGN_VERIFY", KeySpec="RSA_3072")["KeyMetadata"]["KeyId"]
    assert key_pairs_made == []
    algorithm = "RSASSA_PSS_SHA_256"
    signature = kms.sign(KeyId=key_id, Message=b"m", SigningAlgorithm=algorithm)["Signature"]
    verified = kms.verify(
        KeyId=key_id, Message=b"m", Signature=signature, SigningAlgorithm=algorithm
    )
    assert verified["SignatureValid"] is True
    assert (
        kms.get_public_key(KeyId=key_id)["PublicKey"]
        == kms.get_public_key(KeyId=key_id)["PublicKey"]
    )
    assert key_pairs_made == [3072]
