"""The one composition root: every adapter and use case is built here, one way, from `Adapters`.

A handler builds one `Adapters` per Lambda container, at init, from its Settings and the host it
runs on (`capacity_launcher.startup.Host`: the clock the container tells the time by, and how it
waits), and keeps the use case it takes from it for the container's life. The CLI, benchmarks,
the local cloud and tests build their own, with their own Settings, client factory
(`clients(service) -> boto3 client`; by default the container's shared clients), clock and pause.
This is the only service module that imports adapters (import-linter holds it: `make lint`).
"""

from __future__ import annotations

from datetime import timedelta
from typing import TYPE_CHECKING

from capacity_launcher.adapters.capacity_reservations import CapacityReservations
from capacity_launcher.adapters.config_store import ConfigStore
from capacity_launcher.adapters.fleet import Fleet
from capacity_launcher.adapters.instance_types import InstanceTypeCatalog
from capacity_launcher.domain.capacity.idle_reservations import IdlePolicy
from capacity_launcher.domain.capacity.reservation_state import Thresholds
from capacity_launcher.service.ports import LaunchPorts
from capacity_launcher.service.quota_reclaim import ReclaimRequests
from capacity_launcher.service.wiring.stores import Clock as Clock  # the CLI names it
from capacity_launcher.service.wiring.stores import Stores

if TYPE_CHECKING:  # each use case's modules are imported when it is built: a function's cold
    # start imports its own use case's, not the others'
    from aws_lambda_powertools.utilities.idempotency import IdempotencyConfig

    from capacity_launcher.adapters.instance_profiles import InstanceProfiles
    from capacity_launcher.adapters.shared_resolutions import SharedResolutions
    from capacity_launcher.adapters.usage_store import UsageStore
    from capacity_launcher.service.admission_queue import AdmissionQueue
    from capacity_launcher.service.configuration import Configuration
    from capacity_launcher.service.instance_events import InstanceEvents
    from capacity_launcher.service.launch import LaunchBatch
    from capacity_launcher.service.preview import DryRun
    from capacity_launcher.service.queries import Queries
    from capacity_launcher.service.queue_view import QueueView
    from capacity_launcher.service.quota_sync import QuotaSync
    from capacity_launcher.service.reconciliation import Reconciliation
    from capacity_launcher.service.request_block_ends import RequestBlockEnds
    from capacity_launcher.service.reservation_sync import ReservationSync
    from capacity_launcher.service.resolution_sync import ResolutionSync
    from capacity_launcher.service.static_pools import StaticPools


