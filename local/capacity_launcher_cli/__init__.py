"""The capacity-launcher CLI and the local cloud: operate the service with or without AWS."""
