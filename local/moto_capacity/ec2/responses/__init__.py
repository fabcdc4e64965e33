"""EC2 wire format: parameters in, answers out; copied onto moto's `EC2Response`."""
