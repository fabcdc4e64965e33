"""Usage against limits and quotas: pool leases, quota admission, reclaim and the status views of
both."""
