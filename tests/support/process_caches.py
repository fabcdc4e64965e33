"""What every cloud a test builds would otherwise load again: set up once per test process.

- moto's image catalogue. A fresh EC2 backend (each `mock_aws()`, each moto reset) builds every
  AMI moto knows for its region: 1,301 in us-east-1, 1,227 of them ECS-optimized images no test
  uses, and `DescribeImages` serializes them all on every call. `use_the_images_tests_use()`
  points moto at a catalogue of the images the suites do use: moto's own list (the Linux and
  Windows images tests name, `tests.support.cloud.an_image`'s first Linux one) and the region's
  latest images, which moto's SSM parameters name (`/aws/service/ami-amazon-linux-latest/...`).
  It is built from moto's installed resources, so it follows moto's version (its own module,
  tests/support/moto_images.py, which imports neither moto nor botocore).
- botocore's data loader. Each test's cloud starts new sessions (`aws.client.cache_clear()`: a
  new container's clients), and each new session re-reads botocore's service models and
  endpoint rules from disk. `shared_botocore_loader()` gives every session one loader, so each
  file is read once per process. Clients, their handlers and their retry state stay per session.
  Each service's model (botocore's `ServiceModel`: the JSON model's shapes and operations,
  resolved lazily and kept) is one per loader too: a new client would otherwise resolve again
  each operation of its service (EC2's 750, for each method it defines) and the shapes its
  first calls use. botocore only reads a model once made. So is each service's client class
  (its methods, one closure per operation, and what the `creating-client-class` handlers add:
  botocore's own, module functions that add `generate_presigned_url`): made again only when a
  session's handlers for it differ. Each client's handlers, events and retry state stay its own.
  A test that edits a model gives its session a loader of its own (tests/unit/test_sdk_model.py).
- EC2's catalogue answers, parsed. A cold container lists every instance type of the region
  (`DescribeInstanceTypes`: 1,395 types, 5.8 MB of XML that botocore parses in 0.44 s of CPU) and
  the zones' offerings; each test's sync run builds a cold container, and moto answers each
  listing with the same bytes (moto_capacity/ec2/responses/listings.py). `remembered_parses()`
  keeps what botocore parsed of each large query-protocol body (`LARGE_BODY_BYTES` and more) and
  gives every later answer of the same bytes, for the same output shape, a fresh copy of it:
  each dict and list its own, equal strings one object (a string cannot change) - the parse kept
  with its strings shared and marshalled (pickled when it holds other than plain data, such as
  a timestamp): the catalogue's copy in 14.7 ms of CPU, where an unpickled copy of botocore's own
  parse, each string its own object, took 20.1 ms (medians, one process). What botocore parses
  depends on nothing else (the body, the shape, the parser's class and its timestamp and blob
  parsers, all in the key); the response's status and headers are added to each copy by
  botocore as before.
- What botocore derives again for each new client from the same inputs. `botocore_memos()` keeps,
  for the process: each event name's aliased form (each client's emitter, a copy, starts its own
  memo of it empty, and every handler a client registers and every event it emits would alias
  its name again: per aliases table, one memo); whether a handler's function takes `**kwargs`
  (botocore asks `inspect` at every registration: by the function's code, which decides it, so
  no client's handler closure is kept); each user-agent component's sanitized text, and each
  client's whole User-Agent header (botocore builds it twice a request, from the client's
  `UserAgentString`, its config and the call's context features: `_user_agent_inputs`, about
  0.1 ms a call). Each is a pure function of what keys it: every answer is botocore's own.
- The signer. Where awscrt is installed (this venv: boto3's `crt` extra) botocore signs SigV4
  through it; the Lambda runtime has no awscrt, so the functions sign with botocore's own
  `SigV4Auth`. `lambdas_signer()` signs the tests' calls as the functions do there (and 15% cheaper
  a call: about 0.09 ms against the CRT's 0.11 ms).
"""

from __future__ import annotations

import marshal
import pickle
import types
from collections.abc import Callable, Iterable, Iterator
from contextlib import ExitStack, contextmanager
from functools import lru_cache
from typing import Any

import botocore.auth
import botocore.client
import botocore.context
import botocore.hooks
import botocore.loaders
import botocore.parsers
import botocore.session
import botocore.useragent

from tests.support.moto_images import MOTO_AMIS_PATH, use_the_images_tests_use

__all__ = [
    "LARGE_BODY_BYTES",
    "MOTO_AMIS_PATH",
    "botocore_memos",
    "for_a_run",
    "lambdas_signer",
    "open_for_the_process",
    "remembered_parses",
    "shared_botocore_loader",
    "use_the_images_tests_use",
]

