"""The template reader lives in local_cloud.template (the local cloud needs it at
runtime); tests keep importing it from here."""

from local_cloud.template import (
    DeployedNames,
    UnresolvedReferenceError,
    create_resources,
    default_template_path,
    function_spec,
    launcher_event_source,
    load_template,
    parameter_defaults,
    resolve,
)

__all__ = [
    "DeployedNames",
    "UnresolvedReferenceError",
    "create_resources",
    "default_template_path",
    "function_spec",
    "launcher_event_source",
    "load_template",
    "parameter_defaults",
    "resolve",
]
