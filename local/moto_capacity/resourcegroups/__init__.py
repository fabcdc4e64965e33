"""resource-groups: Capacity Reservation groups (the `AWS::EC2::CapacityReservationPool`
configuration) and the GroupResources/UngroupResources/ListGroupResources actions."""
