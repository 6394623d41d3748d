"""Shards: a deployment of several rqlite clusters, each execution wholly on one.

:mod:`.partitions` routes an id to its partition (no lookup), :mod:`raftflow.stores.catalog`
keeps which cluster holds each partition, and :class:`.deployment.Shards` is the set of
clusters a process opened, each a transport and a store on one database -- the pair an
unsharded engine has once.
"""
