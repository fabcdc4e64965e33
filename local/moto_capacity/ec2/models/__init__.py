"""EC2 behaviour: the capacity backend per account and region and everything it decides."""
