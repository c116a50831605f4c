# syntax=docker/dockerfile:1
# mayfly in a container.
#   docker build -t mayfly .                      # the server image (last stage)
#   docker run -p 27017:27017 -v mayfly-data:/data mayfly
#   docker run -e MAYFLY_INITDB_ROOT_USERNAME=admin -e MAYFLY_INITDB_ROOT_PASSWORD=secret ... mayfly
#     (as the mongo image's MONGO_INITDB_ROOT_*: turns on --auth and creates that root user in
#     admin on first start)
#   docker compose up --build --exit-code-from compat   # server + compat suites
#
# Stages: build (static binary), compat (Go + Node.js + the compat suites, used
# by docker-compose.yml), and the runtime image: alpine, non-root, data in /data.

ARG GO_VERSION=1.26
ARG NODE_VERSION=22

FROM golang:${GO_VERSION} AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN CGO_ENABLED=0 go build -trimpath -ldflags="-s -w" -o /out/mayfly ./cmd/mayfly

# The compat runner: scripts/compat.sh mongodb://mayfly:27017 runs the Go
# driver suite, mongosh and the Node.js driver against the mayfly service.
FROM node:${NODE_VERSION} AS compat
COPY --from=build /usr/local/go /usr/local/go
ENV PATH=/usr/local/go/bin:$PATH \
    CI=1 \
    MONGOSH_FORCE_DISABLE_TELEMETRY_FOR_TESTING=1
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
# Install mongosh and the Node.js driver into .cache/ and compile the suite
# now, so the run itself needs no network.
RUN scripts/compat.sh --install-only && go test -c -o /tmp/compat.test ./compat/ && rm /tmp/compat.test
CMD ["scripts/compat.sh", "mongodb://mayfly:27017"]

# The server: a static binary on alpine (busybox gives the healthcheck its
# nc/od), running as an unprivileged user with its data in the /data volume.
FROM alpine:3.20
RUN addgroup -S -g 10001 mayfly && adduser -S -D -H -u 10001 -G mayfly mayfly \
    && mkdir -p /data && chown mayfly:mayfly /data
COPY --from=build /out/mayfly /usr/local/bin/mayfly
COPY scripts/docker-healthcheck.sh /usr/local/bin/mayfly-healthcheck
USER mayfly:mayfly
VOLUME ["/data"]
EXPOSE 27017
HEALTHCHECK --interval=5s --timeout=5s --start-period=5s --retries=12 CMD ["/usr/local/bin/mayfly-healthcheck"]
ENTRYPOINT ["/usr/local/bin/mayfly"]
CMD ["--bind", "0.0.0.0", "--port", "27017", "--dbpath", "/data"]
