"""capacity-launcher: launch EC2 instances into On-Demand Capacity Reservations first."""
