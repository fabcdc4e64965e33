"""The local cloud: the service's template, functions and triggers emulated in this process over a
moto server, for developers and tests. Operators against AWS never need it."""
