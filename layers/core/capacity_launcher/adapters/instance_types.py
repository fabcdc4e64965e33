"""Instance-type facts and where they are offered (DescribeInstanceTypes / ...Offerings), cached."""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Mapping
from functools import lru_cache
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

from capacity_launcher.adapters.aws import all_pages, aws_call, client, in_chunks, most_per_call
from capacity_launcher.adapters.cache import TtlCache
from capacity_launcher.domain.aws_errors import requirement_key
from capacity_launcher.domain.capacity.instance_types import EC2_ARCHITECTURES, InstanceTypeInfo
from capacity_launcher.domain.capacity.shared_resolution import MAX_AGE_SECONDS
from capacity_launcher.domain.errors import LaunchFailed, UnknownRequirementValues

if TYPE_CHECKING:  # pragma: no cover - typing only
    from capacity_launcher.adapters.shared_resolutions import SharedResolutions

# Instance-type facts change with AWS launches, not minutes; offerings per zone change rarely.
INSTANCE_TYPES_TTL_SECONDS = 3600.0
OFFERINGS_TTL_SECONDS = 600.0

# Pinned types up to this many are asked for by name (an EC2 filter's values); more, or none
# pinned, and the zones' whole listing is read (about a thousand offerings a zone).
MAX_PINNED_FILTER_VALUES = 200
# Answers the sync's catalog keeps built (one a zone set its classes' subnets span): each due
# class gets the types it got, not the region's types built anew.
SYNC_ANSWERS_KEPT = 16


class InstanceTypeCatalog:
    def __init__(
        self,
        ec2: Any | None = None,
        shared: SharedResolutions | None = None,
        *,
        types_seconds: float = INSTANCE_TYPES_TTL_SECONDS,
        offerings_seconds: float = OFFERINGS_TTL_SECONDS,
        answers_kept: int = 0,
    ) -> None:
        """`shared`: the resolutions the sync shares, asked first (a launcher's); the seconds
        its copies are kept (the sync's are shorter: a launcher may hold what it shares);
        `answers_kept`: how many answers are kept built (the sync's: it asks the same questions
        each run), each a region's types at most."""
        self._ec2 = ec2 or client("ec2")
        self._shared = shared
        self._types: TtlCache[dict[str, InstanceTypeInfo]] = TtlCache(types_seconds)
        self._offered: TtlCache[dict[str, frozenset[str]]] = TtlCache(offerings_seconds)
        # Each answer as last built, with the two listings (the cached objects) it was built
        # from: while both are still the ones cached, the same question gets the same types
        # again, not each of the region's types built anew.
        self._built: dict[Hashable, tuple[object, object, tuple[InstanceTypeInfo, ...]]] = {}
        self._answers_kept = answers_kept
        self._known: tuple[object, frozenset[str]] | None = None

    @classmethod
    def the_syncs(cls, ec2: Any) -> InstanceTypeCatalog:
        """The sync's catalog, kept across its runs: its copies kept for a launcher's TTLs less
        the time a launcher may hold what is shared (a launcher never holds instance types older
        than its own catalog's TTLs allowed before), and its answers kept built."""
        return cls(
            ec2,
            types_seconds=INSTANCE_TYPES_TTL_SECONDS - MAX_AGE_SECONDS,
            offerings_seconds=OFFERINGS_TTL_SECONDS - MAX_AGE_SECONDS,
            answers_kept=SYNC_ANSWERS_KEPT,
        )

    def offered(
        self, zones: Iterable[str], names: Iterable[str] | None = None
    ) -> list[InstanceTypeInfo]:
        """Instance types offered in any of `zones`, each with the subset of zones offering it.

        `names` narrows the lookup when the requirements pin instance types (ODCR users usually do),
        so a cold container asks EC2 for a handful of types instead of every type in the region:
        their facts, and where they are offered (parsing every offering of two zones is a cold
        launcher's largest single piece of CPU). A shared resolution over these zones answers
        first (adapters/shared_resolutions.py), unless a name may be one EC2 does not know.
        """
        zone_key = tuple(sorted(zones))
        name_key = tuple(sorted(names)) if names is not None else None
        if self._shared is not None:
            shared = self._shared.offered(zone_key, name_key)
            if shared is not None:
                return shared
        pinned = name_key if name_key and len(name_key) <= MAX_PINNED_FILTER_VALUES else None
        zones_by_type = self._offered.get_or_load(
            (zone_key, pinned), lambda: self._load_offerings(zone_key, pinned)
        )
        facts = self._types.get_or_load(
            name_key, lambda: self._load_types(name_key, zones_by_type.keys())
        )
        built = self._built.get((zone_key, name_key))
        if built is not None and built[0] is facts and built[1] is zones_by_type:
            return list(built[2])
        wanted = [n for n in (name_key or zones_by_type) if n in zones_by_type]
        result = []
        for name in sorted(wanted):
            info = facts.get(name)
            if info is not None:
                result.append(info.in_zones(zones_by_type[name]))
        if self._answers_kept:
            if len(self._built) >= self._answers_kept:
                self._built.clear()
            self._built[(zone_key, name_key)] = (facts, zones_by_type, tuple(result))
        return result

    def known(self) -> frozenset[str]:
        """Every instance type EC2 knows in the region, by name (one listing, cached; the same
        set while the listing is the one cached)."""
        listing = self._types.get_or_load(None, lambda: self._load_types(None))
        known = self._known
        if known is None or known[0] is not listing:
            known = self._known = (listing, frozenset(listing))
        return known[1]

    def _load_offerings(
        self, zones: tuple[str, ...], names: tuple[str, ...] | None
    ) -> dict[str, frozenset[str]]:
        """Where each type is offered among `zones` (only `names` when given)."""
        found: dict[str, set[str]] = {}
        filters = [{"Name": "location", "Values": list(zones)}]
        if names:
            filters.append({"Name": "instance-type", "Values": list(names)})
        with aws_call("DescribeInstanceTypeOfferings", fatal=LaunchFailed):
            pages = all_pages(
                self._ec2.describe_instance_type_offerings,
                LocationType="availability-zone",
                Filters=filters,
            )
            for page in pages:
                for offering in page["InstanceTypeOfferings"]:
                    found.setdefault(offering["InstanceType"], set()).add(offering["Location"])
        return {name: frozenset(z) for name, z in found.items()}

    def _load_types(
        self, names: tuple[str, ...] | None, offered: Iterable[str] = ()
    ) -> dict[str, InstanceTypeInfo]:
        """Facts of `names` (every type when None); UnknownRequirementValues naming those EC2
        does not know (it refuses the whole call for one unknown name)."""
        try:
            raw = self._describe(names)
        except LaunchFailed as refused:
            key = requirement_key(refused.code)
            if key is None or not names:
                raise
            # A type offered in a zone exists: only the others can be the unknown ones.
            maybe = [n for n in names if n not in set(offered)]
            unknown = [n for n in maybe if self._unknown(n)] or list(names)
            raise UnknownRequirementValues(refused.code, key, unknown, refused.reason) from refused
        return {t["InstanceType"]: instance_type_info(t) for t in raw}

    def _describe(self, names: Iterable[str] | None) -> list[dict[str, Any]]:
        """Facts of `names` (every type when None), asked in calls of as many names as EC2
        takes (100): a pool may pin any number of types, as Karpenter's may."""
        if not names:
            return self._describe_page({})
        most = most_per_call(self._ec2, "DescribeInstanceTypes", "InstanceTypes")
        return [
            t
            for chunk in in_chunks(names, most)
            for t in self._describe_page({"InstanceTypes": chunk})
        ]

    def _describe_page(self, kwargs: dict[str, Any]) -> list[dict[str, Any]]:
        with aws_call("DescribeInstanceTypes", fatal=LaunchFailed):
            pages = all_pages(self._ec2.describe_instance_types, **kwargs)
            return [t for page in pages for t in page["InstanceTypes"]]

    def _unknown(self, name: str) -> bool:
        """Whether EC2 says this one instance type does not exist (asked alone)."""
        try:
            self._describe([name])
        except LaunchFailed as refused:
            if requirement_key(refused.code) is None:
                raise
            return True
        return False


