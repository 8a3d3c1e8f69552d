# The hookline binary in a small image (used by docker-compose.yml's dispatcher service).
FROM rust:1.95-bookworm AS build
WORKDIR /src
COPY . .
RUN cargo build --release --locked -p hookline

FROM debian:bookworm-slim
RUN apt-get update \
 && apt-get install -y --no-install-recommends ca-certificates libssl3 \
 && rm -rf /var/lib/apt/lists/*
COPY --from=build /src/target/release/hookline /usr/local/bin/hookline
USER 65532:65532
EXPOSE 9464
ENTRYPOINT ["hookline"]
CMD ["dispatch"]
