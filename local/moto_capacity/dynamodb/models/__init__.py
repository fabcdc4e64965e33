"""DynamoDB behaviour: transactions and queries at the cost of what they touch."""