class Adapters(Stores):
    """Every use case of one container, built over its stores (`Stores`), on one clock."""

    def admission_queue(self, config: ConfigStore | None = None) -> AdmissionQueue:
        """The admission queues (issue 37): entries in the state table, woken by sending a
        waiting request's message to the launch queue again, ordered by the quotas' and their
        cohort trees' shares (`config`: its copy of both, one Query; cached by default)."""
        from capacity_launcher.adapters.admission_queue import AdmissionQueueItems
        from capacity_launcher.adapters.launch_queue import LaunchQueue
        from capacity_launcher.service.admission_queue import AdmissionQueue

        items = AdmissionQueueItems(self.settings.state_table_name, self.clients("dynamodb"))
        queue = LaunchQueue(self.clients("sqs"))
        config = config or self.config_store(cached=True)
        return AdmissionQueue(
            items,
            self.launch_records(),
            queue,
            config.capacity_quotas,
            self.quota_usage(),
            lambda: config.quota_set().cohorts,
        )

    def reclaim_requests(self, config: ConfigStore | None = None) -> ReclaimRequests:
        """The launcher's side of reclaim: ask for lent quota back, publish the request."""
        config = config or self.config_store(cached=True)
        return ReclaimRequests(
            quotas=config.capacity_quotas,
            members=self.pool_members(config),
            quota_usage=self.quota_usage(),
            items=self.instance_records(),
            reclaims=self.quota_reclaims(),
            publish=self.publisher().publish,
            now=self.clock,
            cohorts=lambda: config.quota_set().cohorts,
            # A preemption is judged on the pool's limits too (stored, strongly consistent),
            # under the policies as stored when it is decided.
            pools=self.pool_leases(config),
            stored=lambda: config.capacity_quotas(fresh=True),
        )

    def shared_resolutions(self) -> SharedResolutions:
        """A launcher container's copy of the NodeClasses' resolutions the sync shares."""
        from capacity_launcher.adapters.shared_resolutions import (
            ResolutionStore,
            SharedResolutions,
        )

        store = ResolutionStore(self.settings.state_table_name, self.clients("dynamodb"))
        return SharedResolutions(store, clock=self.seconds)

    def resolution_sync(self) -> ResolutionSync:
        """The sync's part that resolves each NodeClass once for every launcher container."""
        from capacity_launcher.adapters.node_class_resolution import NodeClassResolution
        from capacity_launcher.adapters.shared_resolutions import ResolutionStore
        from capacity_launcher.service.resolution_sync import ResolutionSync

        config = self.config_store()
        catalog = InstanceTypeCatalog.the_syncs(self.clients("ec2"))  # kept across runs
        return ResolutionSync(
            classes=config.node_classes,
            store=ResolutionStore(self.settings.state_table_name, self.clients("dynamodb")),
            resolvers=lambda: NodeClassResolution(
                self.clients("ec2"), self.clients("ssm"), clock=self.clock, catalog=catalog
            ),
            now=self.seconds,
        )

    # -- the launcher --------------------------------------------------------------------------

    def idempotency_config(self) -> IdempotencyConfig:
        from aws_lambda_powertools.utilities.idempotency import IdempotencyConfig

        return IdempotencyConfig(
            event_key_jmespath="requestId",
            expires_after_seconds=self.settings.idempotency_ttl_seconds,
        )

    def instance_profiles(self, *, read_only: bool = False) -> InstanceProfiles:
        """The NodeClasses' roles' instance profiles, this deployment's (its state table);
        `read_only`: checked, never made (a dry run)."""
        from capacity_launcher.adapters.instance_profiles import InstanceProfiles

        return InstanceProfiles(
            self.settings.state_table_name, self.clients("iam"), read_only=read_only
        )

    def launch_ports(self, *, read_only: bool = False) -> LaunchPorts:
        """`read_only`: for a preview (`submit --dry-run`), whose steps make nothing in AWS."""
        # Only the launcher builds these: the sync's and instance events' cold starts skip them.
        from capacity_launcher.adapters.launch_templates import LaunchTemplates
        from capacity_launcher.adapters.static_pool_items import StaticPoolItems
        from capacity_launcher.adapters.subnets import Subnets

        ec2 = self.clients("ec2")
        # The sync's resolution of each NodeClass, read once instead of a Describe per kind.
        shared = self.shared_resolutions()
        # One copy of the configuration: when a lease finds the quotas changed and reads them
        # again, resolution and reclaim see what it decided with.
        config = self.config_store(cached=True)
        return LaunchPorts(
            config=config,
            records=self.launch_records(),
            instances=self.instance_records(),
            unavailable=self.unavailable_offerings(local_copy=True),
            leases=self.pool_leases(config),
            fleet=Fleet(ec2, self.pause),
            templates=LaunchTemplates(
                ec2,
                stack=self.settings.stack_name,
                clock=self.clock,
                profiles=self.instance_profiles(read_only=read_only),
                shared=shared,
            ),
            catalog=InstanceTypeCatalog(ec2, shared),
            subnets=Subnets(ec2, shared),
            reservations=self.reservations(),
            reclaims=self.reclaim_requests(config),
            static_pools=StaticPoolItems(self.settings.state_table_name, self.clients("dynamodb")),
            open_reservations=shared,
        )

    def launch_batch(
        self, config: IdempotencyConfig, ports: LaunchPorts | None = None
    ) -> LaunchBatch:
        """A launch batch processor; `ports` replaces the adapters (benchmarks swap the ICE
        cache)."""
        from aws_lambda_powertools.utilities.idempotency import DynamoDBPersistenceLayer

        from capacity_launcher.adapters.launch_queue import LaunchQueue
        from capacity_launcher.adapters.request_claims import RequestClaims
        from capacity_launcher.service.launch import LaunchBatch, Launcher
        from capacity_launcher.service.telemetry import LaunchTelemetry

        settings = self.settings
        ports = ports or self.launch_ports()
        persistence = DynamoDBPersistenceLayer(
            table_name=settings.idempotency_table_name, boto3_client=self.clients("dynamodb")
        )
        persistence.configure(config, function_name="launch")
        return LaunchBatch(
            Launcher(
                ports,
                max_attempts=settings.max_launch_attempts,
                clock=self.clock,
                sleep=self.pause,
                stack=settings.stack_name,
            ),
            self.publisher().publish,
            ports.records,
            RequestClaims(persistence),
            LaunchTelemetry(ports.config.capacity_quotas),
            queue=LaunchQueue(),
            clock=self.clock,
            admission=self.admission_queue(),
        )

    # -- the lifecycle: reservation sync (with reconciliation) and instance events --------------

    def reconciliation(self) -> Reconciliation:
        # The lifecycle's modules are imported when it is built: the launcher's cold start skips
        # them.
        from capacity_launcher.service.reconciliation import Reconciliation

        # One cached copy of the quotas: where a counted instance holds quota usage.
        quotas = self.config_store(cached=True)
        return Reconciliation(
            leases=self.pool_leases(quotas),
            members=self.pool_members(quotas),
            usage=self.pool_usage(),
            instances=self.fleet(),
            items=self.instance_records(),
            facts=InstanceTypeCatalog(self.clients("ec2")),
            pools=self.config_store(kept=True),
            now=self.clock,
            ownership=self.ownership(),
        )

    def reservation_sync(self) -> ReservationSync:
        from capacity_launcher.adapters.template_inventory import TemplateInventory
        from capacity_launcher.service.profile_sweep import ProfileSweep
        from capacity_launcher.service.reservation_sync import ReservationSync
        from capacity_launcher.service.sync_metrics import WaitGauges
        from capacity_launcher.service.template_sweep import TemplateSweep
        from capacity_launcher.service.usage_rollup import UsageRollup
        from capacity_launcher.service.wait_backstop import WaitBackstop

        settings = self.settings
        return ReservationSync(
            config=self.config_store(kept=True),
            ec2=CapacityReservations(clients=self.clients),
            snapshots=self.reservation_snapshots(),
            unavailable=self.unavailable_offerings(),
            publish=self.publisher().publish,
            thresholds=Thresholds(
                utilization_high=settings.utilization_high_threshold,
                expiring_horizon=timedelta(hours=settings.expiring_horizon_hours),
                block_expiring_horizon=timedelta(minutes=settings.block_expiring_minutes),
                idle=IdlePolicy(
                    threshold=settings.idle_utilization_threshold,
                    period=timedelta(hours=settings.idle_period_hours),
                ),
            ),
            now=self.clock,
            reconciliation=self.reconciliation(),
            quotas=self.quota_sync(),
            waits=WaitBackstop(self.launch_records(), self.publisher().publish, self.clock),
            gauges=WaitGauges(
                self.launch_records(), self.config_store().capacity_quotas, self.clock
            ),
            # Built when the part runs: the configuration's stores stay out of the sync's init.
            classes_applied=lambda: self.configuration().resolve_waiting_reservations(),
            readiness=self.pool_readiness(),
            templates=TemplateSweep(
                TemplateInventory(self.clients("ec2"), ownership=self.ownership()), self.clock
            ),
            profiles=ProfileSweep(self.instance_profiles(), self.fleet(), self.ownership()),
            admission=self.admission_queue(),
            static_pools=self.static_pools(),
            usage=UsageRollup(self.usage_store(), self.instance_records(), self.clock),
            resolutions=self.resolution_sync(),
            request_block_ends=self.request_block_ends(),
        )

    def request_block_ends(self) -> RequestBlockEnds | None:
        """Before a Capacity Block ends, for requests that opted in (None: no launch queue)."""
        from capacity_launcher.adapters.launch_queue import LaunchQueue
        from capacity_launcher.adapters.request_block_end_items import RequestBlockEndItems
        from capacity_launcher.service.block_ends import BlockEnds
        from capacity_launcher.service.request_block_ends import RequestBlockEnds

        url = self.settings.launch_queue_url
        if url is None:
            return None
        queue = LaunchQueue(self.clients("sqs"))
        return RequestBlockEnds(
            config=self.config_store(),
            instances=self.instance_records(),
            records=self.launch_records(),
            states=RequestBlockEndItems(self.settings.state_table_name, self.clients("dynamodb")),
            block_ends=BlockEnds(CapacityReservations(clients=self.clients)),
            send=lambda body: queue.send(url, body),
            terminate=self.fleet().terminate,
            publish=self.publisher().publish,
            clock=self.clock,
        )

    def static_pools(self) -> StaticPools | None:
        """Static NodePools' keeper, run by the sync (None: no launch queue to send to)."""
        from capacity_launcher.adapters.launch_queue import LaunchQueue
        from capacity_launcher.adapters.static_pool_items import StaticPoolItems
        from capacity_launcher.adapters.subnets import Subnets
        from capacity_launcher.service.block_ends import BlockEnds
        from capacity_launcher.service.static_pools import StaticPools

        url = self.settings.launch_queue_url
        if url is None:
            return None
        queue = LaunchQueue(self.clients("sqs"))
        config = self.config_store()
        return StaticPools(
            config=config,
            subnets=Subnets(self.clients("ec2")),
            members=self.pool_members(config),
            instances=self.instance_records(),
            records=self.launch_records(),
            states=StaticPoolItems(self.settings.state_table_name, self.clients("dynamodb")),
            send=lambda body: queue.send(url, body),
            terminate=self.fleet().terminate,
            clock=self.clock,
            reservations=self.reservations(),
            block_ends=BlockEnds(CapacityReservations(clients=self.clients)),
            publish=self.publisher().publish,
        )

    def usage_store(self) -> UsageStore:
        """Usage by team: the day items the sync rolls up, `capacity-launcher usage` reads."""
        from capacity_launcher.adapters.usage_store import UsageStore

        return UsageStore(self.settings.state_table_name, self.clients("dynamodb"))

    def quota_sync(self) -> QuotaSync:
        """The sync's quota share: reclaims due, quota usage recount, the status `get quotas`
        reads. A reclaimed instance is released through the instance events' own gated path."""
        from capacity_launcher.adapters.quota_statuses import QuotaStatuses
        from capacity_launcher.service.quota_sync import QuotaSync
        from capacity_launcher.service.reclaim_enforcement import ReclaimEnforcement

        config = self.config_store(kept=True)
        usage = self.quota_usage()
        return QuotaSync(
            quotas=config.capacity_quotas,
            pools=lambda: [p.metadata.name for p in config.node_pools()],
            quota_usage=usage,
            statuses=QuotaStatuses(self.settings.state_table_name, self.clients("dynamodb")),
            enforcement=ReclaimEnforcement(
                # Read when a reclaim is enforced, strongly consistent: the policy of that moment.
                quotas=lambda: config.capacity_quotas(fresh=True),
                members=self.pool_members(),
                quota_usage=usage,
                reclaims=self.quota_reclaims(),
                fleet=self.fleet(),
                release=self.instance_events().state_changed,
                publish=self.publisher().publish,
                now=self.clock,
                waiting=self.launch_records().still_waiting,
                # The copy the fresh read of the quotas above refreshed, read with them.
                cohorts=lambda: config.quota_set().cohorts,
                pools=self.pool_leases(config),
            ),
            now=self.clock,
        )

    def instance_events(self) -> InstanceEvents:
        from capacity_launcher.service.instance_events import InstanceEvents

        return InstanceEvents(
            items=self.instance_records(),
            members=self.pool_members(),
            usage=self.pool_usage(),
            reservations=self.reservation_snapshots(),
            unavailable=self.unavailable_offerings(),
            publish=self.publisher().publish,
            now=self.clock,
            pools=self.config_store(),
            wake=self.admission_queue().wake,
        )

    # -- the operators' tools: configuration, queries, the dry run ------------------------------

    def configuration(self) -> Configuration:
        """`apply` and `delete`: every document through its own store, uncached."""
        from capacity_launcher.service.configuration import Configuration

        config = self.config_store()
        return Configuration(
            config, config.priority_classes(), wake=self.admission_queue().wake_all
        )

    def queries(self) -> Queries:
        """What `get`, `describe` and `top` read, uncached: the state of this moment."""
        from capacity_launcher.adapters.node_class_resolution import NodeClassResolution
        from capacity_launcher.adapters.quota_statuses import QuotaStatuses
        from capacity_launcher.service.queries import Queries

        config = self.config_store()
        return Queries(
            config=config,
            priority_classes=config.priority_classes(),
            records=self.launch_records(),
            instances=self.instance_records(),
            pool_usage=self.pool_usage(),
            readiness=self.pool_readiness(marks=False),  # counts only: `get` needs no EC2 client
            leases=lambda: self.pool_leases(config),
            quota_usage=self.quota_usage(),
            quota_statuses=QuotaStatuses(self.settings.state_table_name, self.clients("dynamodb")),
            snapshots=self.reservation_snapshots(),
            reservations_now=lambda: CapacityReservations(clients=self.clients),
            unavailable=self.unavailable_offerings(),
            resolvers=lambda: NodeClassResolution(
                self.clients("ec2"), self.clients("ssm"), clock=self.clock
            ),
            profiles=lambda: self.instance_profiles(read_only=True),
            now=self.clock,
            usage=self.usage_store(),
        )

    def queue_view(self) -> QueueView:
        """`get queues`: each pool's waiting requests with their positions, read now."""
        from capacity_launcher.adapters.admission_queue import AdmissionQueueItems
        from capacity_launcher.service.queue_view import QueueView

        items = AdmissionQueueItems(self.settings.state_table_name, self.clients("dynamodb"))
        config = self.config_store()
        return QueueView(
            items, self.launch_records(), lambda: [p.metadata.name for p in config.node_pools()]
        )

    def dry_run(self) -> DryRun:
        """`submit --dry-run`: the launcher's own steps through its ports, read-only."""
        from capacity_launcher.service.launch.progress import Context
        from capacity_launcher.service.preview import DryRun, Usage

        context = Context(
            self.launch_ports(read_only=True),
            clock=self.clock,
            max_attempts=self.settings.max_launch_attempts,
            sleep=self.pause,
        )
        from capacity_launcher.adapters.admission_queue import AdmissionQueueItems

        queues = AdmissionQueueItems(self.settings.state_table_name, self.clients("dynamodb"))
        usage = Usage(self.pool_usage(), self.quota_usage(), self.pool_readiness(), queues)
        return DryRun(context, usage)
