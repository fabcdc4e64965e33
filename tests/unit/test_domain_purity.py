"""The domain package is pure: importing it never pulls in boto3 or botocore."""

import subprocess
import sys

MY_MODULES = (
    "requirements",
    "quantities",
    "config",
    "launch_request",
    "status",
    "errors",
    "instance_types",
    "quotas",
    "quota_admission",
)


def test_domain_modules_never_import_the_aws_sdk() -> None:
    # Given a fresh interpreter, so nothing else has imported boto3 first
    imports = "; ".join(f"import capacity_launcher.domain.{name}" for name in MY_MODULES)
    check = (
        "import sys; "
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('boto3', 'botocore')))"
    )

    # When every domain module is imported
    result = subprocess.run(
        [sys.executable, "-c", f"{imports}; {check}"],
        capture_output=True,
        text=True,
        check=True,
        env={"PYTHONPATH": ":".join(sys.path)},
    )

    # Then neither boto3 nor botocore was loaded
    assert result.stdout.strip() == "[]"