# Bodies at least this long are remembered parsed: one zone's offerings (178 KB) parse in 13 to
# 27 ms, their copy unpickles in 0.4 ms; a body far smaller is seldom asked again byte for byte.
LARGE_BODY_BYTES = 128 * 1024
# Distinct large bodies kept (the catalogue, the zones' offerings' listings); more, and the one
# asked for least recently is let go (bodies that change with each call never push out these).
MOST_REMEMBERED_BODIES = 32


# The four caches when open for the rest of the process (`open_for_the_process`), else None.
_FOR_THE_PROCESS: ExitStack | None = None


def open_for_the_process() -> None:
    """Opens the four caches below for the rest of the process, once: what a process that forks
    runs (the simulation's fork server) loads and parses ahead, each child inherits, where each
    run opening them afresh would load and parse it again (`for_a_run`)."""
    global _FOR_THE_PROCESS
    if _FOR_THE_PROCESS is None:
        stack = ExitStack()
        stack.enter_context(shared_botocore_loader())
        stack.enter_context(remembered_parses())
        stack.enter_context(botocore_memos())
        stack.enter_context(lambdas_signer())
        _FOR_THE_PROCESS = stack


@contextmanager
def for_a_run() -> Iterator[None]:
    """The four caches for one run (a simulation's): those open for the process if they are,
    else opened now and closed with the run."""
    if _FOR_THE_PROCESS is not None:
        yield
        return
    with shared_botocore_loader(), remembered_parses(), botocore_memos(), lambdas_signer():
        yield


class _SearchPaths(list[str]):
    """A shared loader's search paths: boto3 adds its own data folder once per session."""

    def append(self, path: str) -> None:
        if path not in self:
            super().append(path)

    def extend(self, paths: Iterable[str]) -> None:
        for path in paths:
            self.append(path)


@contextmanager
def shared_botocore_loader() -> Iterator[None]:
    """While open, every new botocore session (and so boto3 session) uses one data loader per
    data path, so the JSON models are parsed once for all of them, and every client of a
    service made from that loader one model of it."""
    loaders: dict[str | None, botocore.loaders.Loader] = {}
    original = botocore.session.create_loader
    creator = botocore.client.ClientCreator
    original_model = creator._load_service_model
    models: dict[tuple[int, str, str | None], Any] = {}

    original_class = creator._create_client_class
    classes: dict[tuple[int, tuple[Any, ...]], type] = {}

    def create_client_class(self: Any, service_name: str, service_model: Any) -> Any:
        handlers = _class_handlers(self._event_emitter, service_model)
        if handlers is None or not any(service_model is m for m in models.values()):
            return original_class(self, service_name, service_model)
        key = (id(service_model), handlers)  # a shared model lives while this is open
        if key not in classes:
            classes[key] = original_class(self, service_name, service_model)
        return classes[key]

    def load_service_model(self: Any, service_name: str, api_version: str | None = None) -> Any:
        loader = self._loader
        if not any(loader is shared for shared in loaders.values()):
            return original_model(self, service_name, api_version)
        key = (id(loader), service_name, api_version)  # a shared loader lives while this is open
        if key not in models:
            models[key] = original_model(self, service_name, api_version)
        return models[key]

    def create_loader(search_path_string: str | None = None) -> botocore.loaders.Loader:
        loader = loaders.get(search_path_string)
        if loader is None:
            loader = original(search_path_string)
            loader._search_paths = _SearchPaths(loader.search_paths)
            loaders[search_path_string] = loader
        return loader

    botocore.session.create_loader = create_loader  # type: ignore[assignment]
    creator._load_service_model = load_service_model  # type: ignore[method-assign]
    creator._create_client_class = create_client_class  # type: ignore[method-assign]
    try:
        yield
    finally:
        botocore.session.create_loader = original
        creator._load_service_model = original_model  # type: ignore[method-assign]
        creator._create_client_class = original_class  # type: ignore[method-assign]
        models.clear()
        classes.clear()


def _class_handlers(emitter: Any, service_model: Any) -> tuple[Any, ...] | None:
    """The handlers a session runs on `creating-client-class` for `service_model`'s service, if
    all are module functions (what they add depends on nothing a session holds); else None."""
    name = f"creating-client-class.{service_model.service_id.hyphenize()}"
    try:
        aliased = emitter._alias_event_name(name)
        handlers = tuple(emitter._emitter._handlers.prefix_search(aliased))
    except AttributeError:  # another emitter than botocore's own
        return None
    if all(type(h) is types.FunctionType and h.__closure__ is None for h in handlers):
        return handlers
    return None


