"""The local cloud: the service's template, functions and triggers emulated in this process over a
moto server, for developers and tests. Operators against AWS never need it.

It builds on the operator CLI (a local cloud is a `Deployment`; the demo drives the CLI's
commands); the CLI loads it only for `local up`, `invoke` and `demo`."""
