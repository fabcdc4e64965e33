"""DynamoDB where moto is kinder or costlier than the service: validation, transactions that
cancel as DynamoDB does and cost what they touch, queries that cost their partition."""
