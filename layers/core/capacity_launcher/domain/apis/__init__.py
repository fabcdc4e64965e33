"""The served documents and their versions: the hub kinds (NodeClass, NodePool, CapacityQuota,
PriorityClass), Karpenter's, OME's and the v1alpha4 Provisioner's, converted to them."""
