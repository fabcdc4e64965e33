"""What is stored and published of each request and instance: records, events, intents, tags and
the bounds they keep."""
