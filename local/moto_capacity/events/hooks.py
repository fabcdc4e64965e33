"""The EventBridge hook: a rule target without an input transformer gets the whole event."""

from moto.events.utils import EventTemplateParser

from moto_capacity.core.patching import hook

from .models import whole_event


def install() -> None:
    hook(EventTemplateParser, "parse", whole_event)