# What a body is remembered by, besides its length: its first and last bytes. Each answer's body
# is a new bytes object, and hashing all of it (Python hashes every byte, the catalogue's 5.8 MB
# in about 4 ms) cost more than comparing it to the one kept (under 1 ms).
FINGERPRINT_BYTES = 4096
# (the shape's table, how to thaw, the frozen parse, the body)
_Remembered = tuple[object, Callable[[bytes], Any], bytes, bytes]


def _fingerprint(body: bytes) -> tuple[int, bytes, bytes]:
    """The body's length, first and last bytes: a key the whole body is then compared against."""
    return len(body), body[:FINGERPRINT_BYTES], body[-FINGERPRINT_BYTES:]


@contextmanager
def remembered_parses() -> Iterator[dict[tuple[Any, ...], _Remembered]]:
    """While open, botocore parses each large query-protocol body (EC2's, SQS's XML) once per
    output shape, and answers the same bytes again with a copy of that parse. Yields the memo
    (key: the parser's class, timestamp and blob parsers, the shape, the body's `_fingerprint`;
    value: the shape's table, kept so that its id is not reused, the parse, frozen (`_frozen`),
    and the body, compared whole before a copy is given)."""
    remembered: dict[tuple[Any, ...], _Remembered] = {}
    original = botocore.parsers.QueryParser._do_parse

    def do_parse(parser: Any, response: dict[str, Any], shape: Any) -> Any:
        body = response["body"]
        if not isinstance(body, bytes) or len(body) < LARGE_BODY_BYTES:
            return original(parser, response, shape)
        # A shape is known by its service model's shape table (one per process: the loader is
        # shared) and its name.
        resolver = getattr(shape, "_shape_resolver", None)
        table = getattr(resolver, "_shape_map", None)
        key = (
            type(parser),
            _unbound(parser, parser._timestamp_parser),
            _unbound(parser, parser._blob_parser),
            id(table),
            getattr(shape, "name", None),
            _fingerprint(body),
        )
        kept = remembered.pop(key, None)
        if kept is None or kept[3] != body:  # new, or another body of the same fingerprint
            answer = original(parser, response, shape)
            if len(remembered) >= MOST_REMEMBERED_BODIES:
                del remembered[next(iter(remembered))]
            remembered[key] = (table, *_frozen(answer), body)
            return answer
        remembered[key] = kept  # the most recently asked for, last
        _, thaw, frozen, _ = kept
        return thaw(frozen)  # our own bytes, made by `_frozen`

    botocore.parsers.QueryParser._do_parse = do_parse  # type: ignore[method-assign]
    try:
        yield remembered
    finally:
        botocore.parsers.QueryParser._do_parse = original  # type: ignore[method-assign]
        remembered.clear()


def _frozen(answer: Any) -> tuple[Callable[[bytes], Any], bytes]:
    """`answer` as bytes, and what makes a copy of it from them: each dict and list a new one,
    equal strings one (immutable) object. Marshalled when it is plain data (dicts, lists,
    strings, numbers, booleans, None: marshal refuses any other type, a subclass too, so its
    copy is of the same types); else pickled."""
    shared = _strings_shared(answer, {}, {})
    try:
        return marshal.loads, marshal.dumps(shared)
    except ValueError:  # a timestamp, bytes or other object marshal does not write
        return pickle.loads, pickle.dumps(shared, pickle.HIGHEST_PROTOCOL)


def _strings_shared(value: Any, strings: dict[str, str], done: dict[int, Any]) -> Any:
    """A copy of `value`'s dicts and lists (one copy of each, as often as it is met) where
    equal strings are one object; every other value as it is."""
    kind = type(value)
    if kind is str:
        return strings.setdefault(value, value)
    if kind is not dict and kind is not list:
        return value
    copy = done.get(id(value))
    if copy is None:
        if kind is dict:
            copy = {
                _strings_shared(k, strings, done): _strings_shared(v, strings, done)
                for k, v in value.items()
            }
        else:
            copy = [_strings_shared(v, strings, done) for v in value]
        done[id(value)] = copy
    return copy


def _unbound(parser: Any, function: Any) -> Any:
    """A parser's own default (a method bound to it) as its class's function: alike for all."""
    if getattr(function, "__self__", None) is parser:
        return function.__func__
    return function


