"""Where the service runs: the client package's (capacity_launcher_client.deployment), which the
CLI and the local cloud share."""

from capacity_launcher_client.deployment import (
    DEFAULT_LOCAL_FILE,
    DEFAULT_REGION,
    LOCAL_CREDENTIALS,
    LOCAL_FILE_ENV_VAR,
    STACK_OUTPUTS,
    Deployment,
    DeploymentNotFound,
    from_stack,
    local_file,
    read_local,
    resolve,
    write_local,
)

__all__ = [
    "DEFAULT_LOCAL_FILE",
    "DEFAULT_REGION",
    "LOCAL_CREDENTIALS",
    "LOCAL_FILE_ENV_VAR",
    "STACK_OUTPUTS",
    "Deployment",
    "DeploymentNotFound",
    "from_stack",
    "local_file",
    "read_local",
    "resolve",
    "write_local",
]
