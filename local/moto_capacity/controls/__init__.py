"""The emulator's controls, apart from the services they drive: the in-process control API
(`models`), the `/moto-capacity/...` HTTP endpoints (`responses`), and the hook that applies
faults, latency and call counts to every moto operation (`dispatch`)."""