def instance_type_info(raw: Mapping[str, Any]) -> InstanceTypeInfo:
    """EC2's DescribeInstanceTypes item as the domain's facts (a cold container makes one for
    each of the region's types: most have no GPU, accelerator or second architecture)."""
    gpus = raw.get("GpuInfo", _NONE).get("Gpus", ())
    architectures = _architectures(
        tuple(raw.get("ProcessorInfo", _NONE).get("SupportedArchitectures", ()))
    )
    accelerated = "NeuronInfo" in raw or "InferenceAcceleratorInfo" in raw
    accelerator = _accelerator(raw) if accelerated else _NONE
    gpu = gpus[0] if gpus else _NONE
    return InstanceTypeInfo(
        name=raw["InstanceType"],
        architectures=architectures,
        vcpu=int(raw.get("VCpuInfo", _NONE).get("DefaultVCpus", 0)),
        memory_mib=int(raw.get("MemoryInfo", _NONE).get("SizeInMiB", 0)),
        gpu_count=sum(int(g.get("Count", 0)) for g in gpus) if gpus else 0,
        gpu_name=gpu.get("Name"),
        gpu_manufacturer=gpu.get("Manufacturer"),
        local_nvme_gb=_local_nvme_gb(raw.get("InstanceStorageInfo")),
        accelerator_count=int(accelerator.get("Count", 0)),
        accelerator_name=accelerator.get("Name"),
        accelerator_manufacturer=accelerator.get("Manufacturer"),
    )


_NONE: Mapping[str, Any] = MappingProxyType({})


@lru_cache(maxsize=64)
def _architectures(supported: tuple[str, ...]) -> tuple[str, ...]:
    """EC2's SupportedArchitectures as the domain's (a region lists a handful of distinct ones):
    i386 is left out (no 64-bit image runs as it); Mac types keep their own architecture."""
    known = tuple(EC2_ARCHITECTURES[a] for a in supported if a in EC2_ARCHITECTURES)
    return known or ("amd64",)


def _accelerator(raw: Mapping[str, Any]) -> Mapping[str, Any]:
    """The type's AWS accelerator device as Karpenter reads it: NeuronInfo's one device (its
    maker AWS), else InferenceAcceleratorInfo's one accelerator; empty when neither has one."""
    neuron = (raw.get("NeuronInfo") or {}).get("NeuronDevices") or []
    if len(neuron) == 1:
        return {**neuron[0], "Manufacturer": "AWS"}
    accelerators = (raw.get("InferenceAcceleratorInfo") or {}).get("Accelerators") or []
    return accelerators[0] if len(accelerators) == 1 else {}


def _local_nvme_gb(storage: Mapping[str, Any] | None) -> int | None:
    """The instance store's total GB when it is NVMe (as Karpenter labels instance-local-nvme)."""
    if not storage or storage.get("NvmeSupport") == "unsupported":
        return None
    total = storage.get("TotalSizeInGB")
    return None if total is None else int(total)