@contextmanager
def botocore_memos() -> Iterator[None]:
    """While open, every botocore emitter, handler check and user-agent build in the process
    shares one memo of what botocore derives from the same inputs (the module's docstring)."""
    aliaser = botocore.hooks.EventAliaser
    original_init = aliaser.__init__
    original_accepts = botocore.hooks.accepts_kwargs
    original_sanitize = botocore.useragent.sanitize_user_agent_string_component
    original_to_string = botocore.useragent.UserAgentString.to_string
    aliased: dict[tuple[tuple[str, str], ...], dict[str, str]] = {}
    takes_kwargs: dict[types.CodeType, Any] = {}
    user_agents: dict[tuple[Any, ...], str] = {}

    def init(self: Any, event_emitter: Any, event_aliases: Any = None) -> None:
        original_init(self, event_emitter, event_aliases)
        table = tuple(sorted(self._event_aliases.items()))
        self._alias_name_cache = aliased.setdefault(table, {})

    def accepts_kwargs(func: Callable[..., Any]) -> Any:
        code = _decisive_code(func)
        if code is None:
            return original_accepts(func)
        if code not in takes_kwargs:
            takes_kwargs[code] = original_accepts(func)
        return takes_kwargs[code]

    def to_string(self: Any) -> str:
        key = _user_agent_inputs(self)
        if key is None:
            return str(original_to_string(self))
        text = user_agents.get(key)
        if text is None:
            if len(user_agents) >= MOST_REMEMBERED_USER_AGENTS:
                user_agents.clear()
            text = user_agents[key] = original_to_string(self)
        return text

    aliaser.__init__ = init  # type: ignore[method-assign]
    botocore.hooks.accepts_kwargs = accepts_kwargs
    botocore.useragent.sanitize_user_agent_string_component = lru_cache(maxsize=4096)(
        original_sanitize
    )
    botocore.useragent.UserAgentString.to_string = to_string  # type: ignore[method-assign]
    try:
        yield
    finally:
        aliaser.__init__ = original_init  # type: ignore[method-assign]
        botocore.hooks.accepts_kwargs = original_accepts
        botocore.useragent.sanitize_user_agent_string_component = original_sanitize
        botocore.useragent.UserAgentString.to_string = original_to_string  # type: ignore[method-assign]


# The signers botocore uses without awscrt (botocore/auth.py, its `else` of `HAS_CRT`).
_SIGNERS_WITHOUT_CRT = {
    "v4": botocore.auth.SigV4Auth,
    "v4-query": botocore.auth.SigV4QueryAuth,
    "s3v4": botocore.auth.S3SigV4Auth,
    "s3v4-query": botocore.auth.S3SigV4QueryAuth,
}


@contextmanager
def lambdas_signer() -> Iterator[None]:
    """While open, botocore signs SigV4 with its own signers, as in the Lambda runtime (no awscrt);
    the signature versions that need awscrt (SigV4a) keep it."""
    maps = botocore.auth.AUTH_TYPE_MAPS
    before = {name: maps[name] for name in _SIGNERS_WITHOUT_CRT if name in maps}
    maps.update(_SIGNERS_WITHOUT_CRT)
    try:
        yield
    finally:
        for name in _SIGNERS_WITHOUT_CRT:
            maps.pop(name, None)
        maps.update(before)


# User-Agent headers kept (one per client setup and set of context features: a handful).
MOST_REMEMBERED_USER_AGENTS = 256
_ABSENT = object()
_MODIFY_COMPONENTS = botocore.useragent.modify_components


def _user_agent_inputs(agent: Any) -> tuple[Any, ...] | None:
    """Everything botocore's `UserAgentString.to_string` reads (botocore 1.x): the object's own
    fields (text, None, the client's feature set), the fields of its client config it reads, and
    the features of the call's context; None where anything is not plain (botocore builds it)."""
    if botocore.useragent.modify_components is not _MODIFY_COMPONENTS:
        return None
    fields: list[Any] = []
    for name, value in vars(agent).items():
        if name == "_client_config":
            continue
        if type(value) is set:
            value = frozenset(value)
        elif value is not None and type(value) not in (str, frozenset):
            return None
        fields.append((name, value))
    config = agent._client_config
    settings: tuple[Any, ...] | None = None
    if config is not None:
        retries = config.retries
        if retries is not None and type(retries) is not dict:
            return None
        settings = (
            getattr(config, "_supplied_user_agent", _ABSENT),
            config.user_agent,
            config.user_agent_extra,
            config.user_agent_appid,
            bool(retries),
            retries.get("mode") if retries else None,
            config.endpoint_discovery_enabled,
        )
    context = botocore.context.get_context()
    features = frozenset() if context is None else frozenset(context.features)
    try:
        key = (tuple(fields), settings, features)
        hash(key)
    except TypeError:
        return None
    return key


def _decisive_code(func: Callable[..., Any]) -> types.CodeType | None:
    """The code object that alone decides a plain function's (or bound method's) `**kwargs`, or
    None where something else may (a declared `__signature__`, a partial, a callable object)."""
    function = func.__func__ if isinstance(func, types.MethodType) else func
    if type(function) is not types.FunctionType or "__signature__" in function.__dict__:
        return None
    return function.__code__
