# Packaging image for the kind node entrypoint: nothing but the static binary.
#
# The binary is built on the host (`make build` -> bin/entrypoint,
# CGO_ENABLED=0), so no Go toolchain image is needed here; that matters where
# no image registry can be reached. Build it with the repository root as the
# context (.dockerignore sends only bin/entrypoint):
#
#   make build && docker build -t kind-entrypoint:dev .
#
# Node images take the binary from it:
#
#   COPY --from=kind-entrypoint:dev /entrypoint /entrypoint
#   ENTRYPOINT ["/entrypoint", "/sbin/init"]
#
# Written for the classic builder as well as BuildKit (no COPY --chmod): the
# mode comes from the file, which `go build` makes 0755.
FROM scratch
COPY bin/entrypoint /entrypoint
# kind's base image runs /usr/local/bin/entrypoint; ship both paths.
COPY bin/entrypoint /usr/local/bin/entrypoint
ENTRYPOINT ["/entrypoint"]
