"""OME's CapacityReservation and ClusterCapacityReservation: conversion, status and how a request
associated with one is counted (docs/ome.md)."""
