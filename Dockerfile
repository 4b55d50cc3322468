# The loadlab image for sharded runs on Kubernetes (`loadlab k8s job`): a release build of the
# one binary on a slim Debian, with CA roots for https:// (`scripts/oci-image.py` builds an image
# without docker or a base image, for a cluster whose nodes import it).
#   docker build -t loadlab:0.1.0 .
FROM rust:1-slim-bookworm AS build
WORKDIR /src
COPY . .
RUN cargo build --release --locked -p loadlab \
    && strip target/release/loadlab

FROM debian:bookworm-slim
RUN apt-get update \
    && apt-get install -y --no-install-recommends ca-certificates \
    && rm -rf /var/lib/apt/lists/* \
    && useradd --uid 10001 --create-home loadlab
COPY --from=build /src/target/release/loadlab /usr/local/bin/loadlab
USER 10001
EXPOSE 9090
ENTRYPOINT ["loadlab"]
