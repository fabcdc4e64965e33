"""moto's service folders, listed once a process, not once per request.

moto's server asks, for every request, whether the host it inferred (`sqs.us-east-1.amazonaws.com`)
names one of moto's service folders (`DomainDispatcherApplication.get_backend_for_host`), and
`moto.backends.list_of_moto_modules` answers by listing moto's package folder and asking the file
system about each of its 180 entries: 180 stats a request (0.9 ms here) that never find a match
for a signed request's host. The folders of the installed package do not change while it runs:
they are listed once, and the same names are answered in the same order.
"""

from collections.abc import Callable, Iterable
from functools import cache


def listed_once(original: Callable[[], Iterable[str]]) -> Callable[[], Iterable[str]]:
    """The hook's replacement for `moto.backends.list_of_moto_modules`."""

    @cache
    def listed() -> tuple[str, ...]:
        return tuple(original())

    def list_of_moto_modules() -> Iterable[str]:
        return iter(listed())

    return list_of_moto_modules
