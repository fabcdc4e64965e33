"""SQS: the emulator's clock for delays, visibility and retention; the caller as `SenderId`."""
