"""What can be launched where: requirements, offerings, reservations, planning a fleet, and what a
NodeClass resolves to."""
