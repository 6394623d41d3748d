-- Migration 14: shards -- a deployment of several rqlite clusters, executions routed by id.
--
-- Each cluster of a sharded deployment knows its own name and which catalog it belongs to
-- (`shard_identity`, one row, written once); the first cluster of the deployment also
-- holds the catalog (`shard_catalog`, one row): the number of partitions, fixed when the
-- deployment is created, and which cluster holds each, with an epoch that a move of a
-- partition increments (stores/catalog.py). An unsharded database has neither row.
--
-- Rolling upgrade: workers of version 13 keep running beside version 14 on an unsharded
-- database (two new tables, which they neither read nor write).

-- name: shard_identity
CREATE TABLE shard_identity (
  id         INTEGER PRIMARY KEY CHECK (id = 1),
  name       TEXT NOT NULL,                 -- this cluster's name in its catalog
  catalog    TEXT NOT NULL,                 -- the name of the cluster holding the catalog
  created_at REAL NOT NULL
);

-- name: shard_catalog
CREATE TABLE shard_catalog (
  id          INTEGER PRIMARY KEY CHECK (id = 1),
  partitions  INTEGER NOT NULL CHECK (partitions > 0),
  epoch       INTEGER NOT NULL,               -- +1 on every change of `assignment`
  assignment  TEXT NOT NULL,                  -- JSON: the cluster name of each partition
  created_at  REAL NOT NULL,
  updated_at  REAL NOT NULL
);
