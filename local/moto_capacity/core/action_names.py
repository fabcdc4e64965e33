"""The actions a moto response class answers, listed once per class, not once per request.

moto's `BaseResponse.call_action` lists the functions of the response class on every request
(`inspect.getmembers`: 317 names for EC2's, 0.3 ms a call) to check that the action is one of
them. The list changes only when a class in the response class's MRO gains or loses a member
(this extension copies its members in at `install()`); it is kept per class and listed again
whenever the size of any of those classes' namespaces changes. A replaced member keeps its
name, and so the list.
"""

from collections.abc import Callable

# class -> (the sizes of its MRO's namespaces, its function names)
_LISTED: dict[type, tuple[tuple[int, ...], list[str]]] = {}


def listed_once(original: Callable[[object], list[str]]) -> Callable[[object], list[str]]:
    """The hook's replacement for `moto.core.responses.method_names_from_class`."""

    def method_names_from_class(clazz: object) -> list[str]:
        if not isinstance(clazz, type):
            return original(clazz)
        sizes = tuple(len(c.__dict__) for c in clazz.__mro__)
        kept = _LISTED.get(clazz)
        if kept is None or kept[0] != sizes:
            kept = _LISTED[clazz] = (sizes, original(clazz))
        return list(kept[1])

    return method_names_from_class
