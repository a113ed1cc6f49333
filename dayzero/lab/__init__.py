"""The lab's edge: transports to hosts, leases, preflight, deployments of rendered recipes."""
