"""The connections the queue and the store run on: one database chosen by URL, requests as
I/O-free flows, named SQL catalogues, the versioned schema and the cluster's clock."""
