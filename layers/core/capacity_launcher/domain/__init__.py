"""Pure domain logic: no boto3, no I/O. Import from the modules themselves."""
