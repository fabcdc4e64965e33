"""moto's own tests run with moto_capacity installed: `make moto-dropin` (see `run`)."""
