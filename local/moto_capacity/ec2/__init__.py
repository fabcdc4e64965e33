"""EC2: Capacity Reservations and groups, Capacity Blocks, future-dated and interruptible
reservations, fleets and launches placed by capacity, eventual consistency, image platforms."""
