"""What every part of the extension shares: the emulator's clock, the per-operation fault,
latency and call-count state, the errors any service may answer, and how moto is patched."""
