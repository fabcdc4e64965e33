"""Karpenter's documents as written (karpenter.sh NodePool, karpenter.k8s.aws EC2NodeClass, v1 and
v1beta1), converted to and from the capacity-launcher/v1 hubs (docs/karpenter.md)."""
