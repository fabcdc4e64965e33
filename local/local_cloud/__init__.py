"""The local cloud: the service's template, functions and triggers emulated in this process over a
moto server, for developers and tests. Operators against AWS never need it.

It builds on the operator CLI and its client (a local cloud is a `Deployment`; the demo drives
the CLI's commands), never the other way round: the CLI finds `local up`, `invoke` and `demo`
through the entry point local_cloud.commands registers, and loads the rest only when they run."""
