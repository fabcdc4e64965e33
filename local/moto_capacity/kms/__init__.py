"""KMS: a key's RSA private key made when first used, not with every key."""
