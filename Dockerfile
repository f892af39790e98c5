# syntax=docker/dockerfile:1
# Build: docker build -t vidra .
FROM golang:1.26 AS builder
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
# The version the binary reports: a pull cluster's agent tells the hub its own.
ARG VERSION=dev
RUN CGO_ENABLED=0 go build -trimpath -ldflags="-s -w -X github.com/vidra-operator/vidra/internal/runtime/version.version=${VERSION}" -o /vidra ./cmd/vidra

FROM gcr.io/distroless/static:nonroot
COPY --from=builder /vidra /vidra
USER 65532:65532
ENTRYPOINT ["/vidra"]
