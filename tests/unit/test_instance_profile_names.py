"""The instance profile's name and path stay within IAM's limits for every NodeClass name the
configuration accepts (63 characters) and every Region, and tell deployments apart.
https://docs.aws.amazon.com/IAM/latest/APIReference/API_CreateInstanceProfile.html (name: 1-128
of [\\w+=,.@-]; path: 1-512, starting and ending with '/')."""

from __future__ import annotations

import re

from capacity_launcher.domain.capacity.instance_profiles import (
    profile_name,
    profile_path,
    role_mismatch,
    role_name,
)

LONGEST_CLASS = "a" + "-" * 61 + "z"
LONGEST_TABLE = "x" * 255  # DynamoDB's table names are at most 255 characters
REGION = "ap-southeast-5"
NAME = re.compile(r"^[\w+=,.@-]{1,128}$")
PATH = re.compile(r"^/([\x21-\x7e]*/)?$")


def test_the_name_and_path_fit_iam_for_the_longest_names() -> None:
    name = profile_name(LONGEST_TABLE, REGION, LONGEST_CLASS)
    path = profile_path(LONGEST_TABLE, REGION)
    assert NAME.match(name), name
    assert len(path) <= 512 and PATH.match(path), path


def test_deployments_regions_and_classes_get_profiles_of_their_own() -> None:
    names = {
        profile_name(table, region, klass)
        for table in ("dev-state", "prod-state")
        for region in ("us-east-1", "eu-west-1")
        for klass in ("a", "b")
    }
    assert len(names) == 8
    assert profile_path("dev-state", "us-east-1") != profile_path("prod-state", "us-east-1")
    # Neither deployment's path is a prefix of the other's (ListInstanceProfiles by PathPrefix)
    dev, prod = profile_path("dev-state", "us-east-1"), profile_path("prod-state", "us-east-1")
    assert not dev.startswith(prod) and not prod.startswith(dev)


def test_a_role_by_arn_or_path_must_be_the_one_iam_has() -> None:
    arn = "arn:aws:iam::123456789012:role/nodes/KarpenterNodeRole-x"
    assert role_name(arn) == "KarpenterNodeRole-x"
    assert role_mismatch(arn, arn) is None
    assert role_mismatch("nodes/KarpenterNodeRole-x", arn) is None
    assert role_mismatch("KarpenterNodeRole-x", arn) is None  # by name: whatever its path
    other_account = arn.replace("123456789012", "999999999999")
    assert role_mismatch(other_account, arn) is not None
    assert role_mismatch("other/KarpenterNodeRole-x", arn) is not None
